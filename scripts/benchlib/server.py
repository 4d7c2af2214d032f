"""nginx: its configuration, its process, its worker's CPU time, its access logs, and the
upload sink's probe."""

from __future__ import annotations

import functools
import http.client
import os
import select
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .settings import BenchError, log, log_details

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Servers:
    """Which servers nginx runs beside the plain one, and how."""

    tls: bool = False  # https, h2: TLS, h2 and http/1.1 through ALPN, keep-alive
    close: bool = False  # https-new: TLS, HTTP/1.1, every connection closed after its response
    wide_plain: bool = False  # h1-10k: plain HTTP, logged, a long listen backlog
    wide_tls: bool = False  # h2-10k: the tls server's settings, a long listen backlog
    big: bool = False  # the large rows' locations
    big_tls: bool = False  # /big.bin on the tls server too (download-h3's HTTP/2 side)
    worker_connections: int = 4096
    rlimit_nofile: int | None = None  # worker_rlimit_nofile
    backlog: int = 511  # the wide servers' listen backlog

    @property
    def names(self) -> tuple[str, ...]:
        """The servers in order, "plain" first: the ports nginx is started on."""
        optional = ("tls", "close", "wide_plain", "wide_tls")
        return ("plain",) + tuple(name for name in optional if getattr(self, name))


@dataclass(frozen=True)
class Paths:
    """Where nginx finds and writes everything."""

    work: Path  # the run's temporary directory
    docroot: Path
    cert: Path
    key: Path
    fixture: Path | None  # the large rows' file
    body_dir: Path | None  # nginx's temporary files of the upload bodies
    upload_sink: str

    @property
    def nginx(self) -> Path:
        return self.work / "nginx"

    @property
    def logs(self) -> Path:
        return self.work / "nginx" / "logs"


def _big_locations(p: Paths) -> str:
    """/big.bin, the fixture; /upload/, the upload sink (UPLOAD_SINK). Their requests are logged
    to big.log, one line each: status, $request_length, $body_bytes_sent, $request_time,
    "$request"; every run is checked there."""
    text = f"""
        location = /big.bin {{
            alias {p.fixture};
            default_type application/octet-stream;
            sendfile on;
            access_log {p.logs}/big.log big;
        }}
"""
    if p.upload_sink == "file":
        # mirror_request_body makes nginx read the whole body (into a temporary file in
        # client_body_temp_path) before the request goes on; then the static module refuses the
        # PUT (405) or finds no file for the POST (404), and error_page answers 200 from
        # /_upload_done.
        return text + f"""
        location /upload/ {{
            client_max_body_size 0;
            client_body_buffer_size 1m;
            client_body_temp_path {p.body_dir};
            log_not_found off;
            mirror /_upload_mirror;
            mirror_request_body on;
            error_page 404 405 =200 /_upload_done;
        }}
        location = /_upload_mirror {{
            internal;
            client_max_body_size 0;
            return 204;
        }}
        location = /_upload_done {{
            internal;
            client_max_body_size 0;
            default_type text/plain;
            access_log {p.logs}/big.log big;
            return 200 "received\\n";
        }}
"""
    # nginx answers at once and reads the body to discard it.
    return text + f"""
        location /upload/ {{
            client_max_body_size 0;
            access_log {p.logs}/big.log big;
            return 204;
        }}
"""


def _tls_server(p: Paths, listen: str, extra: str = "", session_cache: str = "ssl_session_cache shared:SSL:10m;",
                locations: str = "") -> str:
    return f"""
    server {{
        listen {listen};
        root {p.docroot};
        ssl_certificate {p.cert};
        ssl_certificate_key {p.key};
        ssl_protocols TLSv1.2 TLSv1.3;
        {session_cache}{extra}
        access_log {p.logs}/tls.log tls buffer=64k flush=100ms;
        add_header Cache-Control "no-store" always;{locations}
    }}
"""


def _big_tls_location(p: Paths) -> str:
    """/big.bin on the tls server (download-h3 over HTTP/2), logged to big.log as the plain
    server's (sendfile does not apply under TLS)."""
    return f"""
        location = /big.bin {{
            alias {p.fixture};
            default_type application/octet-stream;
            access_log {p.logs}/big.log big;
        }}"""


