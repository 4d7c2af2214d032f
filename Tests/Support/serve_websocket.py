#!/usr/bin/env python3
"""WebSocket test peers in one process: Python's `websockets` (an implementation that is not
Courier's), a raw asyncio server that breaks the protocol on purpose, and an HTTP CONNECT
proxy. Run it with the virtual environment's python.

Usage:  python serve_websocket.py [--parent-pid PID] [--tls-info PATH]

Listens on free loopback ports and prints exactly one line once every one accepts:

    READY <ws_port> <raw_port> <proxy_port> <deflate_port>                        (without --tls-info)
    READY <ws_port> <raw_port> <proxy_port> <wss_port> <wss_mtls_port> <deflate_port> (with it)

then nothing more on stdout. Exits when the parent process (or --parent-pid) disappears.

ws_port (`websockets`, no compression, no keepalive pings, messages up to 32 MiB); wss_port
and wss_mtls_port serve the same paths over TLS, and deflate_port the same paths with
permessage-deflate (RFC 7692) when the client offers it:

  /echo           every message back as it came (text as text, binary as binary); chooses the
                  subprotocol ``v1`` or ``v2`` when offered (the first offered)
  /fragments      a text message in three fragments ("Hello, " "frag" "ments"), a ping with
                  ``p``, then a close with 4001 "done"
  /close          a close with 4000 "bye" at once
  /broadcast      every message from any client of /broadcast goes to every client of
                  /broadcast, the sender included (a client is registered before its 101 is sent)
  /headers        the 101 carries ``Set-Cookie: ws=from-handshake; Path=/``; then one text
                  message, a JSON object of the request's headers (lower-case name -> value,
                  repeats joined with ", "), then echoes like /echo
  /status/<code>  refuses the handshake: that status (200..599) with the text body
                  ``refused <code>`` (no body for 204 and 304); another code gets 400
  /sizes?n=<a>,<b>,...&kind=text|binary&fragment=<k>
                  one message per size: text is that many "x", binary is bytes i % 251
                  (kind defaults to text); with fragment=k each message goes as fragments of
                  at most k bytes followed by websockets' empty final continuation frame (an
                  empty message goes unfragmented); then a close with 1000 "sizes done". A
                  malformed query gets 400 instead of the handshake
  /server-ping    a ping with b"hello"; once its pong is back, the text "pong received"; then
                  echoes
  /slow-echo[?delay=MS]
                  every message back as it came, each MS ms (default 300) after it was read,
                  one at a time
  /drop           after the first message received, closes TCP without a close frame
  /slow-reader[?id=NAME]
                  2000 binary messages of 64 KiB (byte i is i % 251) as fast as the client
                  takes them, then the text "done", then a close with 1000
  GET /slow-reader/sent?id=NAME
                  plain HTTP: how many of them the connection ?id=NAME has sent so far
  anything else   a close with 4004 "no such path"

raw_port (plain asyncio, no `websockets`): an RFC 6455 handshake (no subprotocol, no
extension) and then, by path (``?id=NAME`` is optional, see last-close):

  /hostile/masked            a masked text frame "hi"
  /hostile/reserved-opcode   a frame with opcode 0x3 (payload "hi")
  /hostile/rsv               a text frame "hi" with RSV1 set
  /hostile/invalid-utf8      a text frame whose payload is b"\\xff\\xfe"
  /hostile/oversized         a binary message of 2 MiB (one correct frame, byte i is i % 251)
  /hostile/bad-accept        a 101 whose Sec-WebSocket-Accept is wrong, then a text frame "hi"
  /hostile/control-too-long  a ping with a 126-byte payload
  /hostile/messages-then-masked
                             five text frames "message 1" .. "message 5", then a masked
                             text frame "hi" (all with the 101, in one write)
        Each then reads the client's frames for up to 5 s. The first close frame's code is
        recorded (1005 for an empty close payload) and answered with a close frame carrying
        the same code, and the connection is closed; after 5 s without one it is closed
        anyway.
  /silent                    accepts, then never sends anything (pings go unanswered) and
        reads until the client closes the connection
  GET /hostile/last-close[?id=NAME][&wait=MS]
        plain HTTP: the code recorded by the most recent /hostile/* connection (the one with
        ?id=NAME, if given) as text, or ``none``; with wait=MS, first waits up to MS ms for
        that connection to finish.
  /no-close-reply[?id=NAME]  echoes messages (and answers pings) until the client's close
        frame, which is recorded under NAME and never answered: the server sends nothing
        more and keeps TCP open until the client closes it (600 s at most).
  /ping-flood[?id=NAME][&seconds=S][&kind=ping|pong]
        pings of 125 bytes (an 8-byte big-endian sequence number from 1, then zeros), 512 to
        a write, as fast as the client takes them, reading nothing, for S seconds (default
        5) or until /ping-flood/stop; kind=pong sends unsolicited pongs instead. Then the
        text "flood over", then reads: counts pongs (and the sequence number of the last),
        answers each text or binary message with the text {"pings": sent, "pongs":
        received, "lastPong": number or null}, answers a close with the same code and ends.
  GET /ping-flood/sent?id=NAME
        plain HTTP: how many frames the flood ?id=NAME has handed to its socket so far (0
        for an unknown NAME).
  GET /ping-flood/stop?id=NAME
        plain HTTP: ends the flood ?id=NAME now (it goes on to "flood over"); answers
        "stopped", or "none" for an unknown NAME.
  /head/<anything>  whatever its request line looks like (it is not parsed): a 101, then
        one text message, the JSON {"requestLine": <the first line as received>,
        "headerLines": [<each further line of the head, as received>]}, then a close with
        1000; then reads until the client's close (5 s at most).

proxy_port: an HTTP CONNECT proxy. ``CONNECT host:port`` needs ``Proxy-Authorization:
Basic`` for courier:proxy-secret (else 407 with ``Proxy-Authenticate: Basic
realm="ws-proxy"``, keep-alive), only to 127.0.0.1 or localhost (else 403), answers
``200 Connection established`` and pipes bytes both ways. ``GET /tunnels`` (origin form)
answers the number of tunnels established so far as text.

--tls-info takes serve_tls.py's info.json: wss_port uses its `valid` certificate and key
(certs.valid, keys.valid: localhost and 127.0.0.1, signed by ca1); wss_mtls_port also
requires a client certificate signed by client_ca (the CA serve_tls's mtls server trusts)
and fails the TLS handshake without one. Both offer ALPN http/1.1 only.
"""
import argparse
import asyncio
import base64
import email.utils
import hashlib
import http
import json
import os
import signal
import ssl
import struct
import sys
import urllib.parse

