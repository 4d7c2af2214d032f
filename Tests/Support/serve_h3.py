#!/usr/bin/env python3
"""Run an HTTP/3 test peer for Courier's tests: hypercorn (on aioquic) serving one pure-ASGI
app over TLS (HTTP/1.1 and HTTP/2) and QUIC (HTTP/3) on the same loopback port number.
Run it with the virtualenv's python (PyPI `hypercorn` and `aioquic`, see scripts/bootstrap).

Usage:  .venv/bin/python serve_h3.py [--parent-pid PID]

Writes a self-signed certificate (EC P-256, CN=localhost, subjectAltName IP:127.0.0.1 and
DNS:localhost, CA:TRUE, so it is its own CA bundle), its key and its libcurl public-key pin
into a fresh temporary directory (cert.pem, key.pem, pin.txt), then serves on 127.0.0.1:P

  * TCP: TLS 1.2/1.3 with ALPN h2 and http/1.1, and
  * UDP: QUIC with HTTP/3 (ALPN h3),

P being one port number free for both, so that the ``Alt-Svc: h3=":P"; ma=3600`` header that
hypercorn adds to every response points at the QUIC listener.  Prints exactly
``READY <port> <path-to-cert.pem>`` on stdout once both answer a request, then nothing more.

Every response carries ``X-HTTP-Version`` (the request's protocol as the app saw it: ``3``,
``2`` or ``1.1``).  Routes (JSON bodies are application/json; "pattern bytes": byte i is
i % 251):

  ANY /anything[/<anything>]   the request as JSON: method, path, query, headers, body
                               (bodyBase64), length, sha256, http_version, client, json
  GET /get                     the same, GET and HEAD only
  GET /bytes/<n>               n pattern bytes, Content-Length n, in 64 KiB pieces
  GET /file/<n>                the same as a file: ETag "n-v1", Accept-Ranges, Last-Modified,
                               one Range (206 / 416), If-Range
  GET /drip?bytes=N&chunks=K&delay_ms=D
                               N pattern bytes as K pieces, D ms apart
  ANY /delay/<ms>              the /anything JSON (and delay_ms) after ms milliseconds
  ANY /status/<code>           that status (200..599), empty body
  ANY /upload                  reads the whole body: {"length", "sha256"}
  GET /cookies/set?n=v&...     Set-Cookie: n=v; Path=/ for each; {"cookies": {n: v}}
  GET /cookies                 {"cookies": {n: v}} from the request's Cookie header(s)
  GET /cache/<name>?max_age=S  Cache-Control: max-age=S (60), ETag "<name>-<count>",
                               {"name", "served"}; a matching If-None-Match gets 304
  GET /gzip                    a gzip-compressed JSON body (Content-Encoding: gzip)
  GET /trailers?n=N            N pattern bytes, then the trailer fields Server-Timing:
                               db;dur=53 and X-Checksum: <sha256 of the body> (HTTP/2 and
                               HTTP/3 only, and only to a request that says TE: trailers, as
                               the protocols ask; otherwise the body alone)
  GET /stats                   {"requests", "by_version", "clients_by_version"}
  POST /stats/reset            zeroes them
  anything else                404 with a short text body

Every route reads the whole request body before it answers.  Bodies over 64 KiB go out in
64 KiB pieces and the app waits for room between them, so a client that stops reading stops
the server's sending; a client that goes away (connection closed, stream reset) ends the
response quietly.  Both need fixes to hypercorn 0.18, applied at startup: see
patch_hypercorn().

Stops the server (SIGTERM to its process group, SIGKILL after 3 s), removes the temporary
directory and exits when the parent process disappears, on SIGTERM/SIGINT/SIGHUP, or if the
server dies.  Exits 1 with a message on stderr if the server is not serving within 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gzip
import hashlib
import http.client
import json
import os
import shutil
import socket
import ssl
import sys
import tempfile
import time
from urllib.parse import parse_qsl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

STARTUP_TIMEOUT = 30.0
ATTEMPTS = 3  # fresh ports each time, in case the server dies during startup
STARTED: list[peerlib.ChildGroup] = []

CHUNK = 64 * 1024  # the largest body piece handed to hypercorn at once
H3_HIGH_WATER = 2 << 20  # unacknowledged bytes per HTTP/3 stream before the app waits
UDP_QUEUE = 1024  # received datagrams waiting for the QUIC loop (hypercorn: 10)
LAST_MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"
PATTERN = bytes(i % 251 for i in range(CHUNK + 251))



# ---------------------------------------------------------------------------------------------
# The ASGI app (runs in the server child)
# ---------------------------------------------------------------------------------------------

class Gone(Exception):
    """The client went away (connection closed, stream reset): stop answering."""


class Stats:
    VERSIONS = ("3", "2", "1.1")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.by_version = {v: 0 for v in self.VERSIONS}
        self.clients = {v: set() for v in self.VERSIONS}

    def count(self, version: str, client: str | None) -> None:
        self.requests += 1
        self.by_version[version] = self.by_version.get(version, 0) + 1
        if client is not None:
            self.clients.setdefault(version, set()).add(client)

    def json(self) -> dict:
        return {"requests": self.requests, "by_version": dict(self.by_version),
                "clients_by_version": {v: sorted(c) for v, c in self.clients.items()}}


STATS = Stats()
CACHE_SERVED: dict[str, int] = {}


def pattern(offset: int, length: int) -> bytes:
    """`length` (<= CHUNK) pattern bytes starting at content offset `offset`."""
    start = offset % 251
    return PATTERN[start:start + length]


def parse_range(value: str, size: int) -> tuple[int, int] | None | str:
    """One `bytes=` range of `value` against `size`: (first, last) inclusive, "unsatisfiable",
    or None when the header is to be ignored (malformed, another unit, several ranges)."""
    unit, _, spec = value.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    first, last = first.strip(), last.strip()
    try:
        if first == "":
            if not last.isdigit():
                return None
            suffix = int(last)
            if suffix == 0 or size == 0:
                return "unsatisfiable"
            return max(0, size - suffix), size - 1
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        a = int(first)
        b = int(last) if last else size - 1
    except ValueError:
        return None
    if last and b < a:
        return None
    if a >= size:
        return "unsatisfiable"
    return a, min(b, size - 1)


def etag_matches(header: str, etag: str) -> bool:
    """If-None-Match (weak comparison) against `etag`."""
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return True
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


class Exchange:
    """One request and its response."""

    def __init__(self, scope, receive, send) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send
        self.version: str = scope.get("http_version", "")
        self.method: str = scope["method"]
        self.path: str = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        self.query: str = scope.get("query_string", b"").decode("latin-1")
        self.params = dict(parse_qsl(self.query, keep_blank_values=True))
        client = scope.get("client")
        self.client = f"{client[0]}:{client[1]}" if client else None
        self.header_list = [(k.decode("latin-1").lower(), v.decode("latin-1"))
                            for k, v in scope.get("headers", [])]
        self.body = bytearray()
        self.length = 0
        self.digest = hashlib.sha256()
        self.gone = False
        self.started = False
        self.watcher: asyncio.Task | None = None

    # -- request ----------------------------------------------------------------------------

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.header_list if k == name]
        if not values:
            return None
        return ("; " if name == "cookie" else ", ").join(values)

    def headers_dict(self) -> dict[str, str]:
        names = dict.fromkeys(k for k, _ in self.header_list)
        return {k: self.header(k) for k in names}

    async def read_body(self, keep: bool) -> None:
        """Reads the whole request body (hashing it, keeping it if `keep`), then watches for
        the client going away."""
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.gone = True
                raise Gone()
            chunk = message.get("body", b"")
            if chunk:
                self.length += len(chunk)
                self.digest.update(chunk)
                if keep:
                    self.body += chunk
            if not message.get("more_body", False):
                break
        self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        try:
            while True:
                message = await self._receive()
                if message["type"] == "http.disconnect":
                    self.gone = True
                    return
        except Exception:
            self.gone = True

    # -- response ---------------------------------------------------------------------------

    async def send(self, message: dict) -> None:
        if self.gone:
            raise Gone()
        try:
            await self._send(message)
        except Exception as error:  # hypercorn/aioquic: the stream or connection is gone
            self.gone = True
            raise Gone() from error
        if message.get("more_body"):
            # A send to a closed connection may return without ever suspending: yield, so
            # that the watcher can see http.disconnect.
            await asyncio.sleep(0)

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        headers = headers + [("x-http-version", self.version)]
        self.started = True
        await self.send({"type": "http.response.start", "status": status,
                         "headers": [(k.encode("latin-1"), str(v).encode("latin-1"))
                                     for k, v in headers]})

    async def finish(self) -> None:
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def piece(self, data: bytes) -> None:
        """Body bytes, more to come: in pieces of at most CHUNK bytes."""
        if self.method == "HEAD":
            return
        for i in range(0, len(data), CHUNK):
            await self.send({"type": "http.response.body", "body": data[i:i + CHUNK],
                             "more_body": True})

    async def respond(self, status: int, body: bytes = b"", headers=None,
                      content_type: str | None = None) -> None:
        headers = list(headers or [])
        if content_type is not None:
            headers.append(("content-type", content_type))
        if status >= 200 and status not in (204, 304):
            headers.append(("content-length", str(len(body))))
        await self.start(status, headers)
        if status not in (204, 304):
            await self.piece(body)
        await self.finish()

    async def respond_json(self, value, status: int = 200, headers=None) -> None:
        body = (json.dumps(value, indent=2) + "\n").encode()
        await self.respond(status, body, headers, "application/json")

    async def respond_text(self, status: int, text: str) -> None:
        await self.respond(status, text.encode(), None, "text/plain; charset=utf-8")

    async def pattern_body(self, first: int, count: int, delay: float = 0.0,
                           pieces: int = 1) -> None:
        """`count` pattern bytes starting at content offset `first`, in `pieces` parts
        `delay` seconds apart, each part in CHUNK-sized pieces."""
        if self.method == "HEAD":
            return
        pieces = max(1, min(pieces, count)) if count else 1
        base, extra = divmod(count, pieces)
        offset = first
        for p in range(pieces):
            if p and delay:
                await asyncio.sleep(delay)
                if self.gone:
                    raise Gone()
            size = base + (1 if p < extra else 0)
            end = offset + size
            while offset < end:
                n = min(CHUNK, end - offset)
                await self.send({"type": "http.response.body", "body": pattern(offset, n),
                                 "more_body": True})
                offset += n

    # -- routes -----------------------------------------------------------------------------

    def anything_json(self) -> dict:
        try:
            body, b64 = self.body.decode("utf-8"), False
        except UnicodeDecodeError:
            body, b64 = base64.b64encode(self.body).decode(), True
        parsed = None
        media = (self.header("content-type") or "").split(";")[0].strip().lower()
        if media == "application/json" or media.endswith("+json"):
            try:
                parsed = json.loads(self.body)
            except ValueError:
                parsed = None
        return {"method": self.method, "path": self.path, "query": self.query,
                "headers": self.headers_dict(), "body": body, "bodyBase64": b64,
                "length": self.length, "sha256": self.digest.hexdigest(),
                "http_version": self.version, "client": self.client, "json": parsed}

    async def route(self) -> None:
        path, method = self.path, self.method
        parts = path.split("/")  # ["", "bytes", "123"]
        keeps_body = path in ("/get", "/anything") or path.startswith(("/anything/", "/delay/"))
        if path not in ("/stats", "/stats/reset"):
            STATS.count(self.version, self.client)
        await self.read_body(keep=keeps_body)

        if path == "/anything" or path.startswith("/anything/"):
            return await self.respond_json(self.anything_json())
        if path == "/get":
            if method not in ("GET", "HEAD"):
                return await self.respond(405, b"", [("allow", "GET, HEAD")])
            return await self.respond_json(self.anything_json())
        if len(parts) == 3 and parts[1] in ("bytes", "file", "delay", "status"):
            try:
                number = int(parts[2])
                if number < 0 or not parts[2].isdigit():
                    raise ValueError
            except ValueError:
                return await self.respond_text(400, f"bad number {parts[2]!r}\n")
            if parts[1] == "bytes":
                return await self.bytes_route(number)
            if parts[1] == "file":
                return await self.file_route(number)
            if parts[1] == "delay":
                if number > 600_000:
                    return await self.respond_text(400, "delay is at most 600000 ms\n")
                await asyncio.sleep(number / 1000)
                return await self.respond_json(self.anything_json() | {"delay_ms": number})
            if not 200 <= number <= 599:
                return await self.respond_text(400, "status must be 200..599\n")
            return await self.respond(number)
        if path == "/drip":
            return await self.drip_route()
        if path == "/upload":
            return await self.respond_json({"length": self.length,
                                            "sha256": self.digest.hexdigest()})
        if path == "/cookies/set":
            cookies = dict(parse_qsl(self.query, keep_blank_values=True))
            headers = [("set-cookie", f"{k}={v}; Path=/") for k, v in cookies.items()]
            return await self.respond_json({"cookies": cookies}, headers=headers)
        if path == "/cookies":
            cookies = {}
            for name, value in self.header_list:
                if name == "cookie":
                    for pair in value.split(";"):
                        k, eq, v = pair.strip().partition("=")
                        if k and eq:
                            cookies[k] = v
            return await self.respond_json({"cookies": cookies})
        if path.startswith("/cache/") and len(path) > len("/cache/"):
            return await self.cache_route(path[len("/cache/"):])
        if path == "/gzip":
            body = json.dumps({"gzipped": True, "method": method, "headers": self.headers_dict(),
                               "http_version": self.version}, indent=2).encode() + b"\n"
            return await self.respond(200, gzip.compress(body, mtime=0),
                                      [("content-encoding", "gzip")], "application/json")
        if path == "/trailers":
            return await self.trailers_route(int(dict(parse_qsl(self.query)).get("n", "1000")))
        if path == "/stats":
            return await self.respond_json(STATS.json())
        if path == "/stats/reset":
            if method != "POST":
                return await self.respond(405, b"", [("allow", "POST")])
            STATS.reset()
            return await self.respond_json(STATS.json())
        return await self.respond_text(404, f"no route for {path}\n")

    async def trailers_route(self, n: int) -> None:
        body = bytes(i % 251 for i in range(n))
        wants = ("te", "trailers") in [(k, v.lower()) for k, v in self.header_list]
        self.started = True
        await self.send({"type": "http.response.start", "status": 200, "trailers": wants,
                         "headers": [(b"content-type", b"application/octet-stream"),
                                     (b"x-http-version", self.version.encode())]})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})
        if wants:
            await self.send({"type": "http.response.trailers", "more_trailers": False,
                             "headers": [(b"server-timing", b"db;dur=53"),
                                         (b"x-checksum", hashlib.sha256(body).hexdigest().encode())]})

    async def bytes_route(self, n: int) -> None:
        await self.start(200, [("content-type", "application/octet-stream"),
                               ("content-length", str(n))])
        await self.pattern_body(0, n)
        await self.finish()

    async def file_route(self, n: int) -> None:
        etag = f'"{n}-v1"'
        headers = [("etag", etag), ("accept-ranges", "bytes"), ("last-modified", LAST_MODIFIED),
                   ("content-type", "application/octet-stream")]
        wanted = self.header("range")
        if_range = self.header("if-range")
        if wanted is not None and if_range is not None \
                and if_range.strip() not in (etag, LAST_MODIFIED):
            wanted = None
        answer = parse_range(wanted, n) if wanted is not None else None
        if answer == "unsatisfiable":
            return await self.respond(416, b"", headers + [("content-range", f"bytes */{n}")])
        if answer is None:
            await self.start(200, headers + [("content-length", str(n))])
            await self.pattern_body(0, n)
        else:
            first, last = answer
            await self.start(206, headers + [("content-range", f"bytes {first}-{last}/{n}"),
                                             ("content-length", str(last - first + 1))])
            await self.pattern_body(first, last - first + 1)
        await self.finish()

    async def drip_route(self) -> None:
        try:
            n = int(self.params.get("bytes", "1024"))
            chunks = int(self.params.get("chunks", "4"))
            delay_ms = int(self.params.get("delay_ms", "250"))
            if n < 0 or chunks < 1 or delay_ms < 0:
                raise ValueError
        except ValueError:
            return await self.respond_text(400, "bytes >= 0, chunks >= 1, delay_ms >= 0\n")
        await self.start(200, [("content-type", "application/octet-stream"),
                               ("content-length", str(n))])
        await self.pattern_body(0, n, delay_ms / 1000, chunks)
        await self.finish()

    async def cache_route(self, name: str) -> None:
        try:
            max_age = int(self.params.get("max_age", "60"))
        except ValueError:
            return await self.respond_text(400, "bad max_age\n")
        served = CACHE_SERVED.get(name, 0)
        inm = self.header("if-none-match")
        headers = [("cache-control", f"max-age={max_age}")]
        if served and inm is not None and etag_matches(inm, f'"{name}-{served}"'):
            return await self.respond(304, b"", headers + [("etag", f'"{name}-{served}"')])
        served += 1
        CACHE_SERVED[name] = served
        await self.respond_json({"name": name, "served": served},
                                headers=headers + [("etag", f'"{name}-{served}"')])

    async def run(self) -> None:
        try:
            await self.route()
        except Gone:
            pass
        except Exception as error:  # a bug here: say so, answer 500 if still possible
            print(f"serve_h3.py: {self.method} {self.path}: {error!r}", file=sys.stderr, flush=True)
            if not self.started and not self.gone:
                try:
                    await self.respond_text(500, f"{error!r}\n")
                except Gone:
                    pass
        finally:
            if self.watcher is not None:
                self.watcher.cancel()


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope["type"] == "http":
        await Exchange(scope, receive, send).run()


# ---------------------------------------------------------------------------------------------
# hypercorn 0.18's HTTP/3 side, amended (runs in the server child)
# ---------------------------------------------------------------------------------------------

def patch_hypercorn() -> None:
    """Gaps in hypercorn 0.18's HTTP/3 protocol (hypercorn/protocol/h3.py, quic.py) and in
    its HTTP/2 protocol (h2.py), filled by replacing a few methods:

    * Backpressure: `send_data` appends to aioquic's stream buffer, which never refuses, so a
      1 GiB body to a client that stops reading would sit in memory.  After each body piece
      we wait while more than H3_HIGH_WATER bytes of the stream are unacknowledged, woken
      whenever the connection has processed a datagram or a timer.
    * Cancellation: a stream reset (RESET_STREAM / STOP_SENDING) or the end of the connection
      is never passed on to the app.  We end the stream, so the app gets http.disconnect, and
      a send on it raises instead of buffering for nobody.
    * Robustness: request DATA for a stream that has already been answered raised KeyError
      in the datagram loop (ending QUIC service for everyone); it is now dropped.  Request
      trailers no longer start a second request on the same stream.
    * Datagrams: hypercorn queues at most 10 received datagrams and drops the rest, which a
      fast sender (a 4 MiB upload) sees as loss: the queue holds UDP_QUEUE now.
    * HTTP/2 backpressure: a stream's send buffer let the app go on whenever the sender
      took less than 16 KiB from it, and with the client's window at zero it takes nothing,
      so a client that stopped reading got the whole body buffered in memory.  The app now
      goes on once less than 16 KiB is left in the buffer.
    * HTTP/2: when the connection closes while the app waits for room in a stream's send
      buffer (a client that stopped reading, then went away), nothing ever wakes the app.
      Closing the buffers makes its sends return (and the app sees http.disconnect).
    """
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.connection import END_STATES
    from aioquic.quic.events import ConnectionTerminated, StopSendingReceived, StreamReset
    from hypercorn.protocol.events import Body, Data, EndBody
    from hypercorn.asyncio.udp_server import UDPServer
    from hypercorn.events import Closed
    from hypercorn.protocol.h2 import BUFFER_LOW_WATER, H2Protocol, StreamBuffer
    from hypercorn.protocol.h3 import H3Protocol
    from hypercorn.protocol.quic import QuicProtocol

    progress: dict[object, asyncio.Event] = {}

    original_send_all = QuicProtocol.send_all

    async def send_all(self, connection) -> None:
        await original_send_all(self, connection)
        event = progress.pop(connection.quic, None)
        if event is not None:
            event.set()

    def close_stream(self, stream_id: int) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is None or stream.closed:
            return
        stream.closed = True
        queue = getattr(getattr(stream, "app_put", None), "__self__", None)
        if isinstance(queue, asyncio.Queue):
            try:
                queue.put_nowait({"type": "http.disconnect"})
            except asyncio.QueueFull:
                pass

    async def handle(self, quic_event) -> None:
        for event in self.connection.handle_event(quic_event):
            if isinstance(event, HeadersReceived):
                stream = self.streams.get(event.stream_id)
                if stream is None:
                    if self.context.terminated.is_set():
                        continue
                    await self._create_stream(event)
                    stream = self.streams.get(event.stream_id)
                # else: trailers, which the app does not see
                if event.stream_ended and stream is not None:
                    await stream.handle(EndBody(stream_id=event.stream_id))
            elif isinstance(event, DataReceived):
                stream = self.streams.get(event.stream_id)
                if stream is None:
                    continue
                if event.data:
                    await stream.handle(Body(stream_id=event.stream_id, data=event.data))
                if event.stream_ended:
                    await stream.handle(EndBody(stream_id=event.stream_id))
        if isinstance(quic_event, (StreamReset, StopSendingReceived)):
            close_stream(self, quic_event.stream_id)
        elif isinstance(quic_event, ConnectionTerminated):
            for stream_id in list(self.streams):
                close_stream(self, stream_id)

    original_stream_send = H3Protocol.stream_send

    async def stream_send(self, event) -> None:
        quic = self.connection._quic
        if not isinstance(event, (Body, Data)):
            try:
                await original_stream_send(self, event)
            except Exception:  # the stream was reset or the connection is gone
                pass
            return
        try:
            await original_stream_send(self, event)
        except Exception as error:
            raise ConnectionResetError(f"HTTP/3 stream {event.stream_id}: {error}") from error
        while True:
            if quic._close_event is not None or quic._state in END_STATES:
                raise ConnectionResetError("QUIC connection closed")
            stream = quic._streams.get(event.stream_id)
            if stream is None:
                return
            sender = stream.sender
            if sender._reset_error_code is not None:
                raise ConnectionResetError(f"HTTP/3 stream {event.stream_id} reset")
            if sender._buffer_stop - sender._buffer_start <= H3_HIGH_WATER:
                return
            waiter = progress.setdefault(quic, asyncio.Event())
            try:
                await asyncio.wait_for(waiter.wait(), 1.0)
            except asyncio.TimeoutError:
                pass

    async def pop(self, max_length: int) -> bytes:
        length = min(len(self.buffer), max_length)
        data = bytes(self.buffer[:length])
        del self.buffer[:length]
        if len(self.buffer) < BUFFER_LOW_WATER:  # what is left, not what was taken
            await self._paused.set()
        if len(self.buffer) == 0:
            await self._is_empty.set()
        return data

    original_h2_handle = H2Protocol.handle

    async def h2_handle(self, event) -> None:
        await original_h2_handle(self, event)
        if isinstance(event, Closed):
            for buffer in list(self.stream_buffers.values()):
                await buffer.close()

    original_udp_init = UDPServer.__init__

    def udp_init(self, *args, **kwargs) -> None:
        original_udp_init(self, *args, **kwargs)
        self.protocol_queue = asyncio.Queue(UDP_QUEUE)

    UDPServer.__init__ = udp_init
    QuicProtocol.send_all = send_all
    H2Protocol.handle = h2_handle
    StreamBuffer.pop = pop
    H3Protocol.handle = handle
    H3Protocol.stream_send = stream_send


def serve(tcp_fd: int, udp_fd: int, cert: str, key: str) -> int:
    """The server child: hypercorn on the inherited sockets, until SIGTERM."""
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    patch_hypercorn()
    config = Config()
    config.bind = [f"fd://{tcp_fd}"]
    config.quic_bind = [f"fd://{udp_fd}"]
    config.certfile, config.keyfile = cert, key
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.keep_alive_timeout = 60
    config.keep_alive_max_requests = 100_000
    config.backlog = 1024
    config.graceful_timeout = 0.5

    async def forever() -> None:  # no shutdown trigger: SIGTERM's default action ends us
        await asyncio.Event().wait()

    asyncio.run(hypercorn_serve(app, config, shutdown_trigger=forever, mode="asgi"))
    return 0


# ---------------------------------------------------------------------------------------------
# The launcher
# ---------------------------------------------------------------------------------------------

def make_certificate(tmp: str) -> tuple[str, str]:
    """cert.pem, key.pem and pin.txt (libcurl's sha256//base64 of the SPKI) in `tmp`."""
    cert, key = peerlib.make_localhost_certificate(tmp)
    spki = peerlib.openssl("pkey", "-in", key, "-pubout", "-outform", "DER")
    with open(os.path.join(tmp, "pin.txt"), "w") as f:
        f.write("sha256//" + base64.b64encode(hashlib.sha256(spki).digest()).decode() + "\n")
    return cert, key


def bind_pair() -> tuple[socket.socket, socket.socket]:
    """A TCP and a UDP socket bound to the same free loopback port number."""
    for _ in range(200):
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tcp.bind(("127.0.0.1", 0))
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            udp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            udp.bind(("127.0.0.1", tcp.getsockname()[1]))
            return tcp, udp
        except OSError:
            tcp.close()
            udp.close()
    peerlib.fail("found no port number free for both TCP and UDP")
    raise AssertionError


def tls_answers(port: int, cert: str) -> bool:
    """A GET /stats over TLS (HTTP/1.1) answers 200."""
    try:
        ctx = ssl.create_default_context(cafile=cert)
        ctx.set_alpn_protocols(["http/1.1"])
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=ctx)
        conn.request("GET", "/stats")
        status = conn.getresponse().status
        conn.close()
        return status == 200
    except (OSError, ssl.SSLError, http.client.HTTPException):
        return False


