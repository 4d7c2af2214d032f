"""The Markdown tables: one per row, with the notes under each."""

from __future__ import annotations

import ctypes
import functools
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from .catalog import ROWS, RequestRow
from .calls import HIGH, LOW, describe
from .files import count_certificates
from .process import run_text
from .results import RunRecord
from .settings import BODY_BYTES, Settings


class Facts:
    """The machine and the tools, for the line under each table's title."""

    def __init__(self, nginx_version: str, server_cpus: str = "", client_cpus: str = ""):
        self.nginx_version = nginx_version
        self.server_cpus = server_cpus
        self.client_cpus = client_cpus
        self.date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    @functools.cached_property
    def cores(self) -> int:
        return len(os.sched_getaffinity(0))

    @functools.cached_property
    def libcurl(self) -> str:
        """The libcurl the clients load (LD_LIBRARY_PATH counts), as its curl_version() names it."""
        try:
            library = ctypes.CDLL("libcurl.so.4")
            library.curl_version.restype = ctypes.c_char_p
            return library.curl_version().decode().split()[0].replace("/", " ")
        except (OSError, AttributeError):
            return run_text(["curl-config", "--version"]) or "libcurl"

    @functools.cached_property
    def swift(self) -> str:
        first = run_text([os.environ.get("SWIFT") or "swift", "--version"]).splitlines()[:1]
        return first[0].split(" (")[0] if first else ""

    @functools.cached_property
    def openssl(self) -> str:
        return " ".join(run_text(["openssl", "version"]).split()[:2])

    def machine(self) -> str:
        pinned = ""
        if self.server_cpus or self.client_cpus:
            pinned = f" (taskset: nginx on CPU {self.server_cpus or 'any'}, clients on CPU {self.client_cpus or 'any'})"
        return (f"{self.date}, {self.cores} cores{pinned}, {self.libcurl}, nginx {self.nginx_version} (1 worker),"
                f" {self.swift};")


@dataclass(frozen=True)
class WideSetup:
    """How the 10k rows were served (for their notes)."""

    worker_connections: int
    nofile: int
    backlog: int


def _by_client(records: list[RunRecord], row: str) -> tuple[dict[str, list[RunRecord]], dict[str, list[RunRecord]]]:
    """The row's successful runs and failed runs, by client (in the order they came)."""
    ok: dict[str, list[RunRecord]] = {}
    failed: dict[str, list[RunRecord]] = {}
    for record in records:
        if record.row == row:
            (failed if record.failed else ok).setdefault(record.name, []).append(record)
    return ok, failed


def _median(records: list[RunRecord], key: str) -> float:
    return statistics.median(r.number(key) for r in records)


def _size_text(n: int) -> str:
    if n % 2**20 == 0 and n >= 2**30:
        return f"{n / 2**30:g} GiB"
    return f"{n / 2**20:g} MiB" if n % 2**20 == 0 else f"{n} bytes"


# ---------------------------------------------------------------- rows of small GETs


def _request_title(row: RequestRow) -> str:
    n = row.total
    return {
        "small": f"Small GETs: {n} x {BODY_BYTES}-byte JSON, concurrency {row.concurrency}, keep-alive",
        "openapi": f"Generated OpenAPI client: {n} x getSmall(), a {BODY_BYTES}-byte JSON body decoded, concurrency"
                   f" {row.concurrency}, keep-alive",
        "https": f"HTTPS GETs, HTTP/1.1: {n} x {BODY_BYTES}-byte JSON over TLS, concurrency {row.concurrency},"
                 " keep-alive",
        "h2": f"HTTP/2 GETs: {n} x {BODY_BYTES}-byte JSON over TLS, concurrency {row.concurrency}, multiplexed",
        "https-new": f"New HTTPS connections: {n} x {BODY_BYTES}-byte JSON over TLS, HTTP/1.1, concurrency"
                     f" {row.concurrency}, no keep-alive, a CA bundle of the system's size",
        "h1-10k": f"{n:,} GETs at once, HTTP/1.1: {n} x {BODY_BYTES}-byte JSON, concurrency {n}, keep-alive",
        "h2-10k": f"{n:,} GETs at once, HTTP/2: {n} x {BODY_BYTES}-byte JSON over TLS, concurrency {n},"
                  " multiplexed",
    }[row.name]


