#!/usr/bin/env python3
"""Courier's fault server: a deliberately misbehaving HTTP/1.1 peer for tests.

Python 3.11 standard library only.  One thread per connection on raw sockets,
so each route can misbehave byte-precisely.  Well-behaved routes keep the
connection alive and handle pipelined requests.

Usage:  python3 fault_server.py --port 0 [--parent-pid PID] [--verbose]

Binds 127.0.0.1, prints exactly ``READY <port>`` on stdout once listening,
and never writes to stdout again.  Exits by itself when the parent process
(``--parent-pid``, or else the process that started it) disappears.

See README.md beside this file for the routes.
"""

from __future__ import annotations

import _thread
import argparse
import base64
import hashlib
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
import zlib
from http import HTTPStatus
from urllib.parse import parse_qs, unquote, urlsplit

# --------------------------------------------------------------------------
# Constants and shared state

SERVER_NAME = "courier-fault/1"
LAST_MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"
MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT = 60.0          # keep-alive idle time before the server closes
IO_TIMEOUT = 300.0           # while reading a request body or sending a response (a paused client)
SILENT_MAX = 600.0           # how long "silent" routes hold a socket at most
LINGER = 2.0                 # how long a deliberate close waits for the peer's FIN

# Deterministic content: byte i is i % 251.  PATTERN is long enough that any
# slice of up to CHUNK bytes can start at any phase 0..250.
_PERIOD = 251
CHUNK = 256 * 1024
PATTERN = bytes(range(_PERIOD)) * (CHUNK // _PERIOD + 2)
PATTERN_VIEW = memoryview(PATTERN)

VERBOSE = False


def log(*args: object) -> None:
    if VERBOSE:
        print("fault_server:", *args, file=sys.stderr, flush=True)


def pattern_bytes(offset: int, length: int) -> bytes:
    """Deterministic bytes [offset, offset+length) (small sizes)."""
    out = bytearray()
    while length > 0:
        n = min(length, CHUNK)
        phase = offset % _PERIOD
        out += PATTERN_VIEW[phase:phase + n]
        offset += n
        length -= n
    return bytes(out)


class FileStats:
    def __init__(self) -> None:
        self.requests = 0
        self.bytes_sent = 0
        self.ranges: list[str | None] = []
        self.drops = 0
        self.authorizations: list[str | None] = []
        self.times: list[float] = []              # arrival times (time.time())
        self.methods: list[str] = []
        self.last_event_ids: list[str | None] = []

    def as_json(self) -> dict:
        return {"requests": self.requests, "bytesSent": self.bytes_sent,
                "ranges": list(self.ranges), "drops": self.drops,
                "authorizations": list(self.authorizations),
                "times": list(self.times), "methods": list(self.methods),
                "lastEventIds": list(self.last_event_ids)}


STATS: dict[str, FileStats] = {}
STATS_LOCK = threading.Lock()

BOMBS: dict[int, bytes] = {}
BOMB_LOCKS: dict[int, threading.Lock] = {}
BOMBS_LOCK = threading.Lock()


def bomb_body(mb: int) -> bytes:
    """gzip of `mb` MiB of zero bytes, computed once per size."""
    with BOMBS_LOCK:
        if mb in BOMBS:
            return BOMBS[mb]
        lock = BOMB_LOCKS.setdefault(mb, threading.Lock())
    with lock:
        with BOMBS_LOCK:
            if mb in BOMBS:
                return BOMBS[mb]
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31 = gzip wrapper
        zeros = bytes(1024 * 1024)
        parts = []
        for _ in range(mb):
            parts.append(comp.compress(zeros))
        parts.append(comp.flush())
        body = b"".join(parts)
        with BOMBS_LOCK:
            BOMBS[mb] = body
        return body


# --------------------------------------------------------------------------
# Connection and request plumbing


class ClientGone(Exception):
    """The peer closed or reset the connection."""


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    # -- reading --

    def _fill(self, eof_ok: bool = False) -> bool:
        try:
            data = self.sock.recv(256 * 1024)
        except (ConnectionError, OSError) as e:
            if isinstance(e, socket.timeout):
                raise
            raise ClientGone(str(e))
        if not data:
            if eof_ok:
                return False
            raise ClientGone("eof")
        self.buf += data
        return True

    def read_head(self) -> bytes | None:
        """Bytes of one request head (without the blank line); None on clean EOF."""
        while True:
            # Tolerate stray CRLFs between pipelined requests (RFC 9112 2.2).
            while self.buf[:2] == b"\r\n":
                del self.buf[:2]
            idx = self.buf.find(b"\r\n\r\n")
            if idx >= 0:
                head = bytes(self.buf[:idx])
                del self.buf[:idx + 4]
                return head
            if len(self.buf) > MAX_HEADER_BYTES:
                raise BadRequest(431, "request head too large")
            if not self._fill(eof_ok=True):
                if self.buf.strip():
                    raise ClientGone("eof inside request head")
                return None

    def read_line(self, limit: int = 8192) -> bytes:
        while True:
            idx = self.buf.find(b"\r\n")
            if idx >= 0:
                line = bytes(self.buf[:idx])
                del self.buf[:idx + 2]
                return line
            if len(self.buf) > limit:
                raise BadRequest(400, "line too long")
            self._fill()

    def read_into(self, n: int, sink) -> None:
        """Read exactly n bytes, passing them to sink (a callable or None)."""
        while n > 0:
            if not self.buf:
                self._fill()
            take = min(n, len(self.buf))
            if sink is not None:
                sink(bytes(self.buf[:take]))
            del self.buf[:take]
            n -= take

    # -- writing --

    def send(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self.sock.sendall(data)
        except (ConnectionError, OSError) as e:
            raise ClientGone(str(e))

    def send_counted(self, data: memoryview, on_sent) -> None:
        """Send, reporting each piece the kernel accepted to on_sent(n)."""
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
            except (ConnectionError, OSError) as e:
                raise ClientGone(str(e))
            on_sent(n)
            view = view[n:]

    # -- closing --

    def lingering_close(self) -> None:
        """Close gracefully: FIN first, then drain so no RST destroys our data."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        deadline = time.monotonic() + LINGER
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.sock.settimeout(left)
                if not self.sock.recv(65536):
                    break
        except OSError:
            pass
        self.close()

    def hold_open(self) -> None:
        """Say nothing; discard input until the peer closes (or SILENT_MAX)."""
        self.buf.clear()
        deadline = time.monotonic() + SILENT_MAX
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.sock.settimeout(min(left, 5.0))
                try:
                    if not self.sock.recv(65536):
                        break
                except socket.timeout:
                    continue
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Request:
    def __init__(self, head: bytes) -> None:
        try:
            text = head.decode("latin-1")
        except Exception:  # pragma: no cover - latin-1 never fails
            raise BadRequest(400, "undecodable head")
        lines = text.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(400, "bad request line")
        self.method, self.target, self.version = parts
        self.headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if ":" not in line or line[:1] in (" ", "\t"):
                raise BadRequest(400, "bad header line")
            name, value = line.split(":", 1)
            if not name or name != name.strip():
                raise BadRequest(400, "bad header name")
            self.headers.append((name, value.strip(" \t")))
        split = urlsplit(self.target)
        self.raw_path = split.path or "/"
        self.path = unquote(self.raw_path)
        self.query = split.query
        self.params = {k: v[0] for k, v in parse_qs(self.query, keep_blank_values=True).items()}
        self.body_read = False
        self.sent_continue = False

    def header(self, name: str) -> str | None:
        lname = name.lower()
        values = [v for n, v in self.headers if n.lower() == lname]
        return ", ".join(values) if values else None

    def tokens(self, name: str) -> set[str]:
        value = self.header(name) or ""
        return {t.strip().lower() for t in value.split(",") if t.strip()}

    @property
    def keep_alive(self) -> bool:
        conn = self.tokens("Connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn

    @property
    def is_chunked(self) -> bool:
        te = self.tokens("Transfer-Encoding")
        return "chunked" in te

    @property
    def content_length(self) -> int:
        cl = self.header("Content-Length")
        if cl is None:
            return 0
        values = {v.strip() for v in cl.split(",")}
        if len(values) != 1:
            raise BadRequest(400, "conflicting Content-Length")
        value = values.pop()
        if not value.isdigit():
            raise BadRequest(400, "bad Content-Length")
        return int(value)

    def has_body(self) -> bool:
        return self.is_chunked or self.content_length > 0

    def int_param(self, name: str, default: int | None = None, minimum: int = 0) -> int:
        raw = self.params.get(name)
        if raw is None or raw == "":
            if default is None:
                raise BadRequest(400, f"missing query parameter {name}")
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadRequest(400, f"query parameter {name} is not an integer")
        if value < minimum:
            raise BadRequest(400, f"query parameter {name} must be >= {minimum}")
        return value


def read_body(conn: Conn, req: Request, sink) -> tuple[int, dict[str, str]]:
    """Read the request body (Content-Length or chunked), answering
    Expect: 100-continue first.  Returns (length, trailers)."""
    if req.body_read:
        return 0, {}
    req.body_read = True
    trailers: dict[str, str] = {}
    if req.is_chunked:
        chunked, length = True, None
    else:
        chunked, length = False, req.content_length
    if not chunked and length == 0:
        return 0, trailers
    if "100-continue" in req.tokens("Expect") and req.version == "HTTP/1.1":
        conn.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        req.sent_continue = True
    conn.sock.settimeout(IO_TIMEOUT)
    if not chunked:
        conn.read_into(length, sink)
        return length, trailers
    total = 0
    while True:
        line = conn.read_line()
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadRequest(400, "bad chunk size")
        if size < 0:
            raise BadRequest(400, "bad chunk size")
        if size == 0:
            break
        conn.read_into(size, sink)
        total += size
        if conn.read_line() != b"":
            raise BadRequest(400, "missing CRLF after chunk")
    while True:
        line = conn.read_line()
        if line == b"":
            break
        text = line.decode("latin-1")
        if ":" in text:
            name, value = text.split(":", 1)
            trailers[name.strip()] = value.strip()
    return total, trailers


def http_date(ts: float | None = None) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(ts))


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def head_bytes(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason(status)}",
             f"Date: {http_date()}", f"Server: {SERVER_NAME}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def conn_header(req: Request, keep: bool) -> list[tuple[str, str]]:
    return [("Connection", "keep-alive" if keep else "close")]


def respond(conn: Conn, req: Request, status: int, body: bytes = b"",
            headers: list[tuple[str, str]] | None = None,
            content_type: str | None = "text/plain; charset=utf-8",
            keep: bool | None = None, send_length: bool = True) -> bool:
    """A complete, well-formed response.  Returns whether to keep the connection."""
    if keep is None:
        keep = req.keep_alive
    hdrs = list(headers or [])
    if content_type and body:
        hdrs.append(("Content-Type", content_type))
    if send_length:
        hdrs.append(("Content-Length", str(len(body))))
    hdrs += conn_header(req, keep)
    data = head_bytes(status, hdrs)
    if req.method != "HEAD":
        data += body
    conn.send(data)
    return keep


def send_chunked(conn: Conn, pieces, trailers: list[tuple[str, str]] | None = None) -> None:
    for piece in pieces:
        if piece:
            conn.send(b"%x\r\n" % len(piece) + bytes(piece) + b"\r\n")
    trailer = b"".join(f"{name}: {value}\r\n".encode() for name, value in trailers or [])
    conn.send(b"0\r\n" + trailer + b"\r\n")


# --------------------------------------------------------------------------
# Range helpers


def parse_range(value: str, size: int):
    """Returns (start, end_inclusive), "unsatisfiable", or None (ignore the header)."""
    value = value.strip()
    if not value.lower().startswith("bytes="):
        return None
    spec = value[6:].strip()
    if "," in spec:
        return None  # multiple ranges: serve the whole thing
    if "-" not in spec:
        return None
    first, last = (s.strip() for s in spec.split("-", 1))
    try:
        if first == "":
            if not last.isdigit():
                return None
            suffix = int(last)
            if suffix == 0:
                return "unsatisfiable"
            return (max(0, size - suffix), size - 1) if size > 0 else "unsatisfiable"
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size:
        return "unsatisfiable"
    if end < start:
        return None
    return start, min(end, size - 1)


def serve_pattern(conn: Conn, req: Request, size: int, etag: str,
                  stats: FileStats | None = None, drop_after: int | None = None) -> bool:
    """Deterministic content with Range / If-Range / ETag support."""
    rng = None
    range_header = req.header("Range")
    if range_header is not None:
        if_range = req.header("If-Range")
        if if_range is None or if_range.strip() in (etag, LAST_MODIFIED):
            rng = parse_range(range_header, size)
    base = [("ETag", etag), ("Last-Modified", LAST_MODIFIED), ("Accept-Ranges", "bytes")]
    keep = req.keep_alive
    if rng == "unsatisfiable":
        return respond(conn, req, 416, b"", headers=base + [("Content-Range", f"bytes */{size}")])
    if rng is None:
        status, start, length = 200, 0, size
        extra = []
    else:
        start, end = rng
        status, length = 206, end - start + 1
        extra = [("Content-Range", f"bytes {start}-{end}/{size}")]
    drop = drop_after is not None and req.method != "HEAD"
    if drop:
        keep = False
        to_send = min(length, drop_after)
    else:
        to_send = length
    hdrs = base + extra + [("Content-Type", "application/octet-stream"),
                           ("Content-Length", str(length))]
    if not drop:
        hdrs += conn_header(req, keep)
    conn.send(head_bytes(status, hdrs))
    if req.method == "HEAD":
        return keep

    def count(n: int) -> None:
        if stats is not None:
            with STATS_LOCK:
                stats.bytes_sent += n

    offset, remaining = start, to_send
    while remaining > 0:
        n = min(remaining, CHUNK)
        phase = offset % _PERIOD
        conn.send_counted(PATTERN_VIEW[phase:phase + n], count)
        offset += n
        remaining -= n
    if drop:
        conn.lingering_close()
        raise ConnectionDone()
    return keep


class ConnectionDone(Exception):
    """The handler has closed (or abandoned) the connection itself."""


# --------------------------------------------------------------------------
# Routes.  Each returns True to keep the connection alive, False to close it
# (gracefully), or raises ConnectionDone after closing it itself.


def route_bytes(conn: Conn, req: Request) -> bool:
    n = req.int_param("n", 1024)
    read_body(conn, req, None)
    return serve_pattern(conn, req, n, f'"fixed-{n}"')


def route_close_mid_body(conn: Conn, req: Request) -> bool:
    n = req.int_param("n", 1024)
    sent = req.int_param("sent", n // 2)
    read_body(conn, req, None)
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(n))]))
    conn.send(pattern_bytes(0, min(sent, n)))
    conn.lingering_close()
    raise ConnectionDone()


def route_lying_length(conn: Conn, req: Request, keep_open: bool) -> bool:
    n = req.int_param("n", 100)
    claimed = req.int_param("claimed", n * 2)
    read_body(conn, req, None)
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(claimed))]))
    conn.send(pattern_bytes(0, n))
    if keep_open:
        conn.hold_open()
    else:
        conn.lingering_close()
    raise ConnectionDone()


def route_malformed_chunked(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Transfer-Encoding", "chunked")]))
    conn.send(b"zz\r\nhello\r\n")
    conn.lingering_close()
    raise ConnectionDone()


def route_silent(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    conn.hold_open()
    raise ConnectionDone()


def route_hold_body(conn: Conn, req: Request) -> bool:
    """Reads the request head and nothing of the body, never answers, and closes when the
    client does (SILENT_MAX at most): a client that streams a body must stop reading its
    source once the socket's buffers are full."""
    # POLLRDHUP tells that the peer closed even while unread body bytes wait in the buffer.
    poller = select.poll()
    poller.register(conn.sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    deadline = time.monotonic() + SILENT_MAX
    while time.monotonic() < deadline:
        if poller.poll(500):
            break
    raise ConnectionDone()


def route_silent_after_headers(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", "100")]))
    conn.hold_open()
    raise ConnectionDone()


def route_headers_then_close(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", "10")]))
    conn.lingering_close()
    raise ConnectionDone()


def route_drip(conn: Conn, req: Request) -> bool:
    n = req.int_param("n", 10)
    delay = req.int_param("delay", 100) / 1000.0
    read_body(conn, req, None)
    keep = req.keep_alive
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Content-Length", str(n))] + conn_header(req, keep)))
    if req.method == "HEAD":
        return keep
    for i in range(n):
        time.sleep(delay)
        conn.send(PATTERN[i % _PERIOD:i % _PERIOD + 1])
    return keep


def route_redirect_loop(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    rest = req.path[len("/redirect-loop"):].strip("/")
    try:
        k = int(rest) if rest else 0
    except ValueError:
        return respond(conn, req, 404, b"not found\n")
    return respond(conn, req, 302, b"", headers=[("Location", f"/redirect-loop/{k + 1}")])


def route_redirect(conn: Conn, req: Request) -> bool:
    status = req.int_param("status", 302)
    if not 300 <= status <= 399:
        raise BadRequest(400, "status must be 3xx")
    to = req.params.get("to")
    if to is None:
        raise BadRequest(400, "missing query parameter to")
    if "\r" in to or "\n" in to:
        raise BadRequest(400, "CR/LF in Location")
    read_body(conn, req, None)
    return respond(conn, req, status, b"", headers=[("Location", to)])


def route_bomb(conn: Conn, req: Request, chunked: bool) -> bool:
    mb = req.int_param("mb", 10)
    read_body(conn, req, None)
    body = bomb_body(mb)
    keep = req.keep_alive
    hdrs = [("Content-Type", "application/octet-stream"), ("Content-Encoding", "gzip")]
    if chunked:
        hdrs.append(("Transfer-Encoding", "chunked"))
    else:
        hdrs.append(("Content-Length", str(len(body))))
    conn.send(head_bytes(200, hdrs + conn_header(req, keep)))
    if req.method == "HEAD":
        return keep
    if chunked:
        view = memoryview(body)
        send_chunked(conn, (view[i:i + 16384] for i in range(0, len(body), 16384)))
    else:
        conn.send(body)
    return keep


def route_chunked(conn: Conn, req: Request) -> bool:
    """/chunked?n=N&chunk=K: N pattern bytes in chunks of K. With trailers=1, the body ends
    with a trailer section: `Server-Timing: db;dur=53` and `X-Checksum: <SHA-256 of the body>`
    (announced by a `Trailer` field in the head)."""
    n = req.int_param("n", 1024)
    k = req.int_param("chunk", 100, minimum=1)
    read_body(conn, req, None)
    keep = req.keep_alive
    trailers = None
    extra = []
    if req.params.get("trailers") == "1":
        trailers = [("Server-Timing", "db;dur=53"),
                    ("X-Checksum", hashlib.sha256(pattern_bytes(0, n)).hexdigest())]
        extra = [("Trailer", "Server-Timing, X-Checksum")]
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"),
                               ("Transfer-Encoding", "chunked")] + extra + conn_header(req, keep)))
    if req.method == "HEAD":
        return keep

    def pieces():
        offset = 0
        while offset < n:
            size = min(k, n - offset)
            yield pattern_bytes(offset, size)
            offset += size
    send_chunked(conn, pieces(), trailers)
    return keep


def apply_coding(name: str, data: bytes) -> bytes:
    """`data` in the coding `name`: gzip, deflate (zlib's wrapper), deflate-raw (sent as
    `deflate`, as some servers do), anything else as it is."""
    if name == "gzip":
        return zlib.compress(data, 6, wbits=31)
    if name == "deflate":
        return zlib.compress(data, 6)
    if name == "deflate-raw":
        return zlib.compress(data, 6, wbits=-15)
    return data


def route_coded(conn: Conn, req: Request) -> bool:
    """`/coded?ce=C1,C2&te=T1,chunked&n=N&chunk=K&body=TEXT`: a body (TEXT, else N pattern
    bytes) in content codings `ce` (applied in the order given: `Content-Encoding: C1, C2`),
    then transfer codings `te` (`Transfer-Encoding` as given; `chunked` frames it in chunks of
    K bytes, and without `chunked` last the connection closes after the body, RFC 9112 section
    6.3). gzip, deflate and deflate-raw (named `deflate`) are applied; any other name is only
    named. `corrupt=1` sends bytes that are not in the first content coding. The response says
    the body's SHA-256 before coding in `Body-SHA256`."""
    read_body(conn, req, None)
    lists = parse_qs(req.query, keep_blank_values=True)
    text = lists.get("body", [None])[0]
    data = text.encode() if text is not None else pattern_bytes(0, req.int_param("n", 1024))
    digest = hashlib.sha256(data).hexdigest()
    content = [c.strip() for c in req.params.get("ce", "").split(",") if c.strip()]
    transfer = [c.strip() for c in req.params.get("te", "").split(",") if c.strip()]
    coded = data
    for coding in content:
        coded = apply_coding(coding, coded)
    if req.params.get("corrupt") == "1":
        coded = b"\x00not-in-that-coding" + coded[:100]
    for coding in transfer:
        if coding != "chunked":
            coded = apply_coding(coding, coded)
    headers = [("Content-Type", "application/octet-stream"), ("Body-SHA256", digest)]
    if content:
        headers.append(("Content-Encoding", ", ".join("deflate" if c == "deflate-raw" else c for c in content)))
    if not transfer:
        return respond(conn, req, 200, coded, headers=headers, content_type=None)
    named = ", ".join("deflate" if c == "deflate-raw" else c for c in transfer)
    chunked = transfer[-1] == "chunked"
    keep = req.keep_alive and chunked
    conn.send(head_bytes(200, headers + [("Transfer-Encoding", named)] + conn_header(req, keep)))
    if req.method == "HEAD":
        return keep
    if chunked:
        k = req.int_param("chunk", 1000, minimum=1)
        send_chunked(conn, (coded[i:i + k] for i in range(0, len(coded), k)))
        return keep
    conn.send(coded)
    conn.lingering_close()
    raise ConnectionDone()


def route_echo(conn: Conn, req: Request) -> bool:
    digest = hashlib.sha256()
    chunked = req.is_chunked
    length, trailers = read_body(conn, req, digest.update)
    headers: dict[str, str] = {}
    canon: dict[str, str] = {}
    for name, value in req.headers:
        key = canon.setdefault(name.lower(), name)
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    doc = {
        "method": req.method,
        "path": req.path,
        "query": req.query,
        "version": req.version,
        "headers": headers,
        "bodyLength": length,
        "sha256": digest.hexdigest(),
        "chunked": chunked,
        "trailers": trailers,
        "sentContinue": req.sent_continue,
    }
    body = json.dumps(doc).encode()
    return respond(conn, req, 200, body, content_type="application/json")


def route_problem(conn: Conn, req: Request) -> bool:
    """/problem/<status>: an RFC 9457 problem (application/problem+json) with that status:
    RFC 9457's out-of-credit example, whose `status` member is the code, plus `balance` and
    `accounts` as extension members. /problem/<status>?bad-types: `title` a number and `status`
    a string, which a reader must ignore."""
    text = req.path[len("/problem/"):]
    if not text.isdigit() or not 400 <= int(text) <= 599:
        return respond(conn, req, 400, b"status must be 400..599\n")
    code = int(text)
    read_body(conn, req, None)
    problem = {
        "type": "https://example.com/probs/out-of-credit",
        "title": "You do not have enough credit.",
        "status": code,
        "detail": "Your current balance is 30, but that costs 50.",
        "instance": "/account/12345/msgs/abc",
        "balance": 30,
        "accounts": ["/account/12345", "/account/67890"],
    }
    if "bad-types" in req.params:
        problem["title"] = 7
        problem["status"] = str(code)
    return respond(conn, req, code, json.dumps(problem).encode(), content_type="application/problem+json")


def route_status(conn: Conn, req: Request) -> bool:
    text = req.path[len("/status/"):]
    if not text.isdigit() or not 200 <= int(text) <= 599:
        return respond(conn, req, 400, b"status must be 200..599\n")
    code = int(text)
    read_body(conn, req, None)
    if code in (204, 304):
        keep = req.keep_alive
        conn.send(head_bytes(code, conn_header(req, keep)))
        return keep
    return respond(conn, req, code, f"status {code}".encode())


def stats_for(name: str) -> FileStats:
    with STATS_LOCK:
        st = STATS.get(name)
        if st is None:
            st = STATS[name] = FileStats()
        return st


def route_file(conn: Conn, req: Request) -> bool:
    name = req.path[len("/file/"):]
    if not name:
        return respond(conn, req, 404, b"no file name\n")
    n = req.int_param("n", 1024)
    etag = req.params.get("etag")
    etag = f'"{etag}"' if etag else f'"{name}-{n}"'
    drop_after = req.params.get("drop-after")
    drop_times = req.int_param("drop-times", 1)
    range_answer = req.params.get("range-answer")
    read_body(conn, req, None)
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        st.ranges.append(req.header("Range"))
        drop = None
        if drop_after is not None and req.method != "HEAD" and st.drops < drop_times:
            drop = req.int_param("drop-after")
            st.drops += 1
    if range_answer is not None and req.header("Range") is not None and drop is None:
        return answer_range_badly(conn, req, n, etag, range_answer)
    return serve_pattern(conn, req, n, etag, stats=st, drop_after=drop)


# Version 2 of a /file resource (`range-answer=changed`): other bytes under another ETag.
def changed_bytes(offset: int, length: int) -> bytes:
    return bytes((b + 7) % 251 for b in pattern_bytes(offset, length))


def answer_range_badly(conn: Conn, req: Request, size: int, etag: str, how: str) -> bool:
    """A `206` to a `Range: bytes=a-` request that a careless or broken server might send
    (`/file/<name>?range-answer=...`), each announcing `Content-Range: bytes a-(size-1)/size`:
    `changed`: `ETag` of version 2 (`"<etag>-v2"`, the quotes kept) and version 2's bytes from a
    (byte i is `(i % 251 + 7) % 251`), with `Content-Length`;
    `overrun`: the whole resource from byte 0, chunked;
    `short-K`: K bytes from a, no length, then a clean close."""
    rng = parse_range(req.header("Range") or "", size)
    if not isinstance(rng, tuple):
        return respond(conn, req, 416, b"", headers=[("Content-Range", f"bytes */{size}")])
    start = rng[0]
    base = [("Last-Modified", LAST_MODIFIED), ("Accept-Ranges", "bytes"),
            ("Content-Range", f"bytes {start}-{size - 1}/{size}"),
            ("Content-Type", "application/octet-stream")]
    if how == "changed":
        body = changed_bytes(start, size - start)
        conn.send(head_bytes(206, base + [("ETag", etag[:-1] + '-v2"'), ("Content-Length", str(len(body)))]
                             + conn_header(req, req.keep_alive)) + body)
        return req.keep_alive
    if how == "overrun":
        conn.send(head_bytes(206, base + [("ETag", etag), ("Transfer-Encoding", "chunked")]
                             + conn_header(req, req.keep_alive)))
        send_chunked(conn, [pattern_bytes(offset, min(CHUNK, size - offset)) for offset in range(0, size, CHUNK)])
        return req.keep_alive
    if how.startswith("short-") and how[6:].isdigit():
        conn.send(head_bytes(206, base + [("ETag", etag), ("Connection", "close")])
                  + pattern_bytes(start, min(int(how[6:]), size - start)))
        conn.lingering_close()
        raise ConnectionDone()
    return respond(conn, req, 400, b"range-answer is changed, overrun or short-K\n", keep=False)


def route_revalidate(conn: Conn, req: Request) -> bool:
    """A cacheable-by-validator resource: 200 with ETag (no freshness), whose body says
    whether the request was conditional; a matching If-None-Match gets a 304 carrying the
    ``cache-control`` parameter as its Cache-Control (the 200 has none)."""
    etag = f'"{req.params.get("etag", "r1")}"'
    read_body(conn, req, None)
    if req.header("If-None-Match") == etag:
        headers = [("ETag", etag)]
        control = req.params.get("cache-control")
        if control:
            headers.append(("Cache-Control", control))
        return respond(conn, req, 304, b"", headers=headers, send_length=False)
    body = json.dumps({"conditional": req.header("If-None-Match") is not None}).encode()
    return respond(conn, req, 200, body, headers=[("ETag", etag)], content_type="application/json")


def route_cache_probe(conn: Conn, req: Request) -> bool:
    """`/cache-probe/<name>?h=Name:Value&...`: a response for cache tests, made from the query.
    Every request is counted in `/stats/<name>` (`requests`, `methods`, and the
    `If-None-Match` it sent in `ranges`); the response says its number in `Server-Request-Count`
    and, unless `body=` is given, in its body (`response N`), so that a test tells a stored
    answer from a new one.  `status=N` sets the status; each `h=Name:Value` adds a field;
    `enc=NAME` sends the body as it is with `Content-Encoding: NAME`; `type=T` is its
    `Content-Type`; `etag=E` makes a
    matching `If-None-Match` get a `304` with the ETag and the `h304=Name:Value` fields,
    after `delay304` milliseconds;
    `hh=Name:Value` fields replace the `h` ones in answers to HEAD;
    `unsafe-status=N` is the status for methods other than GET and HEAD; `close=K` closes the
    connection without an answer from request K on; `hold=NAME` answers only once
    `/release/NAME` has been requested (60 s at most), after counting the request."""
    name = req.path[len("/cache-probe/"):]
    read_body(conn, req, None)
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        number = st.requests
        st.methods.append(req.method)
        st.ranges.append(req.header("If-None-Match"))
    hold = req.params.get("hold")
    if hold:
        held_event(hold).wait(60)
    lists = parse_qs(req.query, keep_blank_values=True)
    close_from = req.int_param("close", 0)
    if close_from and number >= close_from:
        return False  # no answer: the connection closes
    etag = req.params.get("etag")
    if etag and req.header("If-None-Match") == f'"{etag}"':
        time.sleep(req.int_param("delay304", 0) / 1000.0)
        headers = [("ETag", f'"{etag}"'), ("Server-Request-Count", str(number))]
        headers += [tuple(x.split(":", 1)) for x in lists.get("h304", [])]
        return respond(conn, req, 304, b"", headers=headers, send_length=False)
    fields = lists.get("hh") if req.method == "HEAD" and "hh" in lists else lists.get("h", [])
    headers = [tuple(x.split(":", 1)) for x in fields]
    headers.append(("Server-Request-Count", str(number)))
    if etag:
        headers.append(("ETag", f'"{etag}"'))
    if "enc" in req.params:
        headers.append(("Content-Encoding", req.params["enc"]))
    body = req.params.get("body", f"response {number}").encode()
    status = req.int_param("status", 200)
    if req.method not in ("GET", "HEAD"):
        status = req.int_param("unsafe-status", status)
    return respond(conn, req, status, body, headers=headers,
                   content_type=req.params.get("type", "text/plain; charset=utf-8"))


def route_private(conn: Conn, req: Request) -> bool:
    """`/private/<name>`: a resource for one user at a time. Without Basic credentials (any
    user, the password `pw`) answers 401 with `WWW-Authenticate: Basic realm="private"`; with
    them, 200 and `PRIVATE-for-<user> <k>` (k counts the name's requests) with
    `Cache-Control: max-age=600` (not `public`: a shared cache may not store it for others,
    RFC 9111 section 3.5), or the `cache-control` parameter's value. Each request is counted in
    `/stats/<name>` with its `Authorization` (`authorizations`)."""
    name = req.path[len("/private/"):]
    record_authorization(name, req)
    read_body(conn, req, None)
    st = stats_for(name)
    with STATS_LOCK:
        number = st.requests
    user = None
    value = req.header("Authorization") or ""
    if value.startswith("Basic "):
        try:
            user, _, password = base64.b64decode(value[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            user = None
        if user is not None and password != "pw":
            user = None
    if user is None:
        return respond(conn, req, 401, b"who are you?\n",
                       headers=[("WWW-Authenticate", 'Basic realm="private"')])
    control = req.params.get("cache-control", "max-age=600")
    return respond(conn, req, 200, f"PRIVATE-for-{user} {number}".encode(),
                   headers=[("Cache-Control", control)])


def digest_fields(value: str) -> dict[str, str]:
    """The `name=value` pairs of a Digest `Authorization` (values quoted or not)."""
    fields: dict[str, str] = {}
    rest = value[len("Digest "):]
    while rest:
        name, _, rest = rest.partition("=")
        name = name.strip().strip(",").strip()
        if rest.startswith('"'):
            item, _, rest = rest[1:].partition('"')
        else:
            item, _, rest = rest.partition(",")
        fields[name.lower()] = item.strip()
        rest = rest.lstrip(", ")
    return fields


def route_digest(conn: Conn, req: Request) -> bool:
    """`/digest/<name>?user=U&password=P` (default `ada`/`pw`): Digest authentication (RFC 7616,
    MD5, qop=auth). Without a valid Digest `Authorization`, 401 with `WWW-Authenticate: Digest
    realm="fault", nonce=..., qop="auth"`; with one, 200 `digest ok`. Each request is counted
    in `/stats/<name>` with its `Authorization` (`authorizations`), so a test sees every request
    that went out, the ones libcurl sends by itself included."""
    name = req.path[len("/digest/"):]
    record_authorization(name, req)
    read_body(conn, req, None)
    user = req.params.get("user", "ada")
    password = req.params.get("password", "pw")
    realm = "fault"
    value = req.header("Authorization") or ""
    if value.startswith("Digest "):
        f = digest_fields(value)

        def md5(text: str) -> str:
            return hashlib.md5(text.encode()).hexdigest()

        ha1 = md5(f"{user}:{realm}:{password}")
        ha2 = md5(f"{req.method}:{f.get('uri', '')}")
        expected = md5(f"{ha1}:{f.get('nonce', '')}:{f.get('nc', '')}:{f.get('cnonce', '')}:{f.get('qop', '')}:{ha2}")
        if f.get("username") == user and f.get("response") == expected:
            return respond(conn, req, 200, b"digest ok")
    nonce = base64.b64encode(os.urandom(12)).decode()
    challenge = f'Digest realm="{realm}", nonce="{nonce}", qop="auth", algorithm=MD5'
    return respond(conn, req, 401, b"digest, please\n", headers=[("WWW-Authenticate", challenge)])


def route_vary_cookie(conn: Conn, req: Request) -> bool:
    """`/vary-cookie/<name>`: 200 with `Cache-Control: max-age=600` and `Vary: Cookie`, whose
    body is `cookie=<the request's Cookie header> <k>` (k counts the name's requests, in
    `/stats/<name>`)."""
    name = req.path[len("/vary-cookie/"):]
    read_body(conn, req, None)
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        number = st.requests
    body = f"cookie={req.header('Cookie') or ''} {number}".encode()
    return respond(conn, req, 200, body, headers=[("Cache-Control", "max-age=600"), ("Vary", "Cookie")])


def route_stats(conn: Conn, req: Request) -> bool:
    name = req.path[len("/stats/"):]
    read_body(conn, req, None)
    if req.method == "DELETE":
        with STATS_LOCK:
            STATS.pop(name, None)
        return respond(conn, req, 200, b'{"reset": true}',
                       content_type="application/json")
    if req.method not in ("GET", "HEAD"):
        return respond(conn, req, 405, b"GET or DELETE\n", headers=[("Allow", "GET, HEAD, DELETE")])
    with STATS_LOCK:
        st = STATS.get(name) or FileStats()
        doc = st.as_json()
    return respond(conn, req, 200, json.dumps(doc).encode(), content_type="application/json")


PROXY_CREDENTIALS = "courier:proxy-secret"


def route_proxy(conn: Conn, req: Request) -> bool:
    """A request in absolute form, as to a proxy: answered here, never forwarded."""
    read_body(conn, req, None)
    expected = "Basic " + base64.b64encode(PROXY_CREDENTIALS.encode()).decode()
    given = req.header("Proxy-Authorization")
    if given != expected:
        return respond(conn, req, 407, b"proxy authentication required\n",
                       headers=[("Proxy-Authenticate", 'Basic realm="fault-proxy"')])
    doc = {"proxied": req.target, "proxyAuthorization": given,
           "authorization": req.header("Authorization")}
    return respond(conn, req, 200, json.dumps(doc).encode(), content_type="application/json")


# --------------------------------------------------------------------------
# Framing faults: a response head or chunked body that is not valid HTTP/1.1.
# Each route sends its bytes exactly as written here.


def send_then_close(conn: Conn, data: bytes) -> bool:
    conn.send(data)
    conn.lingering_close()
    raise ConnectionDone()


def raw_head(status_line: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [status_line] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def route_framing_two_lengths(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    head = raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream"),
                                        ("Content-Length", "5"), ("Content-Length", "10")])
    return send_then_close(conn, head + pattern_bytes(0, 10))


def route_framing_same_length(conn: Conn, req: Request) -> bool:
    form = req.params.get("form", "repeat")
    if form == "repeat":
        lengths = [("Content-Length", "5"), ("Content-Length", "5")]
    elif form == "list":
        lengths = [("Content-Length", "5, 5")]
    else:
        raise BadRequest(400, "form must be repeat or list")
    read_body(conn, req, None)
    keep = req.keep_alive
    conn.send(raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream")] + lengths
                       + conn_header(req, keep)) + pattern_bytes(0, 5))
    return keep


def raw_param(req: Request, name: str, default: str) -> str:
    """A query parameter sent verbatim in the response: latin-1, no CR or LF."""
    value = req.params.get(name, default)
    if "\r" in value or "\n" in value or any(ord(c) > 255 for c in value):
        raise BadRequest(400, f"query parameter {name} must be latin-1 without CR or LF")
    return value


def route_framing_bad_length(conn: Conn, req: Request) -> bool:
    value = raw_param(req, "value", "abc")
    read_body(conn, req, None)
    head = raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream"),
                                        ("Content-Length", value)])
    return send_then_close(conn, head + pattern_bytes(0, 5))


def route_framing_status_line(conn: Conn, req: Request) -> bool:
    line = raw_param(req, "line", "HTTP/1.1 OK")
    read_body(conn, req, None)
    head = raw_head(line, [("Content-Type", "application/octet-stream"), ("Content-Length", "5")])
    return send_then_close(conn, head + pattern_bytes(0, 5))


def route_framing_http09(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    return send_then_close(conn, b"hello, this is HTTP/0.9\n")


def route_framing_chunk_size(conn: Conn, req: Request) -> bool:
    size = raw_param(req, "size", "-5")
    read_body(conn, req, None)
    head = raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream"),
                                        ("Transfer-Encoding", "chunked")])
    body = size.encode("latin-1") + b"\r\n" + pattern_bytes(0, 5) + b"\r\n0\r\n\r\n"
    return send_then_close(conn, head + body)


def route_framing_big_head(conn: Conn, req: Request) -> bool:
    total = req.int_param("kb", 300) * 1024
    read_body(conn, req, None)
    headers = [("Content-Type", "application/octet-stream"), ("Content-Length", "5")]
    size = len(raw_head("HTTP/1.1 200 OK", headers))
    filler = "x" * 80
    while size < total:
        header = (f"X-Filler-{len(headers):05d}", filler)
        headers.append(header)
        size += len(header[0]) + 2 + len(filler) + 2
    return send_then_close(conn, raw_head("HTTP/1.1 200 OK", headers) + pattern_bytes(0, 5))


def route_framing_long_header(conn: Conn, req: Request) -> bool:
    length = req.int_param("kb", 200) * 1024
    read_body(conn, req, None)
    head = raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream"),
                                        ("X-Long", "x" * length), ("Content-Length", "5")])
    return send_then_close(conn, head + pattern_bytes(0, 5))


