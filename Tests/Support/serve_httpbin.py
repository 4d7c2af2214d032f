#!/usr/bin/env python3
"""Run httpbin under gunicorn on a free loopback port for Courier's tests.

Usage:  python3 serve_httpbin.py --venv DIR [--parent-pid PID]

DIR is a virtualenv with the PyPI packages `httpbin` and `gunicorn`.  Prints
exactly ``READY <port>`` on stdout once httpbin answers HTTP, then nothing
more.  Stops gunicorn (SIGTERM to its process group, SIGKILL after 3 s) and
exits when the parent process disappears, on SIGTERM/SIGINT/SIGHUP, or if
gunicorn dies.  Exits 1 with a message on stderr if httpbin is not serving
within 30 s.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

STARTUP_TIMEOUT = 30.0
ATTEMPTS = 3  # a fresh port each time, in case another process took ours
STARTED: list[peerlib.ChildGroup] = []  # everything to stop if we are stopped early


def http_ok(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/status/200")
        status = conn.getresponse().status
        conn.close()
        return status == 200
    except (OSError, http.client.HTTPException):
        return False


def start(gunicorn: str) -> tuple[peerlib.ChildGroup, int] | None:
    """Start gunicorn; returns (child, port) once it serves, None if it died early."""
    port = peerlib.free_port()
    child = peerlib.ChildGroup([
        gunicorn,
        "-b", f"127.0.0.1:{port}",
        "--worker-class", "gthread",
        "--workers", "2",
        "--threads", "64",
        "--keep-alive", "5",
        "--graceful-timeout", "2",
        "--log-level", "warning",
        # gunicorn 27 opens a control socket at a fixed path in $HOME: every instance after
        # the first logs an error over it, and the tests leave nothing in $HOME.
        "--no-control-socket",
        "httpbin:app",
    ])
    STARTED.append(child)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if not child.alive():
            child.stop()  # leftover workers, if any
            return None
        if http_ok(port):
            return child, port
        time.sleep(0.1)
    child.stop()
    peerlib.fail(f"httpbin did not answer on 127.0.0.1:{port} within {STARTUP_TIMEOUT:.0f} s")
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description="Run httpbin (gunicorn) on a free loopback port.")
    ap.add_argument("--venv", required=True, help="virtualenv holding httpbin and gunicorn")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process disappears (default: the parent)")
    args = ap.parse_args()

    gunicorn = os.path.join(args.venv, "bin", "gunicorn")
    if not os.access(gunicorn, os.X_OK):
        peerlib.fail(f"{gunicorn} not found or not executable (is --venv right?)")

    peerlib.install_stop_signals()
    child = None
    try:
        for attempt in range(ATTEMPTS):
            started = start(gunicorn)
            if started is not None:
                child, port = started
                break
            print(f"serve_httpbin.py: gunicorn exited during startup (attempt {attempt + 1})",
                  file=sys.stderr, flush=True)
        if child is None:
            peerlib.fail("gunicorn kept exiting during startup; see its messages above")
    except peerlib.Stop:
        peerlib.shutdown(STARTED)
        return 0

    peerlib.announce(f"READY {port}")
    return peerlib.supervise(args.parent_pid, [child])


if __name__ == "__main__":
    sys.exit(main())
