"""The HTTP/3 rows (h3, download-h3): each client over HTTP/3 (gtlsserver) and over HTTP/2
(nginx), every process with the HTTP/3 libcurl loaded; checked per response and per run."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from .files import files_equal
from .h3server import SERVER_STREAMS, H3Server, H3Tools
from .large import GNU_TIME, LO_RX, gnu_time_works, loopback_bytes
from .process import Finished, first_error_line, run_measured, tail, with_timeout
from .report import Facts, _size_text
from .results import RunRecord, find_result
from .server import AccessLog, Nginx, cpu_seconds
from .settings import BODY_BYTES, Settings, log, log_details
from .small_gets import check_requests_log

VERSIONS = ("3", "2")  # each round: every client over HTTP/3, then every client over HTTP/2
SNMP = Path("/proc/net/snmp")


def label(client: str, version: str) -> str:
    """A run's name in the raw lines and the table: curl/h3, courier/h2, ..."""
    return f"{client}/h{version}"


def udp_receive_drops() -> int:
    """Datagrams the kernel dropped for want of receive buffer (Udp RcvbufErrors, machine-wide):
    each is a lost QUIC packet, which the sender must detect and resend, and its congestion
    controller takes as a loss."""
    try:
        lines = [line.split() for line in SNMP.read_text().splitlines() if line.startswith("Udp:")]
        return int(lines[1][lines[0].index("RcvbufErrors")])
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(frozen=True)
class H3Endpoints:
    h3: H3Server  # its url(path)
    h2_base: str  # https://127.0.0.1:PORT (nginx's TLS server: h2 through ALPN)
    cert: Path
    tls_log: AccessLog  # the h2 small GETs' log
    big_log: AccessLog | None  # the h2 downloads' log
    fixture: Path | None
    out_dir: Path | None  # the downloaded files (tmpfs), one at a time