from websockets.asyncio.server import broadcast, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Response

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PATTERN = bytes(range(251))
HEAD_LIMIT = 64 * 1024
HOSTILE_READ_SECONDS = 5.0
HOLD_SECONDS = 600.0
PROXY_USER, PROXY_PASSWORD = "courier", "proxy-secret"
SLOW_READER_MESSAGES, SLOW_READER_SIZE = 2000, 64 * 1024


def pattern(n: int) -> bytes:
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def split_target(target: str) -> tuple[str, dict[str, list[str]]]:
    parts = urllib.parse.urlsplit(target)
    return parts.path, urllib.parse.parse_qs(parts.query, keep_blank_values=True)


def reason(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return "Status"


# ---------------------------------------------------------------------------
# ws_port, wss_port, wss_mtls_port: websockets

BROADCAST: set = set()


def choose_subprotocol(connection, offered):
    for name in offered:
        if name in ("v1", "v2"):
            return name
    return None


def text_response(code: int, text: str) -> Response:
    body = b"" if code in (204, 304) else text.encode()
    headers = Headers([("Date", email.utils.formatdate(usegmt=True)), ("Connection", "close")])
    if code not in (204, 304):
        headers["Content-Length"] = str(len(body))
        headers["Content-Type"] = "text/plain; charset=utf-8"
    return Response(code, reason(code), headers, body)


def sizes_plan(query: dict[str, list[str]]) -> tuple[list[int], str, int | None]:
    """(sizes, kind, fragment) from /sizes' query; ValueError if malformed."""
    if "n" not in query:
        raise ValueError("n is required")
    sizes = [int(s) for s in query["n"][0].split(",") if s != ""]
    if not sizes or any(s < 0 for s in sizes):
        raise ValueError("n must list sizes >= 0")
    kind = query.get("kind", ["text"])[0]
    if kind not in ("text", "binary"):
        raise ValueError("kind must be text or binary")
    fragment = None
    if "fragment" in query:
        fragment = int(query["fragment"][0])
        if fragment < 1:
            raise ValueError("fragment must be >= 1")
    return sizes, kind, fragment


# /slow-reader?id=NAME: messages sent so far, by NAME.
SLOW_READER_SENT: dict[str, int] = {}


def process_request(connection, request):
    path, query = split_target(request.path)
    if path.startswith("/status/"):
        code = path[len("/status/"):]
        if not (code.isdigit() and 200 <= int(code) <= 599):
            return text_response(400, f"bad status {code!r}")
        return text_response(int(code), f"refused {int(code)}")
    if path == "/slow-reader/sent":
        # Plain HTTP: how many messages the /slow-reader connection ?id=NAME has sent so far.
        return text_response(200, str(SLOW_READER_SENT.get(query.get("id", [""])[0], 0)))
    if path == "/sizes":
        try:
            sizes_plan(query)
        except ValueError as error:
            return text_response(400, f"bad /sizes query: {error}")
    return None


def process_response(connection, request, response):
    if response.status_code != 101:
        return None
    path, _ = split_target(request.path)
    if path == "/headers":
        response.headers["Set-Cookie"] = "ws=from-handshake; Path=/"
    elif path == "/broadcast":
        # Before the 101 goes out, so that a client that has its 101 gets every later message.
        BROADCAST.add(connection)
    return None


async def echo(connection):
    async for message in connection:
        await connection.send(message)


async def handler(connection):
    path, query = split_target(connection.request.path)
    try:
        if path == "/echo":
            await echo(connection)
        elif path == "/fragments":
            await connection.send(["Hello, ", "frag", "ments"])
            await connection.ping(b"p")
            await connection.close(4001, "done")
        elif path == "/close":
            await connection.close(4000, "bye")
        elif path == "/broadcast":
            BROADCAST.add(connection)
            try:
                async for message in connection:
                    broadcast(BROADCAST, message)
            finally:
                BROADCAST.discard(connection)
        elif path == "/headers":
            headers: dict[str, str] = {}
            for name, value in connection.request.headers.raw_items():
                key = name.lower()
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
            await connection.send(json.dumps(headers))
            await echo(connection)
        elif path == "/sizes":
            sizes, kind, fragment = sizes_plan(query)
            for n in sizes:
                payload = "x" * n if kind == "text" else pattern(n)
                if fragment is not None and n > 0:
                    await connection.send([payload[i:i + fragment] for i in range(0, n, fragment)])
                else:
                    await connection.send(payload)
            await connection.close(1000, "sizes done")
        elif path == "/slow-echo":
            delay = int(query.get("delay", ["300"])[0]) / 1000
            async for message in connection:
                await asyncio.sleep(delay)
                await connection.send(message)
        elif path == "/server-ping":
            pong = await connection.ping(b"hello")
            await pong
            await connection.send("pong received")
            await echo(connection)
        elif path == "/drop":
            await connection.recv()
            connection.transport.close()  # FIN, no close frame; later writes are dropped
            await connection.wait_closed()
        elif path == "/slow-reader":
            block = pattern(SLOW_READER_SIZE)
            name = query.get("id", [""])[0]
            for sent in range(SLOW_READER_MESSAGES):
                await connection.send(block)
                SLOW_READER_SENT[name] = sent + 1
            await connection.send("done")
            await connection.close(1000)
        else:
            await connection.close(4004, "no such path")
    except ConnectionClosed:
        pass


def tls_contexts(info_path: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    try:
        with open(info_path) as f:
            info = json.load(f)
        cert, key, client_ca = info["certs"]["valid"], info["keys"]["valid"], info["client_ca"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        peerlib.fail(f"--tls-info {info_path}: cannot read certs.valid, keys.valid and client_ca "
                     f"({error!r}); is serve_tls.py up to date?")

    def context(client_auth: bool) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["http/1.1"])
        if client_auth:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=client_ca)
        return ctx

    try:
        return context(False), context(True)
    except (OSError, ssl.SSLError) as error:
        peerlib.fail(f"--tls-info {info_path}: {error}")
        raise


def send_handshake_alerts() -> None:
    """Make asyncio send the TLS alert of a failed server handshake (e.g. OpenSSL's
    "certificate required" to a client without a certificate) before it drops the connection:
    asyncio 3.11 closes the socket with the alert still in its buffer, and the client then
    only sees the connection end. Without the private methods this relies on, a client just
    sees the connection end."""
    from asyncio import sslproto

    protocol = sslproto.SSLProtocol
    original = getattr(protocol, "_on_handshake_complete", None)
    if original is None or not hasattr(protocol, "_process_outgoing"):
        return

    def on_handshake_complete(self, handshake_exc):
        if isinstance(handshake_exc, ssl.SSLError):
            try:
                self._process_outgoing()
            except Exception:
                pass
        return original(self, handshake_exc)

    protocol._on_handshake_complete = on_handshake_complete


def quiet_handshake_failures(loop, context) -> None:
    """The loop's exception handler: a failed TLS handshake is a test's business, not news."""
    if isinstance(context.get("exception"), (ssl.SSLError, ConnectionError)):
        return
    loop.default_exception_handler(context)


# ---------------------------------------------------------------------------
# Plain HTTP/1.1 and frame plumbing for the raw port and the proxy

async def read_raw_head(reader: asyncio.StreamReader) -> bytes | None:
    """The request head's bytes up to and with the blank line, or None at EOF or past the limit."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None


async def read_head(reader: asyncio.StreamReader):
    """(method, target, headers as [(lower-case name, value)]) or None at EOF or on garbage."""
    head = await read_raw_head(reader)
    return None if head is None else parse_head(head)


def parse_head(head: bytes):
    """read_head's answer for a head already read."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    headers = []
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.append((name.strip().lower(), value.strip()))
    return parts[0], parts[1], headers


def header(headers, name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def http_response(code: int, body: str = "", extra: tuple[tuple[str, str], ...] = (),
                  close: bool = True) -> bytes:
    data = body.encode()
    lines = [f"HTTP/1.1 {code} {reason(code)}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in extra)]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def unmask(data: bytes, key: bytes) -> bytes:
    if not data:
        return data
    keys = (key * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(keys, "big")).to_bytes(len(data), "big")


def frame(opcode: int, payload: bytes, fin: bool = True, rsv: int = 0,
          mask: bytes | None = None) -> bytes:
    first = (0x80 if fin else 0) | rsv | opcode
    bit = 0x80 if mask else 0
    n = len(payload)
    if n < 126:
        head = bytes([first, bit | n])
    elif n < 65536:
        head = bytes([first, bit | 126]) + struct.pack("!H", n)
    else:
        head = bytes([first, bit | 127]) + struct.pack("!Q", n)
    if mask:
        return head + mask + unmask(payload, mask)
    return head + payload


async def read_frame(reader: asyncio.StreamReader, max_size: int = 64 << 20):
    """(fin, opcode, unmasked payload); raises on EOF or on a frame over max_size."""
    first, second = await reader.readexactly(2)
    n = second & 0x7F
    if n == 126:
        n = struct.unpack("!H", await reader.readexactly(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", await reader.readexactly(8))[0]
    if n > max_size:
        raise ValueError(f"frame of {n} bytes")
    key = await reader.readexactly(4) if second & 0x80 else None
    data = await reader.readexactly(n)
    return bool(first & 0x80), first & 0x0F, unmask(data, key) if key else data


def close_code(payload: bytes) -> str:
    if not payload:
        return "1005"
    if len(payload) == 1:
        return "malformed"
    return str(struct.unpack("!H", payload[:2])[0])


async def close_writer(writer: asyncio.StreamWriter, grace: float = 5.0) -> None:
    if not writer.is_closing():
        writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), grace)
    except (asyncio.TimeoutError, OSError):
        writer.transport.abort()


# ---------------------------------------------------------------------------
# raw_port

HOSTILE_FRAMES = {
    "masked": frame(0x1, b"hi", mask=b"\x37\xfa\x21\x3d"),
    "reserved-opcode": frame(0x3, b"hi"),
    "rsv": frame(0x1, b"hi", rsv=0x40),
    "invalid-utf8": frame(0x1, b"\xff\xfe"),
    "oversized": frame(0x2, pattern(2 << 20)),
    "bad-accept": frame(0x1, b"hi"),
    "control-too-long": frame(0x9, pattern(126)),
    "messages-then-masked": b"".join(frame(0x1, f"message {i}".encode()) for i in range(1, 6))
    + frame(0x1, b"hi", mask=b"\x37\xfa\x21\x3d"),
}


class CloseRecord:
    def __init__(self) -> None:
        self.code = "none"
        self.done = asyncio.Event()


class CloseRecords:
    def __init__(self) -> None:
        self.latest: CloseRecord | None = None
        self.named: dict[str, CloseRecord] = {}


RECORDS: CloseRecords | None = None


def handshake(key: str) -> bytes:
    return ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {key}\r\n\r\n").encode()


async def hostile(kind: str, key: str, reader, writer, record: CloseRecord) -> None:
    accept = accept_key(key + "wrong") if kind == "bad-accept" else accept_key(key)
    writer.write(handshake(accept) + HOSTILE_FRAMES[kind])  # not drained: read at once
    try:
        async with asyncio.timeout(HOSTILE_READ_SECONDS):
            while True:
                _, opcode, data = await read_frame(reader)
                if opcode == 0x8:
                    record.code = close_code(data)
                    writer.write(frame(0x8, data[:2]))
                    break
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, ConnectionError):
        pass
    finally:
        record.done.set()


async def no_close_reply(reader, writer, record: CloseRecord) -> None:
    opcode, parts = 0x1, []
    try:
        while True:
            fin, op, data = await read_frame(reader)
            if op == 0x8:
                record.code = close_code(data)
                break
            if op == 0x9:
                writer.write(frame(0xA, data))
            elif op in (0x1, 0x2):
                opcode, parts = op, [data]
            elif op == 0x0:
                parts.append(data)
            if op in (0x0, 0x1, 0x2) and fin:
                writer.write(frame(opcode, b"".join(parts)))
                parts = []
                await writer.drain()
    except (asyncio.IncompleteReadError, ValueError, ConnectionError):
        record.done.set()
        return
    record.done.set()
    try:  # never answer the close; hold TCP open until the client closes it
        async with asyncio.timeout(HOLD_SECONDS):
            while await reader.read(65536):
                pass
    except (asyncio.TimeoutError, ConnectionError):
        pass


async def report_head(lines: list[str], reader, writer) -> None:
    """/head/...: the head as it came, whatever its request line looks like."""
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip().lower(), value.strip()))
    key = header(headers, "sec-websocket-key")
    if key is None:
        writer.write(http_response(400, "a WebSocket upgrade is expected here\n"))
        return
    report = json.dumps({"requestLine": lines[0], "headerLines": lines[1:]})
    writer.write(handshake(accept_key(key)) + frame(0x1, report.encode())
                 + frame(0x8, struct.pack("!H", 1000)))
    try:
        async with asyncio.timeout(HOSTILE_READ_SECONDS):
            while True:
                _, opcode, _ = await read_frame(reader)
                if opcode == 0x8:
                    break
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, ConnectionError):
        pass


