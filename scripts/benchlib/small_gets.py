"""The rows of many small GETs (small, https, h2, https-new, h1-10k, h2-10k): command lines,
warm-up, interleaved runs, and the server-side checks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .calls import CallCounter
from .catalog import CLIENTS, ROWS, RequestRow
from .process import TIMED_OUT, Finished, first_error_line, run_measured, tail, with_timeout
from .results import RunRecord, find_result
from .server import AccessLog, Nginx, cpu_seconds
from .settings import BODY_BYTES, Settings, log, log_details


@dataclass(frozen=True)
class Endpoints:
    """Where the rows' clients go, and what they trust."""

    urls: dict[str, str]  # nginx server name (RequestRow.server) -> URL of small.json
    cert: Path | None  # the bench certificate (https, h2, h2-10k)
    bundle: Path | None  # the system's bundle with the certificate appended (https-new)
    logs: dict[str, AccessLog]  # nginx server name -> its access log (the logged servers)


@dataclass(frozen=True)
class Outcome:
    """One checked run: the raw line's fields; or why it failed: `error` for the report (one
    line), `message` for the log (after FAILED) and the output lines to show under it."""

    fields: dict[str, str] | None
    error: str = ""
    message: str = ""
    details: tuple[str, ...] = ()


def exit_description(status: int, run_timeout: str) -> str:
    if status in TIMED_OUT:
        return f"{status}: killed after RUN_TIMEOUT={run_timeout} s"
    return str(status)


def check_requests_log(
    access_log: AccessLog, mark: int, requests: int, protocol: str
) -> tuple[bool, str, str]:
    """nginx's lines of the run just made (buffered: waits up to 5 s for them): (ok,
    "srv_requests=... srv_connections=... srv_tls=...", the problem). ok only if nginx served
    `requests` requests, each status 200 with the whole body over `protocol`."""
    lines = access_log.wait_for(mark, requests, tries=100, interval=0.05)
    connections, tls, bad, first_bad = set(), set(), 0, ""
    for line in lines:
        words = line.split()
        words += [""] * (5 - len(words))
        connections.add(words[3])
        tls.add(words[4])
        if words[0] != protocol or words[1] != "200" or words[2] != str(BODY_BYTES):
            bad += 1
            first_bad = first_bad or line
    summary = (f"srv_requests={len(lines)} srv_connections={len(connections)}"
               f" srv_tls={','.join(sorted(tls)) or 'none'}")
    if len(lines) != requests:
        return False, summary, f"nginx logged {len(lines)} requests, expected {requests}"
    if bad:
        return False, summary, (f"nginx logged {bad} requests that are not {protocol} 200 with {BODY_BYTES}"
                                f" bytes, the first: {first_bad}")
    return True, summary, ""


