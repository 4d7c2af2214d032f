"""What the steps share: the repository's paths, saying what runs, running a command into a log."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence, TextIO

ROOT = Path(__file__).resolve().parent.parent.parent


# Where say() writes: stdout, or stderr in a mode whose stdout is for a caller to read.
_progress: TextIO = sys.stdout


def progress_to_stderr() -> None:
    """say() writes to stderr from now on (--build-only prints its results on stdout)."""
    global _progress
    _progress = sys.stderr


def progress() -> TextIO:
    """Where say() writes, for a command whose output belongs with it."""
    return _progress


def say(message: str) -> None:
    print(f"libcurl-matrix: {message}", file=_progress, flush=True)


def duration(seconds: float | None) -> str:
    """`1m05s`, `42s`; `–` for a step that did not run."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def run_logged(
    argv: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None, cwd: Path = ROOT,
    timeout: float | None = None, append: bool = False,
) -> tuple[int, float]:
    """Runs `argv` with stdout and stderr in `log` (the command line first); returns its exit
    status (124 when it ran past `timeout` seconds and was killed) and its wall time.

    The command gets a session of its own, so that a timeout or Ctrl-C ends it and whatever
    it started (a test process's servers and helpers) by that process group alone."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "a" if append else "w") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
            env=dict(env) if env is not None else None, start_new_session=True,
        )
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            out.write(f"\nlibcurl-matrix: killed after {duration(timeout)}\n")
            status = 124
        except BaseException:
            _kill_group(process)
            raise
    return status, time.monotonic() - started


def _kill_group(process: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def fail(message: str) -> None:
    print(f"libcurl-matrix: {message}", file=sys.stderr, flush=True)