def _request_setup(row: RequestRow, s: Settings, facts: Facts, bundle: Path | None, wide: WideSetup | None) -> str:
    """What the row's server and clients do (after the machine line)."""
    text = ""
    if row.name == "openapi":
        text = (" The client swift-openapi-generator made from Tests/CourierTests/OpenAPI/openapi.yaml"
                " (Benchmarks/Sources/bench-openapi): each call `try await client.getSmall().ok.body.json`, the"
                " body decoded into Components.Schemas.Small and compared with the file's contents; over"
                " CourierClientTransport (openapi-courier: an HTTPSessionManager as courier's in the small row),"
                " AsyncHTTPClientTransport (openapi-ahc: an HTTPClient as ahc's) and URLSessionTransport"
                " (openapi-urlsession: a URLSession as urlsession's). c is multi_get, as in the small row: status"
                " and body length only, no decoding.")
    elif row.name == "https-new":
        count = count_certificates(bundle) if bundle else 0
        text = (f" TLS: nginx with {facts.openssl}, keepalive_timeout 0, no session cache or tickets (a full"
                f" handshake per request); every client trusts {s.system_ca_bundle} with the bench certificate"
                f" appended ({count} certificates; c and c-nocapath: CAINFO, c-nocapath with CURLOPT_CAPATH NULL;"
                " courier: tls.certificateAuthorityBundle; ahc: trustRoots).")
    elif row.trust:
        text = (f" TLS: nginx with {facts.openssl}, a self-signed ECDSA P-256 certificate that every client trusts"
                " (c: CAINFO; courier: tls.certificateAuthorityFile; ahc: trustRoots).")
    if row.wide and wide:
        n = row.total
        text += (f" nginx: worker_connections {wide.worker_connections}, worker_rlimit_nofile {wide.nofile},"
                 f" listen backlog {wide.backlog}; RLIMIT_NOFILE {wide.nofile} for every client.")
        if row.name == "h1-10k":
            text += (f" c: multi_get, CONCURRENCY {n} ({n} easy handles, up to {n} connections); courier:"
                     f" --concurrency {n}, so maximumConnectionsPerHost = {n} (its one non-default setting); ahc:"
                     f" .http1Only with a soft limit of {n} connections per host (as in the small row).")
        else:
            text += (f" c: multi_get, CONCURRENCY {n}, HTTP_VERSION=2 (CURLPIPE_MULTIPLEX, PIPEWAIT); courier:"
                     " default settings (6 connections per host, maximumStreamsPerConnection 1000); ahc: the"
                     " default configuration. nginx allows 128 streams on a connection"
                     " (http2_max_concurrent_streams, its default): the other requests wait in the client.")
    return text