# /ping-flood?id=NAME: what the flood sent and what came back, and its stop, by NAME.
PING_FLOODS: dict[str, dict] = {}
PING_FLOOD_STOPS: dict[str, asyncio.Event] = {}
FLOOD_BATCH = 512


async def ping_flood(reader, writer, name: str, seconds: float, opcode: int = 0x9) -> None:
    """Pings of 125 bytes (an 8-byte big-endian sequence number first) as fast as the client
    takes them, reading nothing, for `seconds` or until /ping-flood/stop; then the text
    "flood over", then reads: counts pongs, answers each text message with the JSON of the
    counts, echoes a close. With opcode 0xA, unsolicited pongs instead of pings."""
    stats = {"pings": 0, "pongs": 0, "lastPong": None}
    PING_FLOODS[name] = stats
    stop = asyncio.Event()
    PING_FLOOD_STOPS[name] = stop
    pad = bytes(125 - 8)
    sequence = 0

    async def flood() -> None:
        nonlocal sequence
        while True:
            batch = bytearray()
            for _ in range(FLOOD_BATCH):
                sequence += 1
                batch += frame(opcode, sequence.to_bytes(8, "big") + pad)
            writer.write(batch)  # in the transport: it goes out before what follows
            stats["pings"] = sequence
            await writer.drain()
            # drain() returns without yielding while the client keeps up: the other
            # connections of this process (other tests' peers) get their turn.
            await asyncio.sleep(0)

    flooding = asyncio.ensure_future(flood())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({flooding, stopping}, timeout=seconds,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        flooding.cancel()
        stopping.cancel()
    if flooding.done() and not flooding.cancelled() and flooding.exception() is not None:
        return  # the client went away
    writer.write(frame(0x1, b"flood over"))
    try:
        async with asyncio.timeout(HOLD_SECONDS):
            while True:
                _, opcode, data = await read_frame(reader)
                if opcode == 0xA:
                    stats["pongs"] += 1
                    stats["lastPong"] = int.from_bytes(data[:8], "big") if len(data) == 125 else -1
                elif opcode in (0x1, 0x2):
                    writer.write(frame(0x1, json.dumps(stats).encode()))
                    await writer.drain()
                elif opcode == 0x8:
                    writer.write(frame(0x8, data[:2]))
                    await writer.drain()
                    break
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, ConnectionError):
        pass