async def h3_status(port: int, cert: str, path: str) -> int | None:
    """GET `path` over HTTP/3 with aioquic's client: the response status."""
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection

    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    status: list[int] = []

    class Client(QuicConnectionProtocol):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.h3 = H3Connection(self._quic)

        def quic_event_received(self, event) -> None:
            for e in self.h3.handle_event(event):
                if isinstance(e, HeadersReceived) and not status:
                    status.extend(int(v) for k, v in e.headers if k == b":status")
                if isinstance(e, (HeadersReceived, DataReceived)) and e.stream_ended \
                        and not done.done():
                    done.set_result(None)

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    config.load_verify_locations(cert)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    transport, client = await loop.create_datagram_endpoint(
        lambda: Client(QuicConnection(configuration=config)), sock=sock)
    try:
        client.connect(("127.0.0.1", port))
        await client.wait_connected()
        stream_id = client._quic.get_next_available_stream_id()
        client.h3.send_headers(stream_id, [
            (b":method", b"GET"), (b":scheme", b"https"),
            (b":authority", f"localhost:{port}".encode()), (b":path", path.encode())],
            end_stream=True)
        client.transmit()
        await done
        return status[0] if status else None
    finally:
        client.close()
        try:
            await asyncio.wait_for(client.wait_closed(), 1)
        except asyncio.TimeoutError:
            pass
        timer = getattr(client, "_timer", None)  # else it may fire on the closed transport
        if timer is not None:
            timer.cancel()
        transport.close()


