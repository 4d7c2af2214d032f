"""The large rows (download-file, stream-discard, upload-file, multipart-file): one transfer
of the fixture per run, checked in nginx's log, on the loopback interface and on disk."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .catalog import CLIENTS, ROWS
from .files import files_equal
from .process import Finished, first_error_line, run_measured, tail, with_timeout
from .results import RunRecord, find_result
from .server import AccessLog, Nginx, cpu_seconds
from .settings import Settings, log, log_details

LO_RX = Path("/sys/class/net/lo/statistics/rx_bytes")
GNU_TIME = "/usr/bin/time"


def _write_calls(summary: Path) -> int | None:
    """The calls of write, pwrite64 and writev in a `strace -c` summary."""
    total = 0
    for line in summary.read_text(errors="replace").splitlines():
        words = line.split()
        if words and words[-1] in ("write", "pwrite64", "writev") and len(words) >= 5 and words[3].isdigit():
            total += int(words[3])
    return total or None


def gnu_time_works() -> bool:
    """GNU time measures curl's peak RSS (%M): curl is forked from it, not from this process."""
    try:
        return subprocess.run([GNU_TIME, "-f", "%M", "-o", "/dev/null", "true"]).returncode == 0
    except OSError:
        return False


def loopback_bytes() -> int:
    """Bytes through the loopback interface (every byte is counted once in rx): a run must
    move at least BIG_BYTES. Machine-wide, so other traffic can only add to it; this is the
    byte count of the discard sink, which logs none."""
    try:
        return int(LO_RX.read_text())
    except (OSError, ValueError):
        return 0


@dataclass(frozen=True)
class LargeFiles:
    base_url: str  # http://127.0.0.1:PORT
    fixture: Path
    out_dir: Path  # the downloaded files, one at a time