async def raw_connection(reader, writer) -> None:
    try:
        raw_head = await read_raw_head(reader)
        if raw_head is None:
            return
        lines = raw_head.decode("latin-1").split("\r\n")
        while lines and lines[-1] == "":
            lines.pop()
        if lines and lines[0].startswith("GET /head/"):
            await report_head(lines, reader, writer)
            return
        request = parse_head(raw_head)
        if request is None:
            return
        method, target, headers = request
        path, query = split_target(target)
        name = query.get("id", [None])[0]
        if path == "/ping-flood/sent":
            stats = PING_FLOODS.get(name or "")
            writer.write(http_response(200, str(stats["pings"] if stats else 0)))
            return
        if path == "/ping-flood/stop":
            stop = PING_FLOOD_STOPS.get(name or "")
            if stop is not None:
                stop.set()
            writer.write(http_response(200, "stopped" if stop is not None else "none"))
            return
        if path == "/hostile/last-close":
            record = RECORDS.named.get(name) if name is not None else RECORDS.latest
            if record is not None and "wait" in query:
                try:
                    await asyncio.wait_for(record.done.wait(), int(query["wait"][0]) / 1000)
                except (asyncio.TimeoutError, ValueError):
                    pass
            writer.write(http_response(200, record.code if record is not None else "none"))
            return
        kind = path[len("/hostile/"):] if path.startswith("/hostile/") else None
        if kind not in HOSTILE_FRAMES and path not in ("/no-close-reply", "/silent", "/ping-flood"):
            writer.write(http_response(404, f"no such path {path}\n"))
            return
        key = header(headers, "sec-websocket-key")
        if key is None or "websocket" not in (header(headers, "upgrade") or "").lower():
            writer.write(http_response(400, "a WebSocket upgrade is expected here\n"))
            return
        record = CloseRecord()
        if name is not None:
            RECORDS.named[name] = record
        if kind is not None:
            RECORDS.latest = record
            await hostile(kind, key, reader, writer, record)
        elif path == "/ping-flood":
            writer.write(handshake(accept_key(key)))
            opcode = 0xA if query.get("kind", ["ping"])[0] == "pong" else 0x9
            seconds = float(query.get("seconds", ["5"])[0])
            await ping_flood(reader, writer, name or "", seconds, opcode)
        elif path == "/silent":
            # Accepts, then reads and ignores everything (pings too) until the client goes.
            writer.write(handshake(accept_key(key)))
            await writer.drain()
            while await reader.read(65536):
                pass
        else:
            writer.write(handshake(accept_key(key)))
            await no_close_reply(reader, writer, record)
    except ConnectionError:
        pass
    finally:
        await close_writer(writer)