def request_table(row: RequestRow, clients: list[str], records: list[RunRecord], s: Settings, facts: Facts,
                  bundle: Path | None = None, wide: WideSetup | None = None,
                  calls: tuple[dict[str, dict[str, float]], str] | None = None) -> str:
    """The table of a row of small GETs, with its notes."""
    ok, failed = _by_client(records, row.name)
    lines = [f"## {_request_title(row)}", "",
             f"{facts.machine()} {s.runs} runs each, interleaved; C loop: {s.c_loop}."
             f"{_request_setup(row, s, facts, bundle, wide)}", ""]

    reference = next((name for name in row.reference_candidates if ok.get(name)), None)
    ref = _median(ok[reference], "seconds") if reference else None
    extra_head, extra_rule = "", ""
    if row.wide:
        extra_head, extra_rule = " 1-request RSS MiB | KiB per request in flight |", " ---: | ---: |"
    lines.append(f"| client | median s | min s | max s | requests/s | x C | CPU s | peak RSS MiB |{extra_head} runs |")
    lines.append(f"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |{extra_rule} ---: |")
    for name in clients:
        samples, bad = ok.get(name, []), len(failed.get(name, []))
        if not samples:
            blanks = " | |" if row.wide else ""
            lines.append(f"| {name} | failed | | | | | | |{blanks} 0/{bad} |")
            continue
        secs = [r.number("seconds") for r in samples]
        med = statistics.median(secs)
        reqs = statistics.median(r.number("requests") for r in samples)
        rss = max(r.number("maxrss_kb") for r in samples) / 1024
        cpu = _median(samples, "cpu")
        ratio = f"{med / ref:.2f}" if ref else "n/a"
        extra = ""
        if row.wide:
            paired = [r for r in samples if "base_maxrss_kb" in (r.fields or {})]
            if paired:
                base = _median(paired, "base_maxrss_kb") / 1024
                extra = f" {base:.1f} | {_median(paired, 'kib_per_request'):.1f} |"
            else:
                extra = " n/a | n/a |"
        lines.append(f"| {name} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} | {reqs / med:,.0f} | {ratio}"
                     f" | {cpu:.2f} | {rss:.1f} |{extra} {len(samples)}/{len(samples) + bad} |")

    decode = [f"{name} / {name[:-7]}: {_median(ok[name], 'seconds') / _median(ok[name[:-7]], 'seconds'):.2f}x"
              for name in clients if name.endswith("-decode") and ok.get(name) and ok.get(name[:-7])]
    if decode:
        lines += ["", "Decoding cost (median time, decoded / undecoded): " + "; ".join(decode) + "."]
    lines += ["",
              "Seconds are wall time from the first request to the last response, measured in the client;",
              "CPU s is the median user + system time of the whole client process; peak RSS is the largest ru_maxrss."]
    if reference and reference != "c":
        lines.append(f"x C is the ratio to {reference}.")
    if row.log_protocol and ok:
        lines += _server_notes(row, clients, ok)
    if calls:
        counts, why = calls
        if counts:
            lines += ["", f"Calls per request (perf uprobes, not timed: a run of {HIGH:,} GETs minus one of {LOW:,},"
                      f" divided by {HIGH - LOW:,}): {describe(counts)}."]
        elif why:
            lines += ["", f"Calls per request not counted: {why}."]
    if row.wide:
        lines.append(f"KiB per request in flight: (the run's peak RSS - the peak RSS of the same client's run of"
                     f" 1 request at concurrency 1, just before it) / {row.total}, the median over runs; 1-request"
                     " RSS MiB is that run's peak RSS (median).")
    if failed:
        lines += ["", "Failed runs: " + ", ".join(f"{n} {len(rs)}" for n, rs in failed.items())
                  + " (not in the figures); the first of each:", ""]
        lines += [f"    {name} run {rs[0].run}: {rs[0].error}" for name, rs in failed.items()]
    return "\n".join(lines)


def _server_notes(row: RequestRow, clients: list[str], ok: dict[str, list[RunRecord]]) -> list[str]:
    """What was checked in nginx's log, and the connections and nginx CPU time per run."""
    runs = [r for rs in ok.values() for r in rs]
    protocol = row.log_protocol
    if row.http_version:
        version = row.http_version
        checked = all((r.fields or {}).get("http") == version for r in runs)
        tls = sorted({v for r in runs for v in (r.fields or {}).get("srv_tls", "").split(",") if v})
        over = ", ".join(tls) or "TLS"
        client_checks = (f"status 200, the body's length and HTTP/{version}"
                         + ("" if checked else " (NOT reported by every run: see the raw lines)"))
    else:
        over = "plain HTTP"
        client_checks = "status 200 and the body's length"
    per = "; ".join(f"{name} {_median(ok[name], 'srv_connections'):.0f} / {_median(ok[name], 'srv_cpu'):.2f} s"
                    for name in clients if ok.get(name))
    return [f"Every response was checked by its client: {client_checks}; every run in nginx's log: {row.total}"
            f" requests, all {protocol} 200 with the whole body, over {over}.",
            f"Per run (median), connections nginx accepted / its worker's CPU time: {per}."]


# ---------------------------------------------------------------- large rows


