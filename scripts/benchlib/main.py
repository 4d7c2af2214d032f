"""scripts/bench from start to end: the plan, the build, the server, the rows, the report."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .build import Builder
from .catalog import CLIENTS, ROWS, TLS_ROWS, request_row
from .files import count_certificates, make_bundle, make_certificate, write_fixture, write_small_json
from .large import LargeFiles, LargeRows
from .report import Facts, WideSetup, large_table, request_table
from .results import RunRecord
from .server import AccessLog, Nginx, Paths, Servers, probe_upload_sink
from .settings import BODY_BYTES, BenchError, Settings, load_settings, log
from .small_gets import Endpoints, SmallGetRows
from .sse import SSERows, sse_table, write_events
from .websocket import WSRows, WSServer, WSSetup, ws_tables


def wanted_clients(s: Settings) -> dict[str, list[str]]:
    """Each requested row's clients among CLIENTS, in CLIENTS order; notes a client given in
    CLIENTS that is in none of the rows."""
    wanted = {row: [c for c in s.clients if c in ROWS[row].clients] for row in s.rows}
    if s.clients_given:
        for client in s.clients:
            if not any(client in clients for clients in wanted.values()):
                log(f"note: {client} is not part of the rows {' '.join(s.rows)}")
    return wanted


def available_clients(wanted: dict[str, list[str]], binaries: dict[str, str]) -> dict[str, list[str]]:
    """Each row's clients that have a binary (the others are skipped, with a message)."""
    available: dict[str, list[str]] = {}
    for row, clients in wanted.items():
        available[row] = []
        for client in clients:
            product = ROWS[row].product_for(CLIENTS[client])
            if product in binaries:
                available[row].append(client)
            else:
                log(f"skipping {client} in {row}: no {product} binary")
        if not available[row]:
            log(f"row {row}: no client to run")
    if not any(available.values()):
        raise BenchError("no client could be built")
    return available


def raise_open_files_limit(wanted: int, needed: int) -> int:
    """RLIMIT_NOFILE of this process (and so of nginx and every client) raised to `wanted`, or
    as far as the hard limit allows (root may raise that too); BenchError below `needed`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        new_hard = hard if hard == resource.RLIM_INFINITY or hard >= wanted else wanted
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, new_hard))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        raise BenchError(f"the 10k rows need RLIMIT_NOFILE of {needed} or more (it is {soft}, hard limit {hard})")
    return soft


def listen_backlog(wanted: int) -> int:
    """The wide servers' listen backlog: `wanted`, as far as net.core.somaxconn allows; at
    least nginx's default, 511."""
    try:
        somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        somaxconn = 4096
    return max(511, min(wanted, somaxconn))