# ---------------------------------------------------------------------------
# proxy_port

TUNNELS = 0
PROXY_CREDENTIALS = base64.b64encode(f"{PROXY_USER}:{PROXY_PASSWORD}".encode()).decode()


def proxy_authorized(headers) -> bool:
    value = header(headers, "proxy-authorization") or ""
    scheme, _, credentials = value.partition(" ")
    return scheme.lower() == "basic" and credentials.strip() == PROXY_CREDENTIALS


def connect_target(target: str) -> tuple[str, int] | None:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.lower(), int(port)


async def pump(reader, writer) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError, RuntimeError):
        writer.transport.abort()


async def proxy_connection(reader, writer) -> None:
    global TUNNELS
    try:
        while (request := await read_head(reader)) is not None:
            method, target, headers = request
            close = any((header(headers, h) or "").lower() == "close"
                        for h in ("connection", "proxy-connection"))
            if method == "GET" and split_target(target)[0] == "/tunnels":
                writer.write(http_response(200, str(TUNNELS), close=close))
            elif method != "CONNECT":
                writer.write(http_response(405, "this proxy only does CONNECT (and GET /tunnels)\n",
                                           (("Allow", "CONNECT"),), close=close))
            elif not proxy_authorized(headers):
                writer.write(http_response(407, "proxy authentication required\n",
                                           (("Proxy-Authenticate", 'Basic realm="ws-proxy"'),),
                                           close=close))
            elif (where := connect_target(target)) is None:
                writer.write(http_response(400, f"bad CONNECT target {target}\n", close=close))
            elif where[0] not in ("127.0.0.1", "localhost"):
                writer.write(http_response(403, f"target not allowed: {target}\n", close=close))
            else:
                try:
                    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", where[1])
                except OSError as error:
                    writer.write(http_response(502, f"cannot connect to {target}: {error}\n",
                                               close=close))
                else:
                    TUNNELS += 1
                    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    try:
                        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
                    finally:
                        await close_writer(up_writer)
                    return
            await writer.drain()
            if close:
                return
    except ConnectionError:
        pass
    finally:
        await close_writer(writer)