class SmallGetRows:
    """Runs the rows of small GETs; `records` holds every measured run."""

    def __init__(self, settings: Settings, binaries: dict[str, str], endpoints: Endpoints, nginx: Nginx, work: Path):
        self.settings = settings
        self.binaries = binaries
        self.endpoints = endpoints
        self.nginx = nginx
        self.work = work
        self.records: list[RunRecord] = []

    def command(self, row: RequestRow, client: str, total: int, concurrency: int) -> tuple[list[str], dict[str, str]]:
        """The client's command line and environment in `row`. multi_get takes its URL, TOTAL,
        CONCURRENCY and loop as arguments and the TLS settings from its environment; the Swift
        clients take options."""
        spec = CLIENTS[client]
        url = self.endpoints.urls[row.server]
        trusted = {"cert": self.endpoints.cert, "bundle": self.endpoints.bundle}.get(row.trust or "")
        binary = self.binaries[ROWS[row.name].product_for(spec)]
        env = {"EXPECTED_BYTES": str(BODY_BYTES), "CAINFO": "", "CAPATH_NONE": "", "HTTP_VERSION": "",
               "AS_COURIER": "1" if spec.as_courier else ""}
        if spec.is_c:
            argv = [binary, url, str(total), str(concurrency), spec.loop or self.settings.c_loop]
            if row.trust:
                env.update(CAINFO=str(trusted), CAPATH_NONE="1" if spec.capath_none else "",
                           HTTP_VERSION=row.http_version or "")
        else:
            argv = [binary, "--url", url, "--total", str(total), "--concurrency", str(concurrency), *spec.flags]
            if row.trust:
                flag = spec.bundle_flag if row.trust == "bundle" else "--ca-file"
                argv += [flag, str(trusted), "--http-version", row.http_version or ""]
        return with_timeout(self.settings.run_timeout, argv, self.settings.client_cpus), env

    def _run_client(self, row: RequestRow, client: str, total: int, concurrency: int, out: Path) -> Finished:
        argv, env = self.command(row, client, total, concurrency)
        return run_measured(argv, stdout=out, stderr=out.with_name(out.name + ".err"), env=env)

    def measure(self, row: RequestRow, client: str, total: int, concurrency: int) -> Outcome:
        """One run, checked: the client's exit status and RESULT line (all `total` requests),
        and for a logged row every request in nginx's log."""
        access_log = self.endpoints.logs.get(row.server)
        if access_log:
            access_log.settle()
            mark = access_log.mark()
            ticks = self.nginx.worker_ticks()
        out = self.work / "run.out"
        err = self.work / "run.out.err"
        finished = self._run_client(row, client, total, concurrency, out)
        result = find_result(out.read_text(errors="replace"))
        if finished.status != 0 or result is None:
            status = exit_description(finished.status, self.settings.run_timeout)
            if finished.status == 0:
                status = "0, no RESULT line"
            first = first_error_line(err)
            error = f"exit {status}" + (f": {first}" if first else "")
            return Outcome(None, error, f"(exit {status}):", tuple(tail(err, 5)))
        if result.get("requests") != str(total):
            problem = f"{result.get('requests')} requests done, expected {total}"
            return Outcome(None, problem, f": {problem}")
        fields = {**result, "cpu": f"{finished.cpu:.3f}"}
        if access_log:
            server_cpu = cpu_seconds(self.nginx.worker_ticks() - ticks)
            ok, summary, problem = check_requests_log(access_log, mark, total, row.log_protocol or "")
            if not ok:
                return Outcome(None, f"nginx: {problem}", f"on the server side: {summary}; {problem}")
            fields.update(dict(word.split("=", 1) for word in summary.split()))
            fields["srv_cpu"] = f"{server_cpu:.2f}"
        return Outcome(fields)

    def warm_up(self, row: RequestRow, clients: list[str], prefix: str) -> None:
        if row.warmup <= 0:
            return
        log(f"{prefix}warm-up: {row.warmup} requests per client")
        out = self.work / "warmup.out"
        for client in clients:
            finished = self._run_client(row, client, row.warmup, row.concurrency, out)
            if finished.status != 0:
                log(f"{prefix}warm-up of {client} failed:")
                log_details(tail(out.with_name(out.name + ".err"), 3))

    def run_row(self, row: RequestRow, clients: list[str]) -> None:
        """The warm-up, then RUNS rounds of every client in turn. The small row's messages are
        as they always were; the others' are prefixed with the row's name."""
        prefix = "" if row.name == "small" else f"{row.name}: "
        self.warm_up(row, clients, prefix)
        before = ", each after a run of 1 GET at concurrency 1" if row.wide else ""
        log(f"{prefix}{self.settings.runs} runs of {' '.join(clients)}: {row.total} GETs, "
            f"concurrency {row.concurrency}{before}")
        for run in range(1, self.settings.runs + 1):
            for client in clients:
                label = f"{prefix}run {run}/{self.settings.runs}"
                record = self._wide_run(row, client, run, label) if row.wide else self._run(row, client, run, label)
                self.records.append(record)

    def _run(self, row: RequestRow, client: str, run: int, label: str) -> RunRecord:
        outcome = self.measure(row, client, row.total, row.concurrency)
        if outcome.fields is None:
            self._log_failure(label, client, outcome)
            return RunRecord(row.name, run, client, error=outcome.error)
        log(f"{label} {client:<18} {outcome.fields['seconds']} s (cpu {outcome.fields['cpu']} s)")
        return RunRecord(row.name, run, client, outcome.fields)

    def _wide_run(self, row: RequestRow, client: str, run: int, label: str) -> RunRecord:
        """A 10k row's run: nginx idle, the client's run of one request (its peak RSS with
        nothing in flight), nginx idle again, then the run of TOTAL_10K at once."""
        self.nginx.wait_until_idle()
        single = self.measure(row, client, 1, 1)
        if single.fields is None:
            self._log_failure(f"{label} (1 request)", client, single)
        self.nginx.wait_until_idle()
        outcome = self.measure(row, client, row.total, row.concurrency)
        if outcome.fields is None:
            self._log_failure(label, client, outcome)
            return RunRecord(row.name, run, client, error=outcome.error)
        fields = dict(outcome.fields)
        peak = int(fields["maxrss_kb"])
        single_text = "1 request failed"
        if single.fields is not None:
            base = int(single.fields["maxrss_kb"])
            fields["base_maxrss_kb"] = str(base)
            fields["kib_per_request"] = f"{(peak - base) / row.total:.2f}"
            single_text = f"1 request: {base / 1024:.1f} MiB"
        log(f"{label} {client:<18} {fields['seconds']} s (cpu {fields['cpu']} s, "
            f"peak RSS {peak / 1024:.1f} MiB, {single_text})")
        return RunRecord(row.name, run, client, fields)

    def count_calls(self, row: RequestRow, clients: list[str]) -> tuple[dict[str, dict[str, float]], str]:
        """After the timed runs: each client's `malloc`s, retains and releases per request (see
        calls.py), and why nothing was counted, if nothing was."""
        counter = CallCounter()
        binaries = {client: self.binaries[ROWS[row.name].product_for(CLIENTS[client])] for client in clients}
        why = counter.prepare(list(binaries.values()))
        if why:
            log(f"calls per request: not counted: {why}")
            return {}, why
        counts: dict[str, dict[str, float]] = {}
        try:
            for client, binary in binaries.items():
                env = self.command(row, client, 1, row.concurrency)[1]
                found = counter.count(lambda total, c=client: self.command(row, c, total, row.concurrency)[0], env,
                                      binary)
                if found:
                    counts[client] = found
                    log(f"calls per request {client:<18} "
                        + ", ".join(f"{value:.1f} {name}" for name, value in found.items()))
                else:
                    log(f"calls per request {client:<18} not counted (a run under perf stat failed)")
        finally:
            counter.close()
        return counts, ""

    def _log_failure(self, label: str, client: str, outcome: Outcome) -> None:
        separator = "" if outcome.message.startswith(":") else " "
        log(f"{label} {client} FAILED{separator}{outcome.message}")
        log_details(list(outcome.details))