def quic_answers(port: int, cert: str) -> bool:
    try:
        return asyncio.run(asyncio.wait_for(h3_status(port, cert, "/stats"), 2)) == 200
    except peerlib.Stop:
        raise
    except Exception:
        return False


def start(cert: str, key: str):
    """Start hypercorn; returns (child, port) once TLS and QUIC answer, None if it died early."""
    tcp, udp = bind_pair()
    port = tcp.getsockname()[1]
    try:
        child = peerlib.ChildGroup(
            [sys.executable, os.path.abspath(__file__), "--serve", str(tcp.fileno()),
             str(udp.fileno()), "--cert", cert, "--key", key],
            pass_fds=(tcp.fileno(), udp.fileno()))
    finally:
        tcp.close()
        udp.close()
    STARTED.append(child)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if not child.alive():
            child.stop()
            return None
        if tls_answers(port, cert) and quic_answers(port, cert):
            return child, port
        time.sleep(0.05)
    child.stop()
    peerlib.fail(f"hypercorn did not answer on 127.0.0.1:{port} (TCP and UDP) "
                 f"within {STARTUP_TIMEOUT:.0f} s")
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description="HTTP/3 (and HTTP/2, HTTP/1.1 over TLS) test peer: "
                                             "hypercorn on aioquic, one loopback port.")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process disappears (default: the parent)")
    ap.add_argument("--serve", nargs=2, type=int, metavar=("TCP_FD", "UDP_FD"),
                    help=argparse.SUPPRESS)  # the server child
    ap.add_argument("--cert", help=argparse.SUPPRESS)
    ap.add_argument("--key", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.serve:
        return serve(args.serve[0], args.serve[1], args.cert, args.key)

    try:
        import aioquic  # noqa: F401
        import hypercorn  # noqa: F401
    except ImportError as error:
        peerlib.fail(f"{error}: run me with the virtualenv's python (scripts/bootstrap installs "
                     f"hypercorn and aioquic)")

    peerlib.install_stop_signals()
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="courier-h3-"))

    def cleanup() -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    try:
        try:
            cert, key = make_certificate(tmp)
            child, port = None, None
            for attempt in range(ATTEMPTS):
                started = start(cert, key)
                if started is not None:
                    child, port = started
                    break
                print(f"serve_h3.py: hypercorn exited during startup (attempt {attempt + 1})",
                      file=sys.stderr, flush=True)
            if child is None:
                peerlib.fail("hypercorn kept exiting during startup; see its messages above")
        except peerlib.Stop:
            peerlib.shutdown(STARTED, cleanup)
            return 0
    except BaseException:  # peerlib.fail's SystemExit, or anything unexpected
        peerlib.shutdown(STARTED, cleanup)
        raise

    peerlib.announce(f"READY {port} {cert}")
    return peerlib.supervise(args.parent_pid, [child], cleanup)


if __name__ == "__main__":
    sys.exit(main())