# ---------------------------------------------------------------------------

async def watch_parent(pid):
    while peerlib.parent_alive(pid):
        await asyncio.sleep(0.5)
    os._exit(0)


async def main_async(parent_pid, tls_info):
    global RECORDS
    RECORDS = CloseRecords()
    contexts = tls_contexts(tls_info) if tls_info else None
    if contexts is not None:
        send_handshake_alerts()
        asyncio.get_running_loop().set_exception_handler(quiet_handshake_failures)
    options = dict(process_request=process_request, process_response=process_response,
                   select_subprotocol=choose_subprotocol, compression=None, max_size=32 << 20,
                   ping_interval=None, close_timeout=30)
    servers = [serve(handler, "127.0.0.1", 0, **options)]
    if contexts is not None:
        servers += [serve(handler, "127.0.0.1", 0, ssl=contexts[0], **options),
                    serve(handler, "127.0.0.1", 0, ssl=contexts[1], **options)]
    # The same paths with permessage-deflate (websockets' defaults: it answers an offer with
    # 12-bit windows both ways and keeps its context between messages).
    servers.append(serve(handler, "127.0.0.1", 0, **(options | dict(compression="deflate"))))
    ws = [await s for s in servers]
    raw = await asyncio.start_server(raw_connection, "127.0.0.1", 0, limit=HEAD_LIMIT)
    proxy = await asyncio.start_server(proxy_connection, "127.0.0.1", 0, limit=HEAD_LIMIT)
    ports = [s.sockets[0].getsockname()[1] for s in (ws[0], raw, proxy, *ws[1:])]
    peerlib.announce("READY " + " ".join(map(str, ports)))
    await watch_parent(parent_pid)


def main() -> int:
    ap = argparse.ArgumentParser(description="WebSocket test peers on free loopback ports.")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process disappears (default: the parent)")
    ap.add_argument("--tls-info", default=None,
                    help="serve_tls.py's info.json: also serve wss and wss with client certificates")
    args = ap.parse_args()
    # Started from a Swift test process, we inherit a mask that blocks SIGTERM: unblock it so
    # that terminate() works (the default actions end the process).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, peerlib.STOP_SIGNALS)
    asyncio.run(main_async(args.parent_pid or os.getppid(), args.tls_info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
