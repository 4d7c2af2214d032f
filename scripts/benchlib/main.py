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
from .catalog import CLIENTS, H3_CURL, ROWS, TLS_ROWS, request_row
from .files import count_certificates, make_bundle, make_certificate, write_fixture, write_small_json
from .h3 import H3Endpoints, H3Rows, h3_table, skipped_table
from .h3server import H3Server, H3Tools, H3Unavailable
from .h3server import prepare as prepare_h3
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
    if not any(available.values()) and any(wanted.values()):
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
        self.h3_server: H3Server | None = None

    def cleanup(self) -> None:
        if self.ws_server:
            self.ws_server.stop()
        if self.h3_server:
            self.h3_server.stop()
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
        h3_tools, skipped = self._prepare_h3(wanted)
        products = list(dict.fromkeys(ROWS[row].product_for(CLIENTS[c]) for row in s.rows for c in wanted[row]))
        if wanted.get("ws-echo"):
            products.append("bench-wsserver")  # the row's server
        binaries = Builder(s).build(products)
        if h3_tools:
            binaries[H3_CURL] = str(h3_tools.curl)
            self._check_h3_loading(h3_tools, wanted, binaries)
        clients = available_clients(wanted, binaries)
        if not any(clients.values()):
            if not skipped:
                raise BenchError("no client could be built")
            self._save(skipped, [], [])  # the HTTP/3 rows alone, skipped: say why
            return 0
        h3_rows = [r for r in s.rows if ROWS[r].h3 and clients[r]]
        request_rows = [request_row(r, s) for r in s.rows
                        if clients[r] and not ROWS[r].large and not ROWS[r].sse and not ROWS[r].ws and not ROWS[r].h3]
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
        fixture = self._write_fixture() if large_rows or "download-h3" in h3_rows else None
        tls_dir = self.work / "tls"
        cert, key = (make_certificate(tls_dir) if names & set(TLS_ROWS) or ws_clients or h3_rows
                     else (tls_dir / "cert.pem", tls_dir / "key.pem"))
        bundle = None
        if "https-new" in names:
            bundle = tls_dir / "bundle.pem"
            make_bundle(s.system_ca_bundle, cert, bundle)
        wide = self._wide_setup() if names & {"h1-10k", "h2-10k"} else None

        servers = Servers(
            tls=bool(names & {"https", "h2", "https-new"}) or bool(h3_rows), close="https-new" in names,
            wide_plain="h1-10k" in names, wide_tls="h2-10k" in names, big=bool(large_rows),
            big_tls="download-h3" in h3_rows,
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
        calls = {}
        for row in request_rows:
            small.run_row(row, clients[row.name])
            if row.name == "small" and s.count_calls:
                calls[row.name] = small.count_calls(row, clients[row.name])
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

        h3 = None
        if h3_rows and h3_tools:
            h3, why = self._run_h3(h3_tools, h3_rows, clients, binaries, docroot, cert, key, fixture, ports, big_log)
            if h3 is None:
                skipped += [skipped_table(row, why) for row in h3_rows]

        facts = Facts(self.nginx.version, s.server_cpus, s.client_cpus)
        tables = [request_table(row, clients[row.name], small.records, s, facts, bundle, wide, calls.get(row.name))
                  for row in request_rows]
        if large:
            tables += [large_table(row, clients[row], large.records, large.failures, s, facts, large.write_calls) for row in large_rows]
        if sse:
            tables.append(sse_table(sse_clients, sse.records, s, facts, sse_size))
        if ws:
            tables += ws_tables(ws_clients, ws.records, s, facts, ws_setup)
        if h3 and h3_tools:
            tables += [h3_table(row, clients[row], h3.records, h3.failures, s, facts, h3_tools) for row in h3_rows]
        tables += skipped
        self._save(tables, small.records,
                   (large.records if large else []) + (sse.records if sse else []) + (ws.records if ws else [])
                   + (h3.records if h3 else []))
        return 0

    # ---- the HTTP/3 rows

    def _prepare_h3(self, wanted: dict[str, list[str]]) -> tuple[H3Tools | None, list[str]]:
        """The HTTP/3 libcurl and server when an HTTP/3 row is asked for; else (or when they
        cannot be had) None, the rows' clients taken away, and a table saying why."""
        rows = [r for r in self.s.rows if ROWS[r].h3 and wanted[r]]
        if not rows:
            return None, []
        try:
            tools = prepare_h3(self.s.root, self.work)
        except H3Unavailable as why:
            log(f"skipping {' and '.join(rows)}: {why}")
            for row in rows:
                wanted[row] = []
            return None, [skipped_table(row, str(why)) for row in rows]
        log(f"h3: {tools.description} in {tools.prefix}; gtlsserver {tools.server} ({tools.server_built})")
        return tools, []

    def _check_h3_loading(self, tools: H3Tools, wanted: dict[str, list[str]], binaries: dict[str, str]) -> None:
        """Every client of the HTTP/3 rows must load the HTTP/3 libcurl (its HTTP/2 runs too):
        ldd under the rows' LD_LIBRARY_PATH; a client that would not is left out."""
        for row in (r for r in self.s.rows if ROWS[r].h3):
            for client in list(wanted[row]):
                binary = binaries.get(ROWS[row].product_for(CLIENTS[client]))
                if binary and not tools.loads_it(binary):
                    log(f"skipping {client} in {row}: {binary} does not load {tools.lib}/libcurl.so.4 (ldd)")
                    wanted[row].remove(client)

    def _run_h3(self, tools: H3Tools, rows: list[str], clients: dict[str, list[str]], binaries: dict[str, str],
                docroot: Path, cert: Path, key: Path, fixture: Path | None, ports: dict[str, int],
                big_log: AccessLog) -> tuple[H3Rows | None, str]:
        """gtlsserver started on the rows' files (small.json; big.bin, a link to the fixture),
        the rows run, the server stopped. (None, why) when the server does not start."""
        s = self.s
        h3_docroot = self.work / "h3www"
        h3_docroot.mkdir()
        shutil.copy(docroot / "small.json", h3_docroot / "small.json")
        if fixture:
            (h3_docroot / "big.bin").symlink_to(fixture)
        self.h3_server = H3Server(tools, h3_docroot, cert, key, self.work, s.server_cpus)
        try:
            self.h3_server.start("small.json", BODY_BYTES)
        except H3Unavailable as why:
            log(f"skipping {' and '.join(rows)}: {why}")
            return None, str(why)
        assert self.nginx is not None
        log(f"h3: gtlsserver serving {self.h3_server.url('')} over HTTP/3 (UDP) as pid {self.h3_server.pid}; HTTP/2:"
            f" nginx's https://127.0.0.1:{ports['tls']}/")
        endpoints = H3Endpoints(
            h3=self.h3_server, h2_base=f"https://127.0.0.1:{ports['tls']}", cert=cert,
            tls_log=AccessLog(self.nginx.paths.logs / "tls.log"), big_log=big_log, fixture=fixture,
            out_dir=self.big_work / "out" if self.big_work else None)
        h3 = H3Rows(s, binaries, tools, endpoints, self.nginx, self.work)
        for row in rows:
            if row == "h3":
                h3.run_small(clients[row])
            else:
                h3.run_download(clients[row])
        self.h3_server.stop()
        self.h3_server = None
        return h3, ""

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