def route_framing_chunked_with_length(conn: Conn, req: Request) -> bool:
    n = req.int_param("n", 10)
    claimed = req.int_param("claimed", 3)
    order = req.params.get("order", "chunked-first")
    framing = [("Transfer-Encoding", "chunked"), ("Content-Length", str(claimed))]
    if order == "length-first":
        framing.reverse()
    elif order != "chunked-first":
        raise BadRequest(400, "order must be chunked-first or length-first")
    read_body(conn, req, None)
    keep = req.keep_alive
    conn.send(raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream")] + framing
                       + conn_header(req, keep)))
    send_chunked(conn, [pattern_bytes(0, n)])
    return keep


def route_framing_reset(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    conn.send(raw_head("HTTP/1.1 200 OK", [("Content-Type", "application/octet-stream"),
                                           ("Content-Length", "100")]) + pattern_bytes(0, 10))
    time.sleep(0.1)
    # A zero linger time makes close() send RST instead of FIN.
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()
    raise ConnectionDone()


# --------------------------------------------------------------------------
# Hostile peers: an idle connection that speaks out of turn, a redirect whose body never
# ends, and a redirect to an origin that asks for credentials.

IDLE_JUNK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n\r\npoisoned"


def route_idle_junk(conn: Conn, req: Request) -> bool:
    """A normal keep-alive answer; `delay` ms later, unasked, a whole second response on the
    same (idle) connection, which then stays open and serves later requests as usual."""
    delay = req.int_param("delay", 200) / 1000.0
    read_body(conn, req, None)
    keep = respond(conn, req, 200, b"first", keep=True)
    time.sleep(delay)
    conn.send(IDLE_JUNK)
    return keep


def route_redirect_endless(conn: Conn, req: Request) -> bool:
    """A redirect (302 to `to`) whose body never ends: chunked, or with a `Content-Length`
    of 1 TiB (`length=1`), streamed until the client goes away."""
    to = req.params.get("to")
    if to is None:
        raise BadRequest(400, "missing query parameter to")
    read_body(conn, req, None)
    framing = ("Content-Length", str(1 << 40)) if req.params.get("length") == "1" else \
        ("Transfer-Encoding", "chunked")
    conn.send(head_bytes(302, [("Location", to), ("Content-Type", "text/html"), framing]))
    piece = b"<p>moved</p>" * 1024
    chunk = piece if framing[0] == "Content-Length" else b"%x\r\n" % len(piece) + piece + b"\r\n"
    deadline = time.monotonic() + SILENT_MAX
    while time.monotonic() < deadline:
        conn.send(chunk)
    conn.close()
    raise ConnectionDone()


def record_authorization(name: str, req: Request) -> None:
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        st.authorizations.append(req.header("Authorization"))


def route_auth_redirect(conn: Conn, req: Request) -> bool:
    """Records the request's `Authorization` (in `/stats/<name>`), then 302 to `to`."""
    record_authorization(req.path[len("/auth-redirect/"):], req)
    return route_redirect(conn, req)


def route_auth_required(conn: Conn, req: Request) -> bool:
    """Records the request's `Authorization` (in `/stats/<name>`); without Basic credentials
    for `user`:`password` answers 401 with `WWW-Authenticate: Basic realm="fault"`."""
    record_authorization(req.path[len("/auth-required/"):], req)
    read_body(conn, req, None)
    credentials = f"{req.params.get('user', 'user')}:{req.params.get('password', 'secret')}"
    expected = "Basic " + base64.b64encode(credentials.encode()).decode()
    if req.header("Authorization") != expected:
        return respond(conn, req, 401, b"who are you?\n",
                       headers=[("WWW-Authenticate", 'Basic realm="fault"')])
    return respond(conn, req, 200, b'{"authenticated": true}', content_type="application/json")


# --------------------------------------------------------------------------
# Retries, token refresh and event streams: per-name state in `/stats/<name>`.


def retry_after_value(value: str) -> str:
    """`Retry-After` as given, except that `date+S` becomes the HTTP-date S seconds from now."""
    if value.startswith("date+"):
        seconds = value[len("date+"):]
        if not seconds.isdigit():
            raise BadRequest(400, "retry-after date+S needs whole seconds S")
        return http_date(time.time() + int(seconds))
    return value


def route_flaky(conn: Conn, req: Request) -> bool:
    """The first `fail` requests (default 1) for `<name>` answer `status` (default 503) with
    the body `flaky <k>` (k counts the name's requests from 1) and, if `retry-after` is given,
    `Retry-After` (verbatim, or for `date+S` the HTTP-date S seconds from now); later ones
    answer 200 with `{"attempt": k, "method": M}`.  Records each request's arrival time and
    method in `/stats/<name>` (`times`, `methods`)."""
    arrived = time.time()
    name = req.path[len("/flaky/"):]
    if not name:
        return respond(conn, req, 404, b"no flaky name\n")
    fail = req.int_param("fail", 1)
    status = req.int_param("status", 503, minimum=200)
    if status > 599:
        raise BadRequest(400, "status must be 200..599")
    headers = []
    if "retry-after" in req.params:
        headers.append(("Retry-After", retry_after_value(raw_param(req, "retry-after", ""))))
    read_body(conn, req, None)
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        st.times.append(arrived)
        st.methods.append(req.method)
        attempt = st.requests
    if attempt > fail:
        body = json.dumps({"attempt": attempt, "method": req.method}).encode()
        return respond(conn, req, 200, body, content_type="application/json")
    if status in (204, 304):
        return respond(conn, req, status, b"", headers=headers, send_length=False)
    return respond(conn, req, status, f"flaky {attempt}\n".encode(), headers=headers)


def route_bearer(conn: Conn, req: Request) -> bool:
    """Records the request's `Authorization` (in `/stats/<name>`), waits `delay` ms (default
    0), then answers 200 and `{"authenticated": true}` if it is `Bearer <token>` (default
    token `fresh`), else 401 with `WWW-Authenticate: Bearer realm="fault"`."""
    delay = req.int_param("delay", 0) / 1000.0
    token = req.params.get("token", "fresh")
    record_authorization(req.path[len("/bearer/"):], req)
    read_body(conn, req, None)
    if delay:
        time.sleep(delay)
    if req.header("Authorization") != f"Bearer {token}":
        return respond(conn, req, 401, b"bearer token missing or stale\n",
                       headers=[("WWW-Authenticate", 'Bearer realm="fault"')])
    return respond(conn, req, 200, b'{"authenticated": true}', content_type="application/json")


EVENT_PAUSE = 0.02  # between the pieces of an event stream, so each arrives on its own

# The first connection: a comment, a retry field, then events 1..3, where event 2 is split
# mid-line across two pieces and event 3 uses CR LF line endings.  Then the server "crashes".
EVENTS_FIRST = [b"id: 1\nevent: greeting\ndata: hello\n\n",
                b"id: 2\ndata: line o", b"ne\ndata: line two\n\n",
                b"id: 3\r\ndata: three\r\n\r\n"]
# The reconnection with `Last-Event-ID: 3`: the rest, then a normal end.
EVENTS_RESUMED = [b"id: 4\ndata: four\n\n", b"event: done\ndata: bye\n\n"]


def send_paced_chunks(conn: Conn, pieces: list[bytes], pause: float) -> None:
    """Each piece as a chunk of its own, `pause` seconds before each; no terminating chunk."""
    for piece in pieces:
        time.sleep(pause)
        conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")


def route_events(conn: Conn, req: Request) -> bool:
    """A Server-Sent Events stream (chunked, `Cache-Control: no-store`, pieces ~20 ms apart).
    Without `Last-Event-ID`: `: hello comment`, `retry: <retry>` (ms, default 300), events
    1..3, then the connection drops without the terminating chunk.  With `Last-Event-ID: 3`:
    events 4 and `done`, then a normal end (connection closed).  Any other `Last-Event-ID`:
    204.  Records each request's arrival time and `Last-Event-ID` (or null) in
    `/stats/<name>` (`times`, `lastEventIds`)."""
    arrived = time.time()
    name = req.path[len("/events/"):]
    retry = req.int_param("retry", 300)
    read_body(conn, req, None)
    last_id = req.header("Last-Event-ID")
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        st.times.append(arrived)
        st.last_event_ids.append(last_id)
    if last_id is not None and last_id != "3":
        return respond(conn, req, 204, b"", send_length=False)
    headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
               ("Transfer-Encoding", "chunked")]
    if req.method == "HEAD":
        keep = req.keep_alive
        conn.send(head_bytes(200, headers + conn_header(req, keep)))
        return keep
    if last_id is None:
        conn.send(head_bytes(200, headers))
        pieces = [b": hello comment\n\n", b"retry: %d\n\n" % retry] + EVENTS_FIRST
        send_paced_chunks(conn, pieces, EVENT_PAUSE)
        time.sleep(EVENT_PAUSE)
        conn.lingering_close()
        raise ConnectionDone()
    conn.send(head_bytes(200, headers + conn_header(req, False)))
    send_paced_chunks(conn, EVENTS_RESUMED, EVENT_PAUSE)
    conn.send(b"0\r\n\r\n")
    return False


