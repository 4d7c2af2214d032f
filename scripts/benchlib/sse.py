"""The sse-decode row: one event stream per run, as a model API's answer is read: SSE_EVENTS
events of about 200 bytes (a delta each, `{"id": N, "model": ..., "choices": [...]}`) ending
with `data: [DONE]`, served by nginx as a static text/event-stream file; each client decodes
every event's data and checks its id."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from .catalog import CLIENTS, ROWS
from .process import first_error_line, run_measured, tail, with_timeout
from .report import Facts
from .results import RunRecord, find_result
from .settings import Settings, log, log_details

EVENT_BYTES = 200  # each event's `data: ...` line, its line feed and the blank line


def write_events(path: Path, count: int) -> int:
    """The stream: `count` events of EVENT_BYTES bytes, then `data: [DONE]`. Returns its size."""
    with open(path, "wb") as out:
        for index in range(count):
            value = {"id": index, "model": "bench", "choices": [{"index": 0, "delta": {"content": ""}}]}
            bare = len(b"data: " + json.dumps(value).encode() + b"\n\n")
            words = "courier streams "
            value["choices"][0]["delta"]["content"] = (words * 20)[: EVENT_BYTES - bare]
            line = b"data: " + json.dumps(value).encode() + b"\n\n"
            assert len(line) == EVENT_BYTES, len(line)
            out.write(line)
        out.write(b"data: [DONE]\n\n")
    return path.stat().st_size


class SSERows:
    """Runs the sse-decode row; `records` holds every measured run."""

    def __init__(self, settings: Settings, binaries: dict[str, str], url: str, work: Path):
        self.settings = settings
        self.binaries = binaries
        self.url = url
        self.work = work
        self.records: list[RunRecord] = []

    def _argv(self, client: str) -> list[str]:
        s = self.settings
        binary = self.binaries[ROWS["sse-decode"].product_for(CLIENTS[client])]
        argv = [binary, "--mode", "sse-decode", "--url", self.url, "--total", str(s.sse_events)]
        return with_timeout(s.run_timeout, argv, s.client_cpus)

    def run_once(self, client: str, label: str) -> dict[str, str] | None:
        out, err = self.work / "sse.out", self.work / "sse.out.err"
        finished = run_measured(self._argv(client), stdout=out, stderr=err)
        result = find_result(out.read_text(errors="replace")) if out.exists() else None
        if finished.status != 0 or result is None or result.get("events") != str(self.settings.sse_events):
            log(f"{label} {client} FAILED (exit {finished.status}): {first_error_line(err, last=True)}")
            log_details(tail(err, 5))
            return None
        return {**result, "cpu": f"{finished.cpu:.3f}"}

    def run_row(self, clients: list[str]) -> None:
        s = self.settings
        log(f"sse-decode: warm-up, 1 run per client")
        for client in clients:
            self.run_once(client, "sse-decode warm-up")
        log(f"sse-decode: {s.runs} runs of {' '.join(clients)}, {s.sse_events} events each")
        for run in range(1, s.runs + 1):
            for client in clients:
                label = f"sse-decode run {run}/{s.runs}"
                fields = self.run_once(client, label)
                self.records.append(RunRecord("sse-decode", run, client, fields))
                if fields:
                    log(f"{label} {client:<8} {fields['seconds']} s (cpu {fields['cpu']} s, "
                        f"peak RSS {int(fields['maxrss_kb']) // 1024} MiB)")


def sse_table(clients: list[str], records: list[RunRecord], s: Settings, facts: Facts, size: int) -> str:
    """The row's table: wall and CPU time per run, events per second, CPU per event."""
    lines = [
        f"## Server-Sent Events decoded: {s.sse_events:,} events of {EVENT_BYTES} bytes, then [DONE]",
        "",
        f"{facts.machine()} {s.runs} runs each, interleaved, after one warm-up run each. nginx serves the"
        f" stream as a static text/event-stream file ({size:,} bytes, Content-Length). Each client decodes every"
        " event's data into BenchEvent and checks its id: courier: events(.get, ..., reconnection: .never)"
        " .decoding(BenchEvent.self, until: \"[DONE]\"); ahc: HTTPClient.execute, the body's buffers split"
        " by hand at blank lines, data lines joined, JSONDecoder.",
        "",
        "| client | median s | min s | max s | events/s | CPU s | CPU µs per event | peak RSS MiB | runs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for client in clients:
        runs = [r for r in records if r.name == client]
        ok = [r for r in runs if not r.failed]
        if not ok:
            lines.append(f"| {client} | failed | | | | | | | 0/{len(runs)} |")
            continue
        seconds = [r.number("seconds") for r in ok]
        cpu = statistics.median(r.number("cpu") for r in ok)
        median = statistics.median(seconds)
        rss = max(r.number("maxrss_kb") for r in ok) / 1024
        lines.append(
            f"| {client} | {median:.3f} | {min(seconds):.3f} | {max(seconds):.3f} | {s.sse_events / median:,.0f} |"
            f" {cpu:.2f} | {cpu / s.sse_events * 1e6:.2f} | {rss:.1f} | {len(ok)}/{len(runs)} |")
    lines += ["", "Seconds are wall time from the request to the last event, measured in the client;"
              " CPU s is the median user + system time of the whole client process."]
    return "\n".join(lines)