def _large_text(row: str, s: Settings) -> tuple[str, str]:
    """The table's title and what the clients and nginx do."""
    size = _size_text(s.big_bytes)
    if row == "download-file":
        title = f"Download to a file: {size} from nginx into {s.big_dir}"
        what = ("curl: `curl -sS -o FILE URL`; courier: `downloadTask(_:to:options: [.replaceExisting])`. Every"
                " file's size checked" + (", and its bytes compared with the fixture (not timed)" if s.verify else "")
                + ".")
    elif row == "stream-discard":
        title = f"Streamed and discarded: a {size} body"
        buffer = str(s.stream_buffer) if s.stream_buffer else "16384 (libcurl's default)"
        what = (f"c: Benchmarks/CMulti/stream_get.c, one transfer on the multi interface, CURLOPT_BUFFERSIZE {buffer};"
                " courier: `bytes(.get, _)`; ahc: `execute` and `response.body` iterated. Each discards the chunks"
                " and checks the total.")
    elif row == "upload-file":
        title = f"Upload from a file: {size} PUT to nginx"
        what = "curl: `curl -sS -T FILE URL`; courier: `uploadTask(.put, _, fromFile:serializer:)`."
    else:
        title = f"Multipart upload: a {size} file as the one part of a multipart/form-data POST"
        what = "curl: `curl -sS -F file=@FILE URL`; courier: `POST(_:serializer:) { form in try form.append(fileAt:name:) }`."
    if row in ("upload-file", "multipart-file"):
        if s.upload_sink == "file":
            what += (f" nginx reads each body into a temporary file in {s.big_dir} before it answers 200"
                     " (UPLOAD_SINK=file); every run's $request_length checked in its log.")
        else:
            what += " nginx answers 204 at once and reads and discards the body (UPLOAD_SINK=discard)."
    else:
        what += f" nginx serves the fixture from {s.big_dir} with sendfile; every run's $body_bytes_sent checked in its log."
    return title, what


def large_table(row: str, clients: list[str], records: list[RunRecord], failures: dict[tuple[str, str], str],
                s: Settings, facts: Facts, write_calls: dict[tuple[str, str], int] | None = None) -> str:
    """The table of one large row, with its notes."""
    title, what = _large_text(row, s)
    reference = ROWS[row].reference
    ok, failed = _by_client(records, row)
    lines = [f"## {title}", "",
             f"{facts.machine()} {s.big_runs} runs each after {s.big_warmup} warm-up, interleaved. {what}", ""]
    ref = _median(ok[reference], "seconds") if ok.get(reference) else None
    lines.append(f"| client | median s | min s | max s | MiB/s | x {reference} | CPU s | nginx CPU s | peak RSS MiB | runs |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in clients:
        samples, bad = ok.get(name, []), len(failed.get(name, []))
        label = f"{name} *" if name == reference else name
        if not samples:
            lines.append(f"| {label} | failed | | | | | | | | 0/{bad} |")
            continue
        secs = [r.number("seconds") for r in samples]
        med = statistics.median(secs)
        rss = max(r.number("maxrss_kb") for r in samples) / 1024
        rss_text = f"{rss:.1f}" if rss else "n/a"
        ratio = f"{med / ref:.2f}" if ref else "n/a"
        lines.append(f"| {label} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} | {s.big_bytes / 2**20 / med:,.0f}"
                     f" | {ratio} | {_median(samples, 'cpu'):.2f} | {_median(samples, 'srv_cpu'):.2f} | {rss_text}"
                     f" | {len(samples)}/{len(samples) + bad} |")
    lines += ["",
              "\\* reference. Target: Courier at most 1.3x the reference, peak RSS under 40 MiB.",
              "Seconds are wall time of the transfer measured in the client (curl: its %{time_total}); CPU s is the median",
              "user + system time of the whole client process, nginx CPU s that of nginx's worker during the run (when it",
              "nears the seconds, nginx is the bottleneck and the ratio understates the client's cost); peak RSS is the",
              "largest ru_maxrss. Every run moved at least the file's size through the loopback interface."]
    server = [r.number("srv_seconds") for name in clients for r in ok.get(name, []) if "srv_seconds" in (r.fields or {})]
    if server:
        lines.append(f"nginx's own request time: median {statistics.median(server):.3f} s over all clients' runs.")
    writes = [(name, write_calls[(row, name)]) for name in clients if (row, name) in (write_calls or {})]
    if writes:
        lines.append("Bytes per write(2) call, from one more run of each client under `strace -f -c` (not timed): "
                     + ", ".join(f"{name} {s.big_bytes / calls / 1024:.1f} KiB ({calls:,} calls)"
                                 for name, calls in writes) + ".")
    if failed:
        lines += ["", "Failed runs: " + ", ".join(f"{n} {len(rs)}" for n, rs in failed.items())
                  + " (not in the figures); the first:", ""]
        lines += [f"    {failures[(row, name)]}" for name in failed if (row, name) in failures]
    return "\n".join(lines)