class H3Rows:
    """Runs the HTTP/3 rows; `records` holds every measured run, `failures` the first message
    of each (row, client/version) that failed."""

    def __init__(self, settings: Settings, binaries: dict[str, str], tools: H3Tools, endpoints: H3Endpoints,
                 nginx: Nginx, work: Path):
        self.s = settings
        self.binaries = binaries
        self.tools = tools
        self.ep = endpoints
        self.nginx = nginx
        self.work = work
        self.records: list[RunRecord] = []
        self.failures: dict[tuple[str, str], str] = {}
        self.gnu_time = gnu_time_works()
        self._configs: dict[tuple[int, str], Path] = {}

    # ---- shared

    def _url(self, version: str, path: str) -> str:
        return self.ep.h3.url(path) if version == "3" else f"{self.ep.h2_base}/{path}"

    def _server_ticks(self, version: str) -> int:
        return self.ep.h3.ticks() if version == "3" else self.nginx.worker_ticks()

    def _idle(self) -> None:
        self.ep.h3.wait_until_idle()
        self.nginx.wait_until_idle()

    def _curl_argv(self, version: str, args: list[str], rss: Path) -> list[str]:
        protocol = "--http3-only" if version == "3" else "--http2"
        argv = with_timeout(self.s.run_timeout, [str(self.tools.curl), "-sS", "--cacert", str(self.ep.cert), protocol,
                                                 *args], self.s.client_cpus)
        return [GNU_TIME, "-f", "%M", "-o", str(rss), *argv] if self.gnu_time else argv

    def _peak(self, rss: Path) -> str:
        last = tail(rss, 1) if self.gnu_time else []
        return last[0].strip() if last and last[0].strip().isdigit() else "0"

    def _courier_argv(self, args: list[str], version: str) -> list[str]:
        return with_timeout(self.s.run_timeout, [self.binaries["bench-courier"], *args, "--ca-file", str(self.ep.cert),
                                                 "--http-version", version], self.s.client_cpus)

    def _fail(self, row: str, name: str, message: str) -> None:
        log(message)
        self.failures.setdefault((row, name), message)

    # ---- h3: small GETs

    def _urls(self, total: int, url: str) -> Path:
        """The curl tool's config of `total` transfers of `url`, each to the void."""
        key = (total, url)
        if key not in self._configs:
            path = self.work / f"curl-urls-{len(self._configs)}.conf"
            path.write_text(f'url = "{url}"\nout-null\n' * total)
            self._configs[key] = path
        return self._configs[key]

    def _curl_small(self, version: str, total: int, concurrency: int, out: Path, err: Path) -> tuple[Finished, str]:
        """curl --parallel over the config: one -w line per transfer (status, size, version,
        time_total, the time it ended), each checked; its seconds: the first transfer's start
        (its end - its time_total) to the last one's end. Returns the run and a problem."""
        rss = out.with_name(out.name + ".rss")
        w = out.with_name(out.name + ".w")
        args = ["--parallel", "--parallel-max", str(concurrency), "-w",
                "%{http_code} %{size_download} %{http_version} %{time_total} %time{%s.%f}\n",
                "-K", str(self._urls(total, self._url(version, "small.json")))]
        finished = run_measured(self._curl_argv(version, args, rss), stdout=w, stderr=err, env=self.tools.env())
        out.write_text("")
        if finished.status != 0:
            return finished, ""
        lines = w.read_text(errors="replace").splitlines()
        starts, ends, bad, first_bad = [], [], 0, ""
        for line in lines:
            words = line.split()
            try:
                code, size, got, seconds, end = words[0], words[1], words[2], float(words[3]), float(words[4])
            except (IndexError, ValueError):
                code, size, got, seconds, end = "?", "?", "?", 0.0, 0.0
            if (code, size, got) != ("200", str(BODY_BYTES), version):
                bad += 1
                first_bad = first_bad or line
            starts.append(end - seconds)
            ends.append(end)
        if len(lines) != total:
            return finished, f"curl reported {len(lines)} transfers, expected {total}"
        if bad:
            return finished, (f"{bad} responses not 200 with {BODY_BYTES} bytes over HTTP/{version}, the first:"
                              f" {first_bad}")
        seconds = max(ends) - min(starts)
        out.write_text(f"RESULT client=curl seconds={seconds:.4f} requests={total} maxrss_kb={self._peak(rss)}"
                       f" http={version}\n")
        return finished, ""

    def small_once(self, client: str, version: str, total: int, concurrency: int) -> tuple[dict[str, str] | None, str]:
        """One checked run of small GETs: (fields, "") or (None, why)."""
        self._idle()
        if version == "2":
            self.ep.tls_log.settle()
        mark = self.ep.tls_log.mark()
        ticks, drops = self._server_ticks(version), udp_receive_drops()
        out, err = self.work / "h3.out", self.work / "h3.out.err"
        problem = ""
        if client == "curl":
            finished, problem = self._curl_small(version, total, concurrency, out, err)
        else:
            argv = self._courier_argv(["--url", self._url(version, "small.json"), "--total", str(total),
                                       "--concurrency", str(concurrency)], version)
            finished = run_measured(argv, stdout=out, stderr=err, env=self.tools.env())
        server_cpu = cpu_seconds(self._server_ticks(version) - ticks)
        drops = udp_receive_drops() - drops
        result = find_result(out.read_text(errors="replace")) if out.exists() else None
        if finished.status != 0 or problem or result is None:
            status = "0, no RESULT line" if finished.status == 0 else str(finished.status)
            return None, problem or f"exit {status}: {first_error_line(err)}"
        if result.get("requests") != str(total) or result.get("http") != version:
            return None, (f"RESULT requests={result.get('requests')} http={result.get('http')}, expected {total}"
                          f" and {version}")
        fields = {**result, "cpu": f"{finished.cpu:.3f}", "srv_cpu": f"{server_cpu:.2f}"}
        if version == "2":
            ok, summary, why = check_requests_log(self.ep.tls_log, mark, total, "HTTP/2.0")
            if not ok:
                return None, f"nginx: {why}"
            fields.update(dict(word.split("=", 1) for word in summary.split()))
        else:
            fields["udp_drops"] = str(drops)
        return fields, ""

    def run_small(self, clients: list[str]) -> None:
        s, row = self.s, "h3"
        total, concurrency = s.total, s.h2_concurrency
        if s.warmup_total > 0:
            log(f"h3: warm-up: {s.warmup_total} requests per client and version")
            for version in VERSIONS:
                for client in clients:
                    fields, why = self.small_once(client, version, s.warmup_total, concurrency)
                    if fields is None:
                        log(f"h3: warm-up of {label(client, version)} failed: {why}")
        names = [label(c, v) for v in VERSIONS for c in clients]
        log(f"h3: {s.runs} runs of {' '.join(names)}: {total} GETs, concurrency {concurrency}")
        for run in range(1, s.runs + 1):
            for version in VERSIONS:
                for client in clients:
                    name = label(client, version)
                    fields, why = self.small_once(client, version, total, concurrency)
                    text = f"h3: run {run}/{s.runs} {name:<12}"
                    if fields is None:
                        self._fail(row, name, f"{text} FAILED: {why}")
                        log_details(tail(self.work / "h3.out.err", 3))
                        self.records.append(RunRecord(row, run, name, error=why))
                        continue
                    extra = f", {fields['udp_drops']} UDP drops" if "udp_drops" in fields else ""
                    log(f"{text} {fields['seconds']} s (cpu {fields['cpu']} s, server {fields['srv_cpu']} s{extra})")
                    self.records.append(RunRecord(row, run, name, fields))

    # ---- download-h3: one large GET into a file

    def download_once(self, client: str, version: str) -> tuple[dict[str, str] | None, str]:
        s, out_dir = self.s, self.ep.out_dir
        assert out_dir is not None and self.ep.fixture is not None
        for leftover in out_dir.iterdir():
            leftover.unlink()
        self._idle()
        big_log = self.ep.big_log
        mark = big_log.mark() if big_log else 0
        ticks, drops, lo_before = self._server_ticks(version), udp_receive_drops(), loopback_bytes()
        out, err = self.work / "h3big.out", self.work / "h3big.out.err"
        file = out_dir / f"{client}.bin"
        url = self._url(version, "big.bin")
        if client == "curl":
            rss = out.with_name(out.name + ".rss")
            w = out.with_name(out.name + ".w")
            args = ["-o", str(file), "-w", "%{http_code} %{size_download} %{http_version} %{time_total}\n", url]
            finished = run_measured(self._curl_argv(version, args, rss), stdout=w, stderr=err, env=self.tools.env())
            out.write_text("")
            if finished.status == 0:
                code, size, got, seconds = (w.read_text().split() + ["", "", "", ""])[:4]
                if (code, size, got) != ("200", str(s.big_bytes), version):
                    return None, (f"curl: status {code}, {size} bytes, HTTP/{got} (expected 200, {s.big_bytes},"
                                  f" {version})")
                out.write_text(f"RESULT client=curl seconds={seconds} requests=1 maxrss_kb={self._peak(rss)}"
                               f" bytes={size} http={got}\n")
        else:
            argv = self._courier_argv(["--mode", "download-file", "--url", url, "--output", str(file),
                                       "--expected-bytes", str(s.big_bytes)], version)
            finished = run_measured(argv, stdout=out, stderr=err, env=self.tools.env())
        server_cpu = cpu_seconds(self._server_ticks(version) - ticks)
        drops = udp_receive_drops() - drops
        moved = loopback_bytes() - lo_before
        result = find_result(out.read_text(errors="replace")) if out.exists() else None
        if finished.status != 0 or result is None:
            status = "0, no RESULT line" if finished.status == 0 else str(finished.status)
            return None, f"exit {status}: {first_error_line(err, last=True)}"
        if result.get("http") != version:
            return None, f"RESULT http={result.get('http')}, expected {version}"
        fields = {**result, "cpu": f"{finished.cpu:.3f}", "srv_cpu": f"{server_cpu:.2f}", "lo_bytes": str(moved)}
        if version == "2" and big_log:
            lines = big_log.wait_for(mark, 1, tries=50, interval=0.1)
            status, length, sent, seconds = ((lines[0].split() if lines else []) + ["0", "0", "0", "0"])[:4]
            if status != "200" or sent != str(s.big_bytes):
                return None, f"nginx logged '{lines[0] if lines else 'nothing'}', expected 200 with {s.big_bytes} bytes"
            fields["srv_seconds"] = seconds
        else:
            fields["udp_drops"] = str(drops)
        if LO_RX.exists() and moved < s.big_bytes:
            return None, f"only {moved} bytes went through the loopback interface, expected {s.big_bytes} or more"
        size = file.stat().st_size if file.exists() else -1
        if size != s.big_bytes:
            return None, f"{file} has {size if size >= 0 else 'no'} bytes, expected {s.big_bytes}"
        if s.verify and not files_equal(self.ep.fixture, file):
            return None, f"{file} differs from the fixture"
        file.unlink()
        return fields, ""

    def run_download(self, clients: list[str]) -> None:
        s, row = self.s, "download-h3"
        if s.big_warmup > 0:
            log(f"download-h3: warm-up, {s.big_warmup} run(s) per client and version")
            for _ in range(s.big_warmup):
                for version in VERSIONS:
                    for client in clients:
                        fields, why = self.download_once(client, version)
                        if fields is None:
                            log(f"download-h3: warm-up of {label(client, version)} failed: {why}")
        names = [label(c, v) for v in VERSIONS for c in clients]
        log(f"download-h3: {s.big_runs} runs of {' '.join(names)}, {s.big_bytes} bytes each")
        for run in range(1, s.big_runs + 1):
            for version in VERSIONS:
                for client in clients:
                    name = label(client, version)
                    fields, why = self.download_once(client, version)
                    text = f"download-h3 run {run}/{s.big_runs} {name:<12}"
                    if fields is None:
                        self._fail(row, name, f"{text} FAILED: {why}")
                        log_details(tail(self.work / "h3big.out.err", 3))
                        self.records.append(RunRecord(row, run, name, error=why))
                        time.sleep(1)
                        continue
                    extra = f", {fields['udp_drops']} UDP drops" if "udp_drops" in fields else ""
                    log(f"{text} {fields['seconds']} s (cpu {fields['cpu']} s, server {fields['srv_cpu']} s, peak RSS"
                        f" {int(fields['maxrss_kb']) // 1024} MiB{extra})")
                    self.records.append(RunRecord(row, run, name, fields))


