"""Running one client process: under `timeout`, its CPU time from wait4."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

TIMED_OUT = (124, 137)  # timeout's exit status after TERM, and after KILL


@dataclass(frozen=True)
class Finished:
    """A finished process: its exit status (128 + N for signal N, as a shell says it) and the
    user + system CPU seconds of it and the descendants it waited for (wait4)."""

    status: int
    cpu: float


def with_timeout(run_timeout: str, argv: Sequence[str], cpus: str = "") -> list[str]:
    """`argv` under `timeout --kill-after=5 RUN_TIMEOUT`, which forks it: the client then starts
    from timeout's small peak RSS, not this process's (Linux keeps ru_maxrss across exec).
    With `cpus`, under `taskset -c CPUS` as well (the affinity passes to the client)."""
    pinned = ["taskset", "-c", cpus] if cpus else []
    return [*pinned, "timeout", "--kill-after=5", run_timeout, *argv]


def run_measured(
    argv: Sequence[str], *, stdout: Path, stderr: Path, env: Mapping[str, str] | None = None,
    append_stderr: bool = False,
) -> Finished:
    """Runs `argv` with its output in files; waits with wait4 for its CPU time.

    Each run gets an empty `XDG_CACHE_HOME` of its own (unless `env` names one): a default
    session keeps its HTTP cache and cookies there, under the process's name, and entries left
    by an earlier run (of another row, or a server that allowed caching) would make one
    client's requests consult a cache that another client's, named differently, never sees."""
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache_home:
        child_env = dict(os.environ)
        child_env["XDG_CACHE_HOME"] = cache_home
        child_env.update(env or {})
        return _run(argv, stdout=stdout, stderr=stderr, env=child_env, append_stderr=append_stderr)


def _run(argv: Sequence[str], *, stdout: Path, stderr: Path, env: dict[str, str], append_stderr: bool) -> Finished:
    with open(stdout, "wb") as out, open(stderr, "ab" if append_stderr else "wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    try:
        _, wait_status, usage = os.wait4(process.pid, 0)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): timeout passes TERM on to the client.
        process.send_signal(signal.SIGTERM)
        process.wait()
        raise
    code = os.waitstatus_to_exitcode(wait_status)
    process.returncode = code  # reaped: Popen must not wait for it again
    return Finished(status=code if code >= 0 else 128 - code, cpu=usage.ru_utime + usage.ru_stime)


def run_text(argv: Sequence[str]) -> str:
    """The standard output of a short command, stripped; "" when it fails."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def tail(path: Path, lines: int) -> list[str]:
    """The last `lines` lines of a text file (none when it is missing)."""
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def first_error_line(path: Path, *, last: bool = False) -> str:
    """The first (or last) non-empty line of a client's standard error, at most 300 characters."""
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    return (lines[-1] if last else lines[0])[:300]