class Bench:
    """One invocation: owns the temporary directories and nginx, and removes them at the end."""

    def __init__(self, settings: Settings):
        self.s = settings
        self.work = Path(tempfile.mkdtemp(prefix="courier-bench."))
        self.big_work: Path | None = None
        self.nginx: Nginx | None = None
        self.ws_server: WSServer | None = None

    def cleanup(self) -> None:
        if self.ws_server:
            self.ws_server.stop()
        if self.nginx:
            self.nginx.stop()
        if self.big_work:
            shutil.rmtree(self.big_work, ignore_errors=True)
        if self.s.keep_work:
            log(f"kept {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def run(self) -> int:
        s = self.s
        wanted = wanted_clients(s)
        products = list(dict.fromkeys(ROWS[row].product_for(CLIENTS[c]) for row in s.rows for c in wanted[row]))
        if wanted.get("ws-echo"):
            products.append("bench-wsserver")  # the row's server
        binaries = Builder(s).build(products)
        clients = available_clients(wanted, binaries)
        request_rows = [request_row(r, s) for r in s.rows
                        if clients[r] and not ROWS[r].large and not ROWS[r].sse and not ROWS[r].ws]
        sse_clients = clients.get("sse-decode", []) if "sse-decode" in s.rows else []
        ws_clients = clients.get("ws-echo", []) if "ws-echo" in s.rows else []
        if ws_clients and "bench-wsserver" not in binaries:
            log("skipping ws-echo: no bench-wsserver binary (its server)")
            ws_clients = []
        large_rows = [r for r in s.rows if clients[r] and ROWS[r].large]
        names = {row.name for row in request_rows}

        docroot = self.work / "www"
        docroot.mkdir()
        write_small_json(docroot / "small.json", BODY_BYTES)
        sse_size = write_events(docroot / "events.sse", s.sse_events) if sse_clients else 0
        fixture = self._write_fixture() if large_rows else None
        tls_dir = self.work / "tls"
        cert, key = (make_certificate(tls_dir) if names & set(TLS_ROWS) or ws_clients
                     else (tls_dir / "cert.pem", tls_dir / "key.pem"))
        bundle = None
        if "https-new" in names:
            bundle = tls_dir / "bundle.pem"
            make_bundle(s.system_ca_bundle, cert, bundle)
        wide = self._wide_setup() if names & {"h1-10k", "h2-10k"} else None

        servers = Servers(
            tls=bool(names & {"https", "h2", "https-new"}), close="https-new" in names,
            wide_plain="h1-10k" in names, wide_tls="h2-10k" in names, big=bool(large_rows),
            worker_connections=wide.worker_connections if wide else 4096,
            rlimit_nofile=wide.nofile if wide else None, backlog=wide.backlog if wide else 511)
        paths = Paths(work=self.work, docroot=docroot, cert=cert, key=key, fixture=fixture,
                      body_dir=self.big_work / "nginx-body" if self.big_work else None, upload_sink=s.upload_sink)
        self.nginx = Nginx(s.nginx, servers, paths, BODY_BYTES, s.server_cpus)
        ports = self.nginx.start()
        endpoints = self._endpoints(ports, cert, bundle)
        big_log = AccessLog(paths.logs / "big.log")
        if {"upload-file", "multipart-file"} & set(large_rows):
            self._probe_upload_sink(ports["plain"], big_log)

        small = SmallGetRows(s, binaries, endpoints, self.nginx, self.work)
        for row in request_rows:
            small.run_row(row, clients[row.name])
        sse = None
        if sse_clients:
            sse = SSERows(s, binaries, f"http://127.0.0.1:{ports['plain']}/events.sse", self.work)
            sse.run_row(sse_clients)
        ws = None
        if ws_clients:
            self.ws_server = WSServer(binaries["bench-wsserver"], cert, key, self.work, s.ws_server_threads,
                                      s.server_cpus)
            self.ws_server.start()
            ws = WSRows(s, binaries, self.ws_server, cert, self.work)
            ws.run_row(ws_clients)
            ws_setup = WSSetup(threads=self.ws_server.threads, port=self.ws_server.port)
            self.ws_server.stop()
            self.ws_server = None
        large = None
        if large_rows:
            files = LargeFiles(f"http://127.0.0.1:{ports['plain']}", fixture, self.big_work / "out")
            large = LargeRows(s, binaries, files, self.nginx, big_log, self.work)
            large.note_gnu_time({c for r in large_rows for c in clients[r]})
            for row in large_rows:
                large.run_row(row, clients[row])

        facts = Facts(self.nginx.version, s.server_cpus, s.client_cpus)
        tables = [request_table(row, clients[row.name], small.records, s, facts, bundle, wide) for row in request_rows]
        if large:
            tables += [large_table(row, clients[row], large.records, large.failures, s, facts, large.write_calls) for row in large_rows]
        if sse:
            tables.append(sse_table(sse_clients, sse.records, s, facts, sse_size))
        if ws:
            tables += ws_tables(ws_clients, ws.records, s, facts, ws_setup)
        self._save(tables, small.records,
                   (large.records if large else []) + (sse.records if sse else []) + (ws.records if ws else []))
        return 0

    # ---- setting up

    def _write_fixture(self) -> Path:
        """The large rows' files live on a tmpfs: the fixture, the downloaded copies (one at a
        time, removed after each run) and nginx's request bodies."""
        s = self.s
        if not (s.big_dir.is_dir() and os.access(s.big_dir, os.W_OK)):
            raise BenchError(f"BIG_DIR={s.big_dir} is not a writable directory")
        fstype = subprocess.run(["stat", "-f", "-c", "%T", str(s.big_dir)], capture_output=True,
                                text=True).stdout.strip() or "unknown"
        if fstype != "tmpfs":
            log(f"note: BIG_DIR={s.big_dir} is {fstype}, not tmpfs: the disk is part of the figures")
        stat = os.statvfs(s.big_dir)
        avail = stat.f_bavail * stat.f_frsize
        need = 2 * s.big_bytes + (256 << 20)
        if avail < need:
            raise BenchError(
                f"BIG_DIR={s.big_dir} has {avail >> 20} MiB free, the large rows need {need >> 20} MiB (set BIG_DIR"
                " to a larger tmpfs, e.g. mount -t tmpfs -o size=4g tmpfs /mnt/bench)")
        self.big_work = Path(tempfile.mkdtemp(prefix="courier-bench.", dir=s.big_dir))
        (self.big_work / "out").mkdir()
        (self.big_work / "nginx-body").mkdir()
        self.big_work.chmod(0o755)
        fixture = self.big_work / "big.bin"
        log(f"writing the {s.big_bytes}-byte fixture to {fixture} ({fstype}, {avail >> 20} MiB free)")
        write_fixture(fixture, s.big_bytes)
        return fixture

    def _wide_setup(self) -> WideSetup:
        n = self.s.total_10k
        nofile = raise_open_files_limit(max(2 * n, 4096), n + 1024)
        setup = WideSetup(worker_connections=max(4096, min(nofile, 2 * n)), nofile=nofile, backlog=listen_backlog(n))
        log(f"10k rows: RLIMIT_NOFILE {nofile} (nginx and every client inherit it), nginx worker_connections"
            f" {setup.worker_connections}, listen backlog {setup.backlog}")
        return setup

    def _endpoints(self, ports: dict[str, int], cert: Path, bundle: Path | None) -> Endpoints:
        """The URL of each server (RequestRow.server names them), and the logs of the logged ones."""
        assert self.nginx is not None
        urls = {name: f"{'http' if name in ('plain', 'wide_plain') else 'https'}://127.0.0.1:{port}/small.json"
                for name, port in ports.items()}
        logs_dir = self.nginx.paths.logs
        log(f"nginx {self.nginx.version} serving {urls['plain']} ({BODY_BYTES} bytes) as pid {self.nginx.pid}")
        s = self.s
        if s.server_cpus or s.client_cpus:
            log(f"CPUs: nginx on {s.server_cpus or 'any'}, clients on {s.client_cpus or 'any'} (taskset -c)")
        logs: dict[str, AccessLog] = {}
        if "tls" in urls or "close" in urls or "wide_tls" in urls:
            tls_log = AccessLog(logs_dir / "tls.log")
            logs.update({name: tls_log for name in ("tls", "close", "wide_tls") if name in urls})
        if "tls" in urls:
            log(f"nginx serving {urls['tls']} too (TLS; h2 and http/1.1 through ALPN; certificate {cert})")
        if "close" in urls and bundle:
            log(f"nginx serving {urls['close']} too (TLS, HTTP/1.1, no keep-alive; {count_certificates(bundle)}"
                " certificates in the bundle)")
        backlog = self.nginx.servers.backlog
        if "wide_plain" in urls:
            logs["wide_plain"] = AccessLog(logs_dir / "plain.log")
            log(f"nginx serving {urls['wide_plain']} too (HTTP/1.1, logged; listen backlog {backlog})")
        if "wide_tls" in urls:
            log(f"nginx serving {urls['wide_tls']} too (TLS; h2 and http/1.1 through ALPN; logged; listen backlog"
                f" {backlog})")
        return Endpoints(urls=urls, cert=cert, bundle=bundle, logs=logs)

    def _probe_upload_sink(self, port: int, big_log: AccessLog) -> None:
        s = self.s
        mark = big_log.mark()
        try:
            ok, probe = probe_upload_sink(port, s.upload_sink, BODY_BYTES)
        except OSError as error:
            ok, probe = False, str(error)
        if not ok:
            raise BenchError(f"the upload sink ({s.upload_sink}) failed its probe: {probe}")
        time.sleep(0.2)
        if s.upload_sink == "file":
            lines = big_log.lines_since(mark)[:1]
            words = lines[0].split() if lines else []
            length = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
            if length < 4 << 20:
                raise BenchError(f"the upload sink's probe is not logged with its body length: '{' '.join(lines)}'")
            log(f"upload sink 'file': no answer before the last byte of a 4 MiB PUT, then 200; nginx logged {length}"
                f" request bytes; the next request on the connection was answered ({probe})")
        else:
            log("upload sink 'discard': nginx answers a 4 MiB PUT at once (204, before the body), reads the rest,"
                f" and answers the next request on the connection ({probe})")

    # ---- the report

    def _save(self, tables: list[str], small: list[RunRecord], large: list[RunRecord]) -> None:
        s = self.s
        s.results_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        report = s.results_dir / f"bench-{stamp}.md"
        raw = s.results_dir / f"bench-{stamp}.raw"
        text = "\n\n".join(tables) + "\n"
        report.write_text(text)
        raw_lines = [r.raw_line(with_row=r.row != "small") for r in small] + [r.raw_line() for r in large]
        raw.write_text("".join(line + "\n" for line in raw_lines))
        print()
        print(text, end="", flush=True)
        log(f"report saved to {s.relative(report)} (raw lines: {s.relative(raw)})")


def _terminate(signum, frame) -> None:
    sys.exit(143)


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    signal.signal(signal.SIGTERM, _terminate)
    try:
        settings = load_settings(os.environ, root)
    except BenchError as error:
        log(f"error: {error}")
        return 1
    bench = Bench(settings)
    try:
        return bench.run()
    except BenchError as error:
        log(f"error: {error}")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        bench.cleanup()