def render_config(s: Servers, p: Paths, ports: dict[str, int]) -> str:
    """nginx.conf: one worker; the plain server (access log off), and the servers `s` asks for.
    The logged servers write, buffered (flushed within 100 ms), one line per request:
    $server_protocol, status, $body_bytes_sent, $connection, $ssl_protocol."""
    servers = ""
    if s.tls:
        servers += _tls_server(p, f"127.0.0.1:{ports['tls']} ssl http2",
                               locations=_big_tls_location(p) if s.big_tls else "")
    if s.close:
        # HTTP/1.1 only, every connection closed after its response, no TLS session resumption
        # (each request a full handshake).
        servers += _tls_server(
            p, f"127.0.0.1:{ports['close']} ssl", "\n        ssl_session_tickets off;\n        keepalive_timeout 0;",
            session_cache="ssl_session_cache off;")
    if s.wide_plain:
        servers += f"""
    server {{
        listen 127.0.0.1:{ports['wide_plain']} backlog={s.backlog};
        root {p.docroot};
        access_log {p.logs}/plain.log tls buffer=64k flush=100ms;
        add_header Cache-Control "no-store" always;
    }}
"""
    if s.wide_tls:
        servers += _tls_server(p, f"127.0.0.1:{ports['wide_tls']} ssl http2 backlog={s.backlog}")
    user = "user root;" if os.getuid() == 0 else ""
    rlimit = f"worker_rlimit_nofile {s.rlimit_nofile};" if s.rlimit_nofile else ""
    tmp = p.nginx / "tmp"
    return f"""{user}
daemon off;
master_process on;
worker_processes 1;
{rlimit}
pid {p.nginx}/nginx.pid;
error_log {p.logs}/error.log warn;

events {{
    worker_connections {s.worker_connections};
}}

http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 65;
    default_type application/json;
    server_tokens off;
    open_file_cache max=16 inactive=60s;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    log_format big '$status $request_length $body_bytes_sent $request_time "$request"';
    log_format tls '$server_protocol $status $body_bytes_sent $connection $ssl_protocol';

    server {{
        listen 127.0.0.1:{ports['plain']};
        root {p.docroot};
        # Every client must go to the server: no HTTP cache may answer.
        add_header Cache-Control "no-store" always;
        # The sse-decode row's stream.
        location ~ \.sse$ {{
            types {{ }}
            default_type text/event-stream;
            add_header Cache-Control "no-store" always;
        }}
{_big_locations(p) if s.big else ""}
    }}
{servers}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plain_ready(port: int, body_bytes: int) -> bool:
    """The server answers GET /small.json with 200 and the whole file."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        connection.request("GET", "/small.json")
        response = connection.getresponse()
        ok = response.status == 200 and len(response.read()) == body_bytes
        connection.close()
        return ok
    except (OSError, http.client.HTTPException):
        return False


def tls_ready(port: int, cert: Path, protocol: str) -> bool:
    """The TLS server answers a handshake with the certificate trusted and picks `protocol` (h2
    or http/1.1) when h2 is offered first through ALPN."""
    try:
        context = ssl.create_default_context(cafile=str(cert))
        context.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", port), timeout=1) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                return s.selected_alpn_protocol() == protocol
    except (OSError, ssl.SSLError):
        return False