class LargeRows:
    """Runs the large rows; `records` holds every measured run, `failures` the first message
    of each (row, client) that failed."""

    def __init__(self, settings: Settings, binaries: dict[str, str], files: LargeFiles, nginx: Nginx,
                 big_log: AccessLog, work: Path):
        self.settings = settings
        self.binaries = binaries
        self.files = files
        self.nginx = nginx
        self.big_log = big_log
        self.work = work
        self.records: list[RunRecord] = []
        self.failures: dict[tuple[str, str], str] = {}
        self.gnu_time = gnu_time_works()
        # download-file: each client's write(2) calls in one more run under `strace -c`.
        self.write_calls: dict[tuple[str, str], int] = {}
        self._prefix: list[str] = []  # put before the client's command (the strace run)

    def note_gnu_time(self, clients: set[str]) -> None:
        if "curl" in clients and not self.gnu_time:
            log("note: GNU time (/usr/bin/time, apt-get install time) not found: curl's peak RSS is not measured")

    # ---- one run

    def _client_argv(self, row: str, client: str) -> list[str]:
        s, f = self.settings, self.files
        binary = self.binaries[ROWS[row].product_for(CLIENTS[client])]
        if client == "c":  # stream_get
            return [binary, f"{f.base_url}/big.bin", str(s.stream_buffer)]
        args = {
            "download-file": ["--url", f"{f.base_url}/big.bin", "--output", str(f.out_dir / f"{client}.bin")],
            "stream-discard": ["--url", f"{f.base_url}/big.bin"],
            "upload-file": ["--url", f"{f.base_url}/upload/big.bin", "--file", str(f.fixture)],
            "multipart-file": ["--url", f"{f.base_url}/upload/form", "--file", str(f.fixture)],
        }[row]
        return [binary, "--mode", row, *args, "--expected-bytes", str(s.big_bytes)]

    def _run_curl(self, row: str, out: Path, err: Path) -> Finished:
        """One curl command line run, under GNU time for its peak RSS; makes the RESULT line from
        curl's -w figures (seconds: %{time_total})."""
        s, f = self.settings, self.files
        args = {
            "download-file": ["-o", str(f.out_dir / "curl.bin"), f"{f.base_url}/big.bin"],
            "upload-file": ["-o", "/dev/null", "-T", str(f.fixture), f"{f.base_url}/upload/big.bin"],
            "multipart-file": ["-o", "/dev/null", "-F", f"file=@{f.fixture}", f"{f.base_url}/upload/form"],
        }[row]
        rss = out.with_name(out.name + ".rss")
        argv = with_timeout(s.run_timeout, [*self._prefix, self.binaries["curl"], "-sS", "-w",
                                            "%{http_code} %{size_download} %{size_upload} %{time_total}\n", *args],
                            s.client_cpus)
        if self.gnu_time:
            argv = [GNU_TIME, "-f", "%M", "-o", str(rss), *argv]
        w = out.with_name(out.name + ".w")
        finished = run_measured(argv, stdout=w, stderr=err, append_stderr=True)
        out.write_text("")
        if finished.status != 0:
            return finished
        code, down, up, seconds = (w.read_text().split() + ["", "", "", ""])[:4]
        bytes_moved = int(down or 0) if row == "download-file" else int(up or 0)
        expected_code = "200" if row == "download-file" or s.upload_sink == "file" else "204"
        if code != expected_code or bytes_moved < s.big_bytes or (row != "multipart-file" and bytes_moved != s.big_bytes):
            with open(err, "a") as e:
                e.write(f"curl: status {code}, {bytes_moved} bytes (expected {expected_code}, {s.big_bytes})\n")
            return Finished(1, finished.cpu)
        last = tail(rss, 1) if self.gnu_time else []
        peak = last[0].strip() if last else "0"
        out.write_text(f"RESULT client=curl seconds={seconds} requests=1 maxrss_kb={peak} bytes={bytes_moved}\n")
        return finished

    def _run_client(self, row: str, client: str, out: Path, err: Path) -> Finished:
        err.write_text("")
        if client == "curl":
            return self._run_curl(row, out, err)
        argv = with_timeout(self.settings.run_timeout, [*self._prefix, *self._client_argv(row, client)],
                            self.settings.client_cpus)
        return run_measured(argv, stdout=out, stderr=err, env={"EXPECTED_BYTES": str(self.settings.big_bytes)},
                            append_stderr=True)

    def _check_server(self, row: str, mark: int) -> tuple[bool, str]:
        """nginx's log line of the run just made (written when nginx finishes the request, so
        wait a little for it): (ok, "srv_status=... srv_request_length=... srv_body_bytes_sent=...
        srv_seconds=..." or the problem). ok only if the server saw the whole transfer."""
        lines = self.big_log.wait_for(mark, 1, tries=50, interval=0.1)
        if not lines:
            return False, "nginx logged no request"
        line = lines[0]
        status, length, sent, seconds = (line.split() + ["0", "0", "0", "0"])[:4]
        summary = f"srv_status={status} srv_request_length={length} srv_body_bytes_sent={sent} srv_seconds={seconds}"
        s = self.settings
        if row in ("download-file", "stream-discard"):
            ok = status == "200" and sent == str(s.big_bytes)
        elif s.upload_sink == "file":
            ok = status == "200" and length.isdigit() and int(length) >= s.big_bytes
        else:
            ok = status == "204"
        return ok, summary if ok else f"{summary}; nginx: {line}"

    def _failed(self, row: str, client: str, message: str) -> None:
        """Logs a failed run; the first message of each (row, client) is kept for the report."""
        log(message)
        self.failures.setdefault((row, client), message)
        time.sleep(1)  # nginx may log the failed request late: not into the next run's lines

    def run_once(self, row: str, client: str, label: str) -> dict[str, str] | None:
        """One checked run; on success the raw line's fields (the RESULT line's, the client's
        CPU and nginx's view)."""
        s = self.settings
        for leftover in self.files.out_dir.iterdir():
            leftover.unlink()
        self.nginx.wait_until_idle()
        mark = self.big_log.mark()
        lo_before = loopback_bytes()
        ticks = self.nginx.worker_ticks()
        out, err = self.work / "big.out", self.work / "big.out.err"
        finished = self._run_client(row, client, out, err)
        result = find_result(out.read_text(errors="replace")) if out.exists() else None
        if finished.status != 0 or result is None:
            status = "0, no RESULT line" if finished.status == 0 else str(finished.status)
            if finished.status in (124, 137):
                status += f": killed after RUN_TIMEOUT={s.run_timeout} s"
            self._failed(row, client, f"{label} {client} FAILED (exit {status}): {first_error_line(err, last=True)}")
            log_details(tail(err, 5))
            return None
        ok, server = self._check_server(row, mark)
        if not ok:
            self._failed(row, client, f"{label} {client} FAILED on the server side: {server}")
            return None
        moved = loopback_bytes() - lo_before
        server_cpu = cpu_seconds(self.nginx.worker_ticks() - ticks)
        if LO_RX.exists() and moved < s.big_bytes:
            self._failed(row, client, f"{label} {client} FAILED: only {moved} bytes went through the loopback"
                                      f" interface, expected {s.big_bytes} or more")
            return None
        if row == "download-file" and not self._check_download(row, client, label):
            return None
        fields = {**result, "cpu": f"{finished.cpu:.3f}"}
        fields.update(dict(word.split("=", 1) for word in server.split()))
        fields.update(srv_cpu=f"{server_cpu:.2f}", lo_bytes=str(moved))
        return fields

    def _check_download(self, row: str, client: str, label: str) -> bool:
        """The downloaded file: its size, and with VERIFY=1 its bytes (not timed)."""
        s = self.settings
        file = self.files.out_dir / f"{client}.bin"
        size = str(file.stat().st_size) if file.exists() else "missing"
        if size != str(s.big_bytes):
            self._failed(row, client, f"{label} {client} FAILED: {file} has {size} bytes, expected {s.big_bytes}")
            return False
        if s.verify and not files_equal(self.files.fixture, file):
            self._failed(row, client, f"{label} {client} FAILED: {file} differs from the fixture")
            return False
        file.unlink()
        return True

    # ---- a row

    def run_row(self, row: str, clients: list[str]) -> None:
        s = self.settings
        if s.big_warmup > 0:
            log(f"{row}: warm-up, {s.big_warmup} run(s) per client")
            for _ in range(s.big_warmup):
                for client in clients:
                    self.run_once(row, client, f"{row} warm-up")
        log(f"{row}: {s.big_runs} runs of {' '.join(clients)}, {s.big_bytes} bytes each")
        for run in range(1, s.big_runs + 1):
            for client in clients:
                label = f"{row} run {run}/{s.big_runs}"
                fields = self.run_once(row, client, label)
                self.records.append(RunRecord(row, run, client, fields))
                if fields:
                    log(f"{label} {client:<8} {fields['seconds']} s (cpu {fields['cpu']} s, "
                        f"peak RSS {int(fields['maxrss_kb']) // 1024} MiB)")
        if row == "download-file":
            self._count_writes(row, clients)

    def _count_writes(self, row: str, clients: list[str]) -> None:
        """One more run of each client under `strace -f -c` (not timed: strace slows every system
        call): how many write(2) calls put the file on disk. Few large writes are what a
        download should make; a sink that writes each small chunk of the body on its own shows
        here long before it shows in the seconds."""
        strace = shutil.which("strace")
        if strace is None:
            log(f"{row}: strace not found (apt-get install strace): write calls not counted")
            return
        counts = self.work / "big.strace"
        for client in clients:
            counts.unlink(missing_ok=True)
            self._prefix = [strace, "-f", "-qq", "-c", "-e", "trace=write,pwrite64,writev", "-o", str(counts)]
            try:
                fields = self.run_once(row, client, f"{row} write count")
            finally:
                self._prefix = []
            calls = _write_calls(counts) if fields and counts.exists() else None
            if calls:
                self.write_calls[(row, client)] = calls
                log(f"{row} write count {client:<8} {calls} write calls, {self.settings.big_bytes / calls / 1024:.1f} KiB each")
