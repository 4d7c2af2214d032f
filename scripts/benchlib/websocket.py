"""The ws-echo row: WebSockets over TLS to an echo server of our own (bench-wsserver: SwiftNIO's
WebSocket server upgrader over NIOSSL), WS_SOCKETS at once, each a child task; per run, two timed
phases: WS_ROUNDS round trips per socket (send, wait for the echo), then WS_MESSAGES messages per
socket streamed (sent without waiting, the echoes read meanwhile). Every echo is checked by the
client (BenchSupport's runWebSocketBench). Two tables from the same runs: round trips, and
streamed messages."""

from __future__ import annotations

import base64
import hashlib
import os
import select
import signal
import socket
import ssl
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .catalog import CLIENTS, ROWS
from .process import first_error_line, run_measured, tail, with_timeout
from .report import Facts
from .results import RunRecord, find_result
from .server import CLOCK_TICKS
from .settings import BenchError, Settings, log, log_details

ROW = "ws-echo"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _read_frame(conn: ssl.SSLSocket) -> tuple[int, bytes]:
    """One unmasked frame from the server: (opcode, payload)."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise OSError("connection closed")
            data += chunk
        return data

    first, second = exactly(2)
    length = second & 0x7F
    if length == 126:
        length = int.from_bytes(exactly(2), "big")
    elif length == 127:
        length = int.from_bytes(exactly(8), "big")
    return first & 0x0F, exactly(length)


def _masked_frame(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    assert len(payload) < 126
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_probe(port: int, cert: Path) -> str:
    """A handshake over TLS (the certificate trusted), a text message and its echo, a ping and its
    pong, and the close handshake; "" when all went as they should, else what did not."""
    try:
        context = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
                key = base64.b64encode(os.urandom(16)).decode()
                conn.sendall((f"GET /echo HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                              f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                             .encode())
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(1)
                    if not chunk:
                        return "closed during the handshake"
                    head += chunk
                lines = head.decode(errors="replace").split("\r\n")
                if " 101 " not in lines[0] + " ":
                    return f"handshake answered '{lines[0]}'"
                accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
                if not any(line.lower() == f"sec-websocket-accept: {accept}".lower() for line in lines):
                    return "wrong Sec-WebSocket-Accept"
                conn.sendall(_masked_frame(0x1, b"probe"))
                if _read_frame(conn) != (0x1, b"probe"):
                    return "the text message was not echoed"
                conn.sendall(_masked_frame(0x9, b"ping"))
                if _read_frame(conn) != (0xA, b"ping"):
                    return "the ping was not answered with its pong"
                conn.sendall(_masked_frame(0x8, (1000).to_bytes(2, "big")))
                if _read_frame(conn) != (0x8, (1000).to_bytes(2, "big")):
                    return "the close was not answered with close 1000"
        return ""
    except (OSError, ssl.SSLError, ValueError) as error:
        return str(error) or type(error).__name__


class WSServer:
    """bench-wsserver: started with a pipe as its standard input (it exits when the pipe ends),
    on a free port, which its READY line gives; stopped on exit."""

    def __init__(self, binary: str, cert: Path, key: Path, work: Path, threads: int, cpus: str = ""):
        self.argv = [*(["taskset", "-c", cpus] if cpus else []), binary, "--cert", str(cert), "--key", str(key),
                     "--threads", str(threads)]
        self.cert = cert
        self.err = work / "wsserver.err"
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.threads = 0

    def start(self) -> int:
        with open(self.err, "wb") as err:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        assert self.process.stdout is not None
        line = b""
        deadline = time.monotonic() + 10
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if not select.select([self.process.stdout], [], [], 0.2)[0]:
                if self.process.poll() is not None:
                    break
                continue
            chunk = os.read(self.process.stdout.fileno(), 256)
            if not chunk:
                break
            line += chunk
        fields = dict(word.split("=", 1) for word in line.decode(errors="replace").split()[1:] if "=" in word)
        if not line.startswith(b"READY ") or not fields.get("port", "").isdigit():
            self.stop()
            log_details(tail(self.err, 5))
            raise BenchError(f"bench-wsserver did not start (it printed '{line.decode(errors='replace').strip()}')")
        self.port, self.threads = int(fields["port"]), int(fields.get("threads", "0"))
        problem = ws_probe(self.port, self.cert)
        if problem:
            self.stop()
            raise BenchError(f"bench-wsserver on port {self.port} failed its probe: {problem}")
        return self.port

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def ticks(self) -> int:
        """CPU ticks (user + system) of the server so far (all its threads); 0 when unknown."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return 0
        fields = stat.rsplit(") ", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def stop(self) -> None:
        """Closes its standard input (it exits), then TERM and KILL if it does not."""
        if not self.process:
            return
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self.process = None


@dataclass(frozen=True)
class WSSetup:
    """How the row was run (for its tables' notes)."""

    threads: int
    port: int


class WSRows:
    """Runs the ws-echo row; `records` holds every measured run."""

    def __init__(self, settings: Settings, binaries: dict[str, str], server: WSServer, cert: Path, work: Path):
        self.settings = settings
        self.binaries = binaries
        self.server = server
        self.url = f"wss://127.0.0.1:{server.port}/echo"
        self.cert = cert
        self.work = work
        self.records: list[RunRecord] = []
        self.failures: dict[str, str] = {}

    def _argv(self, client: str) -> list[str]:
        s = self.settings
        spec = CLIENTS[client]
        binary = self.binaries[ROWS[ROW].product_for(spec)]
        argv = [binary, "--mode", "websocket", "--url", self.url, "--ca-file", str(self.cert),
                "--ws-sockets", str(s.ws_sockets), "--ws-rounds", str(s.ws_rounds),
                "--ws-messages", str(s.ws_messages), "--ws-bytes", str(s.ws_bytes), *spec.flags]
        return with_timeout(s.run_timeout, argv, s.client_cpus)

    def run_once(self, client: str, label: str) -> tuple[dict[str, str] | None, str]:
        """One run, checked: exit status 0, a RESULT line with every socket, round trip and
        streamed message; the fields with the script's own (cpu, srv_cpu), or why it failed."""
        s = self.settings
        out, err = self.work / "ws.out", self.work / "ws.out.err"
        before = self.server.ticks()
        finished = run_measured(self._argv(client), stdout=out, stderr=err)
        server_cpu = (self.server.ticks() - before) / CLOCK_TICKS
        result = find_result(out.read_text(errors="replace")) if out.exists() else None
        problem = ""
        if finished.status != 0 or result is None:
            problem = f"exit {finished.status}" + (", no RESULT line" if finished.status == 0 else "")
            first = first_error_line(err, last=True)
            problem += f": {first}" if first else ""
        else:
            expected = {"sockets": s.ws_sockets, "round_trips": s.ws_sockets * s.ws_rounds,
                        "streamed": s.ws_sockets * s.ws_messages}
            wrong = [f"{key}={result.get(key)} (expected {value})" for key, value in expected.items()
                     if result.get(key) != str(value)]
            if wrong:
                problem = "RESULT line: " + ", ".join(wrong)
        if problem:
            log(f"{label} {client} FAILED: {problem}")
            log_details(tail(err, 5))
            return None, problem
        return {**result, "cpu": f"{finished.cpu:.3f}", "srv_cpu": f"{server_cpu:.2f}"}, ""

    def run_row(self, clients: list[str]) -> None:
        s = self.settings
        log(f"{ROW}: {self.url} (bench-wsserver, pid {self.server.pid}, {self.server.threads} event loop threads)")
        log(f"{ROW}: warm-up, 1 run per client")
        for client in clients:
            self.run_once(client, f"{ROW} warm-up")
        log(f"{ROW}: {s.runs} runs of {' '.join(clients)}: {s.ws_sockets} sockets, {s.ws_rounds} round trips and"
            f" {s.ws_messages} streamed messages each, {s.ws_bytes} bytes a message")
        for run in range(1, s.runs + 1):
            for client in clients:
                label = f"{ROW} run {run}/{s.runs}"
                fields, problem = self.run_once(client, label)
                self.records.append(RunRecord(ROW, run, client, fields, error=problem))
                if fields:
                    log(f"{label} {client:<12} rtt {fields['rtt_seconds']} s, stream {fields['stream_seconds']} s"
                        f" (cpu {fields['rtt_cpu']} + {fields['stream_cpu']} s, server cpu {fields['srv_cpu']} s)")


def _machine(facts: Facts) -> str:
    pinned = ""
    if facts.server_cpus or facts.client_cpus:
        pinned = (f" (taskset: bench-wsserver on CPU {facts.server_cpus or 'any'}, clients on CPU"
                  f" {facts.client_cpus or 'any'})")
    return f"{facts.date}, {facts.cores} cores{pinned}, {facts.libcurl}, {facts.swift};"


def ws_tables(clients: list[str], records: list[RunRecord], s: Settings, facts: Facts, setup: WSSetup) -> list[str]:
    """The row's two tables: round trips, and streamed messages; each with its notes."""
    reference = ROWS[ROW].reference
    ok = {c: [r for r in records if r.name == c and not r.failed] for c in clients}
    failed = {c: [r for r in records if r.name == c and r.failed] for c in clients}
    n = s.ws_sockets
    setup_text = (
        f"{_machine(facts)} {s.runs} runs each, interleaved, after one warm-up run each. Server:"
        f" Benchmarks/Sources/bench-wsserver on 127.0.0.1 (SwiftNIO's NIOWebSocketServerUpgrader over NIOSSL,"
        f" {setup.threads} event loop threads, the bench's self-signed ECDSA P-256 certificate; every frame echoed as it"
        f" came, flushed at the end of each read burst). Each run opens {n} WebSockets to"
        f" wss://127.0.0.1:PORT/echo, a child task each in a task group (courier: api.webSocket(\"echo\") on one"
        f" HTTPSessionManager, tls.certificateAuthorityFile; wskit: WebSocket.connect(to:configuration:on:), NIOSSL"
        f" trustRoots, MultiThreadedEventLoopGroup.singleton, messages from onText through an AsyncThrowingStream),"
        f" then the phases below, each a task group with a child task per socket, then closes them.")

    def head(title: str, what: str, columns: list[str]) -> list[str]:
        return [f"## {title}", "", f"{setup_text} {what}", "",
                "| " + " | ".join(["client", *columns, "runs"]) + " |",
                "| --- |" + " ---: |" * (len(columns) + 1)]

    def ratio(name: str, key: str) -> str:
        if not ok.get(reference) or not ok.get(name):
            return "n/a"
        return f"{statistics.median(r.number(key) for r in ok[name]) / statistics.median(r.number(key) for r in ok[reference]):.2f}"

    def runs_text(name: str) -> str:
        return f"{len(ok[name])}/{len(ok[name]) + len(failed[name])}"

    rounds = s.ws_rounds
    total_rt = n * rounds
    lines = head(
        f"WebSocket round trips: {n} sockets x {rounds:,} round trips of {s.ws_bytes}-byte text messages over TLS",
        f"Timed: every socket sends a message and waits for its echo (checked: equal to what was sent), {rounds:,}"
        f" times; {total_rt:,} round trips in all, {n} in flight.",
        ["median s", "min s", "max s", "round trips/s", "per socket/s", "sockets done s", f"x {reference}",
         "RTT p50 µs", "RTT p99 µs", "CPU s", "CPU µs per round trip", "peak RSS MiB"])
    for name in clients:
        label = f"{name} *" if name == reference else name
        rs = ok[name]
        if not rs:
            lines.append(f"| {label} | failed |" + " |" * 11 + f" {runs_text(name)} |")
            continue
        secs = [r.number("rtt_seconds") for r in rs]
        med = statistics.median(secs)
        cpu = statistics.median(r.number("rtt_cpu") for r in rs)
        p50 = statistics.median(r.number("rtt_p50_us") for r in rs)
        p99 = statistics.median(r.number("rtt_p99_us") for r in rs)
        rss = max(r.number("maxrss_kb") for r in rs) / 1024
        lines.append(f"| {label} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} | {total_rt / med:,.0f} |"
                     f" {rounds / med:,.0f} | {_done(rs, 'rtt')} | {ratio(name, 'rtt_seconds')} | {p50:,.0f} |"
                     f" {p99:,.0f} | {cpu:.2f} |"
                     f" {cpu / total_rt * 1e6:.1f} | {rss:.1f} | {runs_text(name)} |")
    lines += ["", "\\* reference. Seconds: the phase's wall time in the client, from the first send to the last echo;"
              " x is the ratio of medians to the reference's (above 1: slower). Sockets done: when the first socket"
              " and half of them had made all their round trips, from the phase's start (median of the runs; with"
              " every socket served alike both are near the phase's seconds). RTT: each round trip's time from"
              " its send to its echo, p50 and p99 over all sockets and rounds (median of the runs). CPU s: the"
              " client process's user + system time during the phase (getrusage); peak RSS: the largest ru_maxrss"
              " of the whole run."]
    lines += _notes(clients, ok, failed)
    rt_table = "\n".join(lines)

    messages = s.ws_messages
    total_msg = n * messages
    lines = head(
        f"WebSocket streamed messages: {n} sockets x {messages:,} {s.ws_bytes}-byte text messages each way over TLS",
        f"Timed: every socket's sender task sends {messages:,} messages, each `send` awaited (it returns when the"
        " frame is handed to the connection) but no echo waited for, while the socket's own task reads the"
        f" {messages:,} echoes and checks each, in order; {total_msg:,} messages each way in all.",
        ["median s", "min s", "max s", "messages/s", "per socket/s", "sockets done s", f"x {reference}", "CPU s",
         "CPU µs per message"])
    for name in clients:
        label = f"{name} *" if name == reference else name
        rs = ok[name]
        if not rs:
            lines.append(f"| {label} | failed |" + " |" * 8 + f" {runs_text(name)} |")
            continue
        secs = [r.number("stream_seconds") for r in rs]
        med = statistics.median(secs)
        cpu = statistics.median(r.number("stream_cpu") for r in rs)
        lines.append(f"| {label} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} | {total_msg / med:,.0f} |"
                     f" {messages / med:,.0f} | {_done(rs, 'stream')} | {ratio(name, 'stream_seconds')} | {cpu:.2f} |"
                     f" {cpu / total_msg * 1e6:.1f} | {runs_text(name)} |")
    lines += ["", "\\* reference. Seconds: the phase's wall time in the client, from the first send to the last echo"
              " read; messages/s counts the messages sent (each also echoed, read and checked). Sockets done: when"
              " the first socket and half of them had read all their echoes. CPU s: the client process's user +"
              " system time during the phase."]
    lines += _notes(clients, ok, failed)
    return [rt_table, "\n".join(lines)]


def _done(records: list[RunRecord], phase: str) -> str:
    """When the first socket and half of them finished the phase (medians of the runs)."""
    first = statistics.median(r.number(f"{phase}_first_done") for r in records)
    half = statistics.median(r.number(f"{phase}_median_done") for r in records)
    return f"{first:.2f} / {half:.2f}"


def _notes(clients: list[str], ok: dict[str, list[RunRecord]], failed: dict[str, list[RunRecord]]) -> list[str]:
    """The per-run figures outside the phases, and the failed runs."""
    per = "; ".join(
        f"{name} {statistics.median(r.number('open_seconds') for r in ok[name]):.3f} s /"
        f" {statistics.median(r.number('close_seconds') for r in ok[name]):.3f} s /"
        f" {statistics.median(r.number('cpu') for r in ok[name]):.2f} s /"
        f" {statistics.median(r.number('srv_cpu') for r in ok[name]):.2f} s"
        for name in clients if ok.get(name))
    lines = [f"Per run (median), opening the sockets (TCP, TLS and the upgrade, all at once) / closing them (the"
             f" close handshake) / the client's CPU time for the whole run (wait4) / the server's CPU time during"
             f" the run: {per}."] if per else []
    bad = {name: rs for name, rs in failed.items() if rs}
    if bad:
        lines += ["", "Failed runs: " + ", ".join(f"{n} {len(rs)}" for n, rs in bad.items())
                  + " (not in the figures); the first of each:", ""]
        lines += [f"    {name} run {rs[0].run}: {rs[0].error}" for name, rs in bad.items()]
    return lines