class Nginx:
    """The nginx process, started on free loopback ports and stopped on exit."""

    def __init__(self, binary: str, servers: Servers, paths: Paths, body_bytes: int, cpus: str = ""):
        self.binary = binary
        self.cpus = cpus
        self.servers = servers
        self.paths = paths
        self.body_bytes = body_bytes
        self.process: subprocess.Popen | None = None
        self.ports: dict[str, int] = {}
        self._worker: int | None = None

    @functools.cached_property
    def version(self) -> str:
        result = subprocess.run([self.binary, "-v"], capture_output=True, text=True)
        return (result.stderr + result.stdout).strip().split("nginx/")[-1]

    def start(self) -> dict[str, int]:
        for name in ("logs", "tmp"):
            (self.paths.nginx / name).mkdir(parents=True, exist_ok=True)
        for attempt in range(1, 6):
            ports: dict[str, int] = {}
            for name in self.servers.names:
                port = free_port()
                while port in ports.values():
                    port = free_port()
                ports[name] = port
            conf = self.paths.nginx / "nginx.conf"
            conf.write_text(render_config(self.servers, self.paths, ports))
            logs = self.paths.logs
            with open(logs / "stdout.log", "wb") as out:
                self.process = subprocess.Popen(
                    [*(["taskset", "-c", self.cpus] if self.cpus else []), self.binary, "-p", str(self.paths.nginx), "-e", str(logs / "error.log"), "-c", str(conf)],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            for _ in range(50):
                if self.process.poll() is not None:
                    break
                if self._ready(ports):
                    self.ports = ports
                    return ports
                time.sleep(0.1)
            log(f"nginx did not start on port {ports['plain']} (attempt {attempt}):")
            for name in ("error.log", "stdout.log"):
                try:
                    log_details((logs / name).read_text(errors="replace").splitlines()[-5:])
                except OSError:
                    pass
            self.stop(signal.SIGTERM, 2)
        raise BenchError("could not start nginx")

    def _ready(self, ports: dict[str, int]) -> bool:
        cert = self.paths.cert
        checks = {
            "plain": lambda port: plain_ready(port, self.body_bytes),
            "tls": lambda port: tls_ready(port, cert, "h2"),
            "close": lambda port: tls_ready(port, cert, "http/1.1"),
            "wide_plain": lambda port: plain_ready(port, self.body_bytes),
            "wide_tls": lambda port: tls_ready(port, cert, "h2"),
        }
        return all(checks[name](port) for name, port in ports.items())

    def _children(self) -> list[int]:
        """The master's child processes (its worker)."""
        try:
            return [int(pid) for pid in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except (OSError, ValueError):
            return []

    def stop(self, how: signal.Signals = signal.SIGQUIT, grace: float = 5) -> None:
        """QUIT (graceful) or TERM (fast), then KILL after `grace` seconds, the worker too (a
        worker outlives a killed master)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(how)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                workers = self._children()
                self.process.kill()
                self.process.wait()
                for pid in workers:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self.process = None
        self._worker = None

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def _worker_pid(self) -> int | None:
        if self._worker is None and self.process:
            self._worker = next(iter(self._children()), None)
        return self._worker

    def worker_ticks(self) -> int:
        """CPU ticks (user + system) of nginx's worker so far; 0 when unknown."""
        worker = self._worker_pid()
        if not worker:
            return 0
        try:
            stat = Path(f"/proc/{worker}/stat").read_text()
        except OSError:
            return 0
        fields = stat.rsplit(") ", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def wait_until_idle(self) -> None:
        """Until nginx's worker used no CPU for 200 ms (at most 5 s), so that the work of the
        previous run does not count in the next one."""
        for _ in range(25):
            before = self.worker_ticks()
            time.sleep(0.2)
            if self.worker_ticks() == before:
                return


def cpu_seconds(ticks: int) -> float:
    return ticks / CLOCK_TICKS


class AccessLog:
    """One of nginx's access logs, read from byte offsets (marks) on."""

    def __init__(self, path: Path):
        self.path = path
        path.touch()

    def mark(self) -> int:
        return self.path.stat().st_size

    def lines_since(self, mark: int) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(mark)
            data = f.read()
        return data.decode(errors="replace").splitlines()

    def wait_for(self, mark: int, count: int, tries: int, interval: float) -> list[str]:
        """The lines after `mark`, once there are `count` of them or after `tries` looks."""
        lines = self.lines_since(mark)
        for _ in range(tries - 1):
            if len(lines) >= count:
                break
            time.sleep(interval)
            lines = self.lines_since(mark)
        return lines

    def settle(self) -> None:
        """Until the log has not grown for 150 ms (at most 5 s): its buffer is flushed 100 ms
        after a write, so the lines of a warm-up or of a failed run are all in before the next
        run counts its own."""
        for _ in range(33):
            size = self.mark()
            time.sleep(0.15)
            if self.mark() == size:
                return


def probe_upload_sink(port: int, sink: str, small_bytes: int) -> tuple[bool, str]:
    """The upload sink must read every byte: a 4 MiB PUT in two halves. With the file sink nginx
    must not answer before the last byte; with either sink the next request on the same
    connection must be answered (nginx consumed exactly the body). Returns (ok, summary)."""
    n = 4 << 20
    half = bytes(range(256)) * (n // 2 // 256)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall((f"PUT /upload/probe.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {n}\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n").encode())
        s.sendall(half)
        early = bool(select.select([s], [], [], 1.0)[0])
        s.sendall(half)
        f = s.makefile("rb")

        def response() -> tuple[int, int] | None:
            status_line = f.readline()
            if not status_line:
                return None
            status = int(status_line.split()[1])
            length = 0
            while (line := f.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            return status, len(f.read(length))

        first = response()
        if first is None:
            return False, f"early={int(early)} connection closed without an answer"
        s.sendall(b"GET /small.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        second = response()
        if second is None:
            return False, f"early={int(early)} status={first[0]} connection closed without a second answer"
    status, (next_status, next_length) = first[0], second
    summary = f"early={int(early)} status={status} next_status={next_status} next_length={next_length}"
    expected = 204 if sink == "discard" else 200
    ok = status == expected and next_status == 200 and next_length == small_bytes and (sink == "discard" or not early)
    return ok, summary