# ---------------------------------------------------------------- the tables


def _median(records: list[RunRecord], key: str) -> float:
    return statistics.median(r.number(key) for r in records)


def skipped_table(row: str, why: str) -> str:
    return f"## {_title(row, None)}\n\nSkipped: {why}."


def _title(row: str, s: Settings | None) -> str:
    if row == "h3":
        n = f"{s.total} x " if s else ""
        c = f", concurrency {s.h2_concurrency}" if s else ""
        return f"HTTP/3 vs HTTP/2 GETs: {n}{BODY_BYTES}-byte JSON over loopback{c}, multiplexed"
    size = f"{_size_text(s.big_bytes)} " if s else ""
    return f"HTTP/3 vs HTTP/2 download to a file: {size}over loopback" + (f" into {s.big_dir}" if s else "")


def h3_table(row: str, clients: list[str], records: list[RunRecord], failures: dict[tuple[str, str], str],
             s: Settings, facts: Facts, tools: H3Tools) -> str:
    """One table per row: every client over HTTP/3 and over HTTP/2, with ratios to the curl
    tool over the same version and to the same client over HTTP/2."""
    ok: dict[str, list[RunRecord]] = {}
    failed: dict[str, int] = {}
    for r in records:
        if r.row == row:
            if r.failed:
                failed[r.name] = failed.get(r.name, 0) + 1
            else:
                ok.setdefault(r.name, []).append(r)
    small = row == "h3"
    runs = (f"{s.runs} runs each after a warm-up of {s.warmup_total} requests" if small
            else f"{s.big_runs} runs each after {s.big_warmup} warm-up")
    pinned = ""
    if facts.server_cpus or facts.client_cpus:
        pinned = f" (taskset: servers on CPU {facts.server_cpus or 'any'}, clients on CPU {facts.client_cpus or 'any'})"
    lines = [f"## {_title(row, s)}", "",
             f"{facts.date}, {facts.cores} cores{pinned}, {tools.description} (every client, HTTP/2 runs too:"
             f" LD_LIBRARY_PATH={tools.lib}), {facts.swift}; {runs}, interleaved (curl and courier over HTTP/3,"
             f" then over HTTP/2). HTTP/3: ngtcp2's gtlsserver ({tools.server_name}, one thread, -q,"
             f" --max-streams-bidi={SERVER_STREAMS}); HTTP/2: nginx {facts.nginx_version} (1 worker, TLS with"
             f" {facts.openssl}, ALPN h2). The bench's self-signed ECDSA P-256 certificate on both, trusted by every"
             " client (curl: --cacert; courier: --ca-file).", ""]
    rate = "requests/s" if small else "MiB/s"
    lines.append(f"| client | median s | min s | max s | {rate} | x curl (same version) | x own HTTP/2 | CPU s |"
                 " server CPU s | peak RSS MiB | runs |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    medians = {name: _median(rs, "seconds") for name, rs in ok.items()}
    for version in VERSIONS:
        for client in clients:
            name = label(client, version)
            samples, bad = ok.get(name, []), failed.get(name, 0)
            shown = f"{name} *" if client == "curl" else name
            if not samples:
                lines.append(f"| {shown} | failed | | | | | | | | | 0/{bad} |")
                continue
            secs = [r.number("seconds") for r in samples]
            med = medians[name]
            amount = s.total / med if small else s.big_bytes / 2**20 / med
            ref = medians.get(label("curl", version))
            own2 = medians.get(label(client, "2"))
            ratio = f"{med / ref:.2f}" if ref else "n/a"
            versus = f"{med / own2:.2f}" if version != "2" and own2 else ""
            rss = max(r.number("maxrss_kb") for r in samples) / 1024
            rss_text = f"{rss:.1f}" if rss else "n/a"
            lines.append(f"| {shown} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} | {amount:,.0f} | {ratio} |"
                         f" {versus} | {_median(samples, 'cpu'):.2f} | {_median(samples, 'srv_cpu'):.2f} |"
                         f" {rss_text} | {len(samples)}/{len(samples) + bad} |")
    lines += ["", "\\* reference of its HTTP version (x curl). x own HTTP/2: the client's HTTP/3 median over its HTTP/2"
              " median."]
    if small:
        lines += [
            "curl: the curl tool of the same build, `curl -sS --cacert CERT --http3-only|--http2 --parallel"
            f" --parallel-max {s.h2_concurrency} -w '...' -K FILE` (FILE: `url = URL` and `out-null` per transfer,"
            " TOTAL times), its seconds from the first transfer's start (its end minus its time_total) to the last"
            " one's end, from -w's %{time_total} and %time; courier: bench-courier --http-version 3|2 --ca-file CERT"
            " (configuration.httpVersion .http3 or .http2OverTLS, the default 6 connections per host).",
            f"Every response checked by its client: status 200, {BODY_BYTES} bytes and the HTTP version asked for"
            " (curl: one -w line per transfer, TOTAL of them; courier: metrics.httpVersion); every HTTP/2 run in"
            " nginx's log too (TOTAL requests, all HTTP/2.0 200 with the whole body). gtlsserver keeps no log.",
        ]
        per = "; ".join(f"{label(c, '2')} {_median(ok[label(c, '2')], 'srv_connections'):.0f}"
                        for c in clients if ok.get(label(c, "2")))
        if per:
            lines.append(f"HTTP/2 connections nginx accepted per run (median): {per}.")
    else:
        lines += [
            "curl: `curl -sS --cacert CERT --http3-only|--http2 -o FILE URL` (seconds: its %{time_total}); courier:"
            " bench-courier --mode download-file (downloadTask(_:to:options: [.replaceExisting])) with --http-version"
            " 3|2 --ca-file CERT, each response's metrics.httpVersion checked. Every file's size checked"
            + (", and its bytes compared with the fixture (not timed)" if s.verify else "") + "; every run moved at"
            " least the file's size through the loopback interface; every HTTP/2 run checked in nginx's log (200,"
            " $body_bytes_sent). nginx serves the fixture from the tmpfs (TLS: no sendfile); gtlsserver mmaps it.",
        ]
    drops = "; ".join(f"{label(c, '3')} {_median(ok[label(c, '3')], 'udp_drops'):.0f}"
                      for c in clients if ok.get(label(c, "3")))
    if drops:
        lines.append("UDP datagrams the kernel dropped for want of receive buffer during an HTTP/3 run (Udp"
                     f" RcvbufErrors, median): {drops}.")
    lines.append("CPU s: user + system time of the whole client process (median); server CPU s: gtlsserver's or"
                 " nginx's worker's during the run (median); peak RSS: largest ru_maxrss (curl: GNU time's %M).")
    if failed:
        lines += ["", "Failed runs: " + ", ".join(f"{n} {k}" for n, k in failed.items())
                  + " (not in the figures); the first:", ""]
        lines += [f"    {failures[(row, name)]}" for name in failed if (row, name) in failures]
    return "\n".join(lines)