def route_events_close(conn: Conn, req: Request) -> bool:
    """`/events-close/<name>?retry=MS`: an event stream that says `retry: MS` (default 0) and
    ends at once, cleanly, with no event: the worst a reconnecting client can meet.  Every
    request's arrival time and method go to `/stats/<name>`'s `times` and `methods`."""
    arrived = time.time()
    name = req.path[len("/events-close/"):]
    retry = req.int_param("retry", 0)
    read_body(conn, req, None)
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        st.times.append(arrived)
        st.methods.append(req.method)
        st.last_event_ids.append(req.header("Last-Event-ID"))
    body = b"retry: %d\n\n" % retry
    return respond(conn, req, 200, body, content_type="text/event-stream",
                   headers=[("Cache-Control", "no-store")])


def route_endless(conn: Conn, req: Request) -> bool:
    """`/endless?type=T&line=1&fill=x`: `200`, chunked, pattern bytes for ever (until the
    client closes, 600 s at most) as `T` (default `application/octet-stream`); with `fill=x`,
    `x` for ever (a line that never ends, whatever the type).  With `line=1`, a
    `text/event-stream` whose first line (`data: ` and then `x` for ever) never ends."""
    read_body(conn, req, None)
    line = req.params.get("line") == "1"
    kind = "text/event-stream" if line else req.params.get("type", "application/octet-stream")
    conn.send(head_bytes(200, [("Content-Type", kind), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked"), ("Connection", "close")]))
    piece = b"x" * CHUNK if line or req.params.get("fill") == "x" else pattern_bytes(0, CHUNK)
    deadline = time.monotonic() + SILENT_MAX
    if line:
        conn.send(b"6\r\ndata: \r\n")
    while time.monotonic() < deadline:
        conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
    conn.close()
    raise ConnectionDone()


# /ndjson/<name>: the events that release each held stream, by name.
HELD: dict[str, threading.Event] = {}
HELD_LOCK = threading.Lock()


def held_event(name: str) -> threading.Event:
    with HELD_LOCK:
        return HELD.setdefault(name, threading.Event())


def route_ndjson(conn: Conn, req: Request) -> bool:
    """NDJSON (`application/x-ndjson`), chunked: the line `{"n": 1}` at once, then nothing
    until `/release/<name>` is requested (60 s at most), then `{"n": 2}` and the end."""
    name = req.path[len("/ndjson/"):]
    read_body(conn, req, None)
    keep = req.keep_alive
    conn.send(head_bytes(200, [("Content-Type", "application/x-ndjson"), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked")] + conn_header(req, keep)))
    for line, wait in ((b'{"n": 1}\n', False), (b'{"n": 2}\n', True)):
        if wait:
            held_event(name).wait(60)
        conn.send(b"%x\r\n" % len(line) + line + b"\r\n")
    conn.send(b"0\r\n\r\n")
    return keep


def route_release(conn: Conn, req: Request) -> bool:
    read_body(conn, req, None)
    held_event(req.path[len("/release/"):]).set()
    return respond(conn, req, 200, b"released\n")


# --------------------------------------------------------------------------
# Streams the way model APIs speak


def read_json_body(conn: Conn, req: Request):
    """The request body parsed as JSON (None when it is not JSON)."""
    parts: list[bytes] = []
    read_body(conn, req, parts.append)
    try:
        return json.loads(b"".join(parts))
    except ValueError:
        return None


def model_error(conn: Conn, req: Request, status: int, message: str) -> bool:
    """An error as model APIs send one: JSON `{"error": {"message", "type"}}`."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    return respond(conn, req, status, body, content_type="application/json")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def route_chat(conn: Conn, req: Request) -> bool:
    """`/v1/chat/completions?hold=NAME&cut=N&clean=1&pause=MS&status=S`: a model API's
    streamed chat answer.  Takes a POST whose JSON body has `model` (a string), `messages` (a
    list of objects with `role` and `content`) and `stream: true`; anything else is a 400 with
    an error body (`status=S` answers S with one instead).  Answers `200`,
    `text/event-stream`, chunked, pieces PAUSE ms apart (default 5): a `: keep-alive` comment,
    then one event per word of the last message's content, the odd ones as
    `data: {"id": "chat-1", "choices": [{"index": 0, "delta": {"content": "<word> "}}]}`, the
    even ones as `event: delta` with the same JSON spread over two `data:` lines; then
    `data: [DONE]` and the end (connection closed).  With `hold=NAME`, nothing after the first
    event until `/release/NAME` (60 s at most).  With `cut=N`: after N events, half an event,
    and the connection dropped (no terminating chunk; with `clean=1`, the terminating chunk
    first: the body ends cleanly, inside an event).  With `linger=1`, the response stays open
    after `[DONE]` (until the client closes, 600 s at most)."""
    body = read_json_body(conn, req)
    status = req.int_param("status", 0)
    if status:
        return model_error(conn, req, status, f"answered {status} as asked")
    if req.method != "POST":
        return model_error(conn, req, 405, "use POST")
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or body.get("stream") is not True:
        return model_error(conn, req, 400, "a JSON object with model (a string) and stream: true is required")
    messages = body.get("messages")
    if (not isinstance(messages, list) or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)):
        return model_error(conn, req, 400, "messages must be a non-empty list of {role, content}")
    words = messages[-1]["content"].split()
    pause = req.int_param("pause", 5) / 1000
    hold = req.params.get("hold")
    cut = req.int_param("cut", -1) if "cut" in req.params else None
    conn.send(head_bytes(200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked"), ("Connection", "close")]))
    conn.send(chunk(b": keep-alive\n\n"))
    for index, word in enumerate(words):
        if cut is not None and index == cut:
            conn.send(chunk(b'data: {"id": "chat-1", "choi'))
            if req.params.get("clean") == "1":
                conn.send(b"0\r\n\r\n")
                conn.lingering_close()
            else:
                conn.close()
            raise ConnectionDone()
        delta = {"id": "chat-1", "choices": [{"index": 0, "delta": {"content": word + " "}}]}
        text = json.dumps(delta)
        if index % 2 == 0:
            event = f"data: {text}\n\n"
        else:
            middle = text.index(', "choices"')
            event = f"event: delta\ndata: {text[:middle + 1]}\ndata: {text[middle + 1:]}\n\n"
        time.sleep(pause)
        conn.send(chunk(event.encode()))
        if index == 0 and hold:
            held_event(hold).wait(60)
    time.sleep(pause)
    if req.params.get("linger") == "1":
        conn.send(chunk(b"data: [DONE]\n\n"))
        conn.hold_open()
        raise ConnectionDone()
    conn.send(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    return False


def route_generate(conn: Conn, req: Request) -> bool:
    """`/v1/generate?hold=NAME`: NDJSON as Ollama streams it.  Takes a POST whose JSON body has
    `model` and `prompt` (strings), else 400 with an error body.  Answers `200`,
    `application/x-ndjson`, chunked: `{"model": M, "response": "<word> ", "done": false}` per
    word of the prompt, then `{"model": M, "response": "", "done": true}`; with `hold=NAME`,
    nothing after the first line until `/release/NAME`."""
    body = read_json_body(conn, req)
    if req.method != "POST" or not isinstance(body, dict) or not isinstance(body.get("model"), str) \
            or not isinstance(body.get("prompt"), str):
        return model_error(conn, req, 400, "POST a JSON object with model and prompt (strings)")
    model = body["model"]
    hold = req.params.get("hold")
    keep = req.keep_alive
    conn.send(head_bytes(200, [("Content-Type", "application/x-ndjson"), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked")] + conn_header(req, keep)))
    for index, word in enumerate(body["prompt"].split()):
        line = json.dumps({"model": model, "response": word + " ", "done": False}) + "\n"
        conn.send(chunk(line.encode()))
        if index == 0 and hold:
            held_event(hold).wait(60)
    last = json.dumps({"model": model, "response": "", "done": True}) + "\n"
    conn.send(chunk(last.encode()) + b"0\r\n\r\n")
    return keep


def route_duplex(conn: Conn, req: Request) -> bool:
    """`/duplex`: full duplex.  Sends `200` (chunked, `application/octet-stream`) at once,
    before reading the request body, then echoes each piece of the body as a chunk as soon as
    it has read it, and ends the response when the body ends (connection closed).  A request
    with `Expect: 100-continue` gets `417` (the 200 would come before the 100)."""
    if "100-continue" in req.tokens("Expect"):
        return respond(conn, req, 417, b"no Expect: 100-continue here\n", keep=False)
    conn.send(head_bytes(200, [("Content-Type", "application/octet-stream"), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked"), ("Connection", "close")]))
    read_body(conn, req, lambda data: conn.send(chunk(data)))
    conn.send(b"0\r\n\r\n")
    return False


def route_ndjson_flood(conn: Conn, req: Request) -> bool:
    """`/ndjson-flood/<name>?lines=N&size=B&sse=1`: N NDJSON lines (default 8192) of B bytes
    each (default 4096, line feed included), `{"i": <index>, "pad": "xx..."}`, chunked, as fast
    as the client takes them; with `sse=1`, the same JSON as the data of N events
    (`text/event-stream`, `data: ...` and a blank line, B bytes each).  `/stats/<name>`'s `bytesSent` counts the body bytes the kernel has
    accepted so far (a client that stops reading stalls it), `requests` the requests."""
    name = req.path[len("/ndjson-flood/"):]
    read_body(conn, req, None)
    count = req.int_param("lines", 8192)
    size = max(req.int_param("size", 4096), 32)
    st = stats_for(name)
    with STATS_LOCK:
        st.requests += 1
        st.bytes_sent = 0

    def sent(n: int) -> None:
        with STATS_LOCK:
            st.bytes_sent += n

    keep = req.keep_alive
    sse = req.params.get("sse") == "1"
    kind = "text/event-stream" if sse else "application/x-ndjson"
    conn.send(head_bytes(200, [("Content-Type", kind), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked")] + conn_header(req, keep)))
    batch = bytearray()
    for index in range(count):
        start = (b'data: {"i": %d, "pad": "' if sse else b'{"i": %d, "pad": "') % index
        end = b'"}\n\n' if sse else b'"}\n'
        line = start + b"x" * (size - len(start) - len(end)) + end
        batch += line
        if len(batch) >= 64 * 1024 or index == count - 1:
            frame = b"%x\r\n" % len(batch)
            conn.send(frame)
            conn.send_counted(memoryview(bytes(batch)), sent)
            conn.send(b"\r\n")
            batch.clear()
    conn.send(b"0\r\n\r\n")
    return keep


def route_send(conn: Conn, req: Request) -> bool:
    """`/send?b64=BYTES&type=T&close=1`: `200` with the base64url-decoded BYTES as a chunked
    body of type T (default `application/octet-stream`); with `close=1`, the connection is
    dropped after them, without the terminating chunk."""
    read_body(conn, req, None)
    data = base64.urlsafe_b64decode(req.params.get("b64", "") + "==")
    kind = req.params.get("type", "application/octet-stream")
    conn.send(head_bytes(200, [("Content-Type", kind), ("Cache-Control", "no-store"),
                               ("Transfer-Encoding", "chunked"), ("Connection", "close")]))
    if data:
        conn.send(chunk(data))
    if req.params.get("close") == "1":
        conn.close()
        raise ConnectionDone()
    conn.send(b"0\r\n\r\n")
    return False


def dispatch(conn: Conn, req: Request) -> bool:
    if req.target.startswith("http://"):
        return route_proxy(conn, req)
    p = req.path
    if p == "/bytes":
        return route_bytes(conn, req)
    if p == "/close-mid-body":
        return route_close_mid_body(conn, req)
    if p == "/lying-length":
        return route_lying_length(conn, req, keep_open=False)
    if p == "/lying-length-open":
        return route_lying_length(conn, req, keep_open=True)
    if p == "/malformed-chunked":
        return route_malformed_chunked(conn, req)
    if p == "/silent":
        return route_silent(conn, req)
    if p == "/hold-body":
        return route_hold_body(conn, req)
    if p == "/silent-after-headers":
        return route_silent_after_headers(conn, req)
    if p == "/headers-then-close":
        return route_headers_then_close(conn, req)
    if p == "/drip":
        return route_drip(conn, req)
    if p == "/redirect-loop" or p.startswith("/redirect-loop/"):
        return route_redirect_loop(conn, req)
    if p == "/redirect":
        return route_redirect(conn, req)
    if p == "/bomb":
        return route_bomb(conn, req, chunked=False)
    if p == "/bomb-chunked":
        return route_bomb(conn, req, chunked=True)
    if p == "/chunked":
        return route_chunked(conn, req)
    if p == "/echo":
        return route_echo(conn, req)
    if p == "/coded":
        return route_coded(conn, req)
    if p.startswith("/status/"):
        return route_status(conn, req)
    if p.startswith("/problem/"):
        return route_problem(conn, req)
    if p.startswith("/file/"):
        return route_file(conn, req)
    if p.startswith("/stats/"):
        return route_stats(conn, req)
    if p == "/revalidate":
        return route_revalidate(conn, req)
    if p == "/framing-two-lengths":
        return route_framing_two_lengths(conn, req)
    if p == "/framing-same-length":
        return route_framing_same_length(conn, req)
    if p == "/framing-bad-length":
        return route_framing_bad_length(conn, req)
    if p == "/framing-status-line":
        return route_framing_status_line(conn, req)
    if p == "/framing-http09":
        return route_framing_http09(conn, req)
    if p == "/framing-chunk-size":
        return route_framing_chunk_size(conn, req)
    if p == "/framing-big-head":
        return route_framing_big_head(conn, req)
    if p == "/framing-long-header":
        return route_framing_long_header(conn, req)
    if p == "/framing-chunked-with-length":
        return route_framing_chunked_with_length(conn, req)
    if p == "/framing-reset":
        return route_framing_reset(conn, req)
    if p == "/idle-junk":
        return route_idle_junk(conn, req)
    if p == "/redirect-endless":
        return route_redirect_endless(conn, req)
    if p.startswith("/auth-redirect/"):
        return route_auth_redirect(conn, req)
    if p.startswith("/auth-required/"):
        return route_auth_required(conn, req)
    if p.startswith("/flaky/"):
        return route_flaky(conn, req)
    if p.startswith("/bearer/"):
        return route_bearer(conn, req)
    if p.startswith("/events/"):
        return route_events(conn, req)
    if p.startswith("/ndjson/"):
        return route_ndjson(conn, req)
    if p.startswith("/release/"):
        return route_release(conn, req)
    if p.startswith("/events-close/"):
        return route_events_close(conn, req)
    if p.startswith("/cache-probe/"):
        return route_cache_probe(conn, req)
    if p.startswith("/private/"):
        return route_private(conn, req)
    if p.startswith("/vary-cookie/"):
        return route_vary_cookie(conn, req)
    if p.startswith("/digest/"):
        return route_digest(conn, req)
    if p == "/endless":
        return route_endless(conn, req)
    if p == "/v1/chat/completions":
        return route_chat(conn, req)
    if p == "/v1/generate":
        return route_generate(conn, req)
    if p == "/duplex":
        return route_duplex(conn, req)
    if p.startswith("/ndjson-flood/"):
        return route_ndjson_flood(conn, req)
    if p == "/send":
        return route_send(conn, req)
    read_body(conn, req, None)
    return respond(conn, req, 404, f"no route for {p}\n".encode())


def handle_connection(sock: socket.socket) -> None:
    conn = Conn(sock)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            sock.settimeout(IDLE_TIMEOUT)
            req = None
            try:
                head = conn.read_head()
                if head is None:
                    break
                req = Request(head)
                sock.settimeout(IO_TIMEOUT)
                keep = dispatch(conn, req)
                if keep and not req.body_read:
                    read_body(conn, req, None)
            except BadRequest as e:
                log("bad request:", e)
                try:
                    body = f"{e}\n".encode()
                    conn.send(head_bytes(e.status, [("Content-Type", "text/plain"),
                                                    ("Content-Length", str(len(body))),
                                                    ("Connection", "close")]) + body)
                except ClientGone:
                    pass
                keep = False
            if not keep:
                conn.lingering_close()
                return
    except ConnectionDone:
        return
    except (ClientGone, socket.timeout, OSError) as e:
        log("connection ended:", type(e).__name__, e)
    except Exception as e:  # never let a handler bug kill the server
        print(f"fault_server: handler error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    conn.close()


# --------------------------------------------------------------------------
# Process plumbing


def parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        state = stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3]
        if state in (b"Z", b"X"):
            return False
    except (OSError, ValueError):
        pass
    return True


def watch_parent(parent_pid: int | None) -> None:
    original_ppid = os.getppid()

    def loop() -> None:
        while True:
            time.sleep(0.5)
            if parent_pid is not None:
                if not parent_alive(parent_pid):
                    os._exit(0)
                if parent_pid == original_ppid and os.getppid() != original_ppid:
                    os._exit(0)
            elif os.getppid() != original_ppid:
                os._exit(0)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


def main() -> None:
    global VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1", help="the address to listen on (0.0.0.0: every one)")
    ap.add_argument("--parent-pid", type=int, default=None)
    ap.add_argument("--verbose", action="store_true", help="log connection events to stderr")
    args = ap.parse_args()
    VERBOSE = args.verbose

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    threading.stack_size(512 * 1024)  # many idle connection threads are cheap
    # With thousands of connection threads the default 5 ms GIL switch interval
    # makes waiting threads thrash (measured: 3,000 slow requests took 69 s
    # instead of 4 s).  Handlers block in I/O, so a long interval costs nothing.
    sys.setswitchinterval(0.1)
    # Started from a Swift test process, we inherit its thread's signal mask, in which
    # SIGTERM is blocked: unblock it, or a dedicated fault server could not be stopped.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))

    watch_parent(args.parent_pid)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.bind, args.port))
    listener.listen(4096)
    port = listener.getsockname()[1]
    sys.stdout.write(f"READY {port}\n")
    sys.stdout.flush()
    sys.stdout = sys.stderr  # nothing more on stdout, ever

    while True:
        try:
            sock, _ = listener.accept()
        except InterruptedError:
            continue
        except OSError as e:
            log("accept failed:", e)
            time.sleep(0.05)
            continue
        try:
            # _thread does not wait for the new thread to get the GIL and run,
            # which keeps accept() fast with thousands of live connections.
            _thread.start_new_thread(handle_connection, (sock,))
        except RuntimeError:
            sock.close()  # cannot start a thread: shed the connection


if __name__ == "__main__":
    main()
