"""Shared plumbing for the test-peer launchers (serve_httpbin.py, serve_nginx.py,
serve_tls.py).

Python 3.11 standard library only.  A launcher starts a server as a child in
its own process group, waits until it answers, prints one ``READY ...`` line
on stdout, then supervises: when the parent process disappears, on
SIGTERM/SIGINT/SIGHUP, or when the server dies, it stops the whole group
(SIGTERM, then SIGKILL after a grace period) and exits.  The server is also
given PR_SET_PDEATHSIG so that it gets SIGTERM even if the launcher itself is
killed with SIGKILL.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Sequence

PR_SET_PDEATHSIG = 1


def fail(message: str, code: int = 1) -> "None":
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr, flush=True)
    sys.exit(code)

# A self-signed EC P-256 certificate for localhost and 127.0.0.1, valid 30 days, that is its
# own CA (CA:TRUE), so that it works as the CA bundle a client trusts.
LOCALHOST_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
x509_extensions = v3
prompt = no

[dn]
CN = localhost

[v3]
subjectAltName = IP:127.0.0.1, DNS:localhost
basicConstraints = critical, CA:TRUE
keyUsage = critical, digitalSignature, keyEncipherment, keyCertSign
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
"""


def openssl(*args: str) -> bytes:
    """Runs the openssl tool; its standard output, or fail() with its messages."""
    try:
        done = subprocess.run(["openssl", *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except FileNotFoundError:
        fail("the openssl command line tool is not installed")
    except subprocess.TimeoutExpired:
        fail(f"openssl {args[0]} took more than 60 s")
    if done.returncode != 0:
        fail(f"openssl {' '.join(args)} failed:\n{done.stderr.decode(errors='replace')}")
    return done.stdout


def make_localhost_certificate(tmp: str) -> tuple[str, str]:
    """cert.pem and key.pem in `tmp` (see LOCALHOST_OPENSSL_CONFIG); their paths."""
    cert, key, conf = (os.path.join(tmp, n) for n in ("cert.pem", "key.pem", "openssl.cnf"))
    with open(conf, "w") as f:
        f.write(LOCALHOST_OPENSSL_CONFIG)
    openssl("req", "-x509", "-config", conf, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", cert, "-days", "30", "-sha256")
    return cert, key


def nofile_limit(cap: int) -> int:
    """Open files to ask nginx for (worker_rlimit_nofile): `cap`, but not above
    the hard limit, since even root may lack CAP_SYS_RESOURCE (containers)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


def error_log_tail(directory: str, lines: int = 20) -> str:
    """The last lines of `directory`/error.log (nginx's), or "" if unreadable."""
    try:
        with open(os.path.join(directory, "error.log")) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def start_nginx(nginx: str, tmp: str, conf: str, started: list["ChildGroup"],
                answers: Callable[[], bool], timeout: float,
                waiting_for: Callable[[], str]) -> "ChildGroup | None":
    """Starts nginx with `conf` (prefix and error.log in `tmp`), appends it to
    `started`, and polls `answers()` until it holds: returns the child then,
    or None if nginx exited first (ports taken, say: the caller may try again
    on others).  Fails, with nginx's last error lines, when `timeout` seconds
    pass; `waiting_for()` says what did not answer."""
    child = ChildGroup([nginx, "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")])
    started.append(child)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            child.stop()
            return None
        if answers():
            return child
        time.sleep(0.05)
    child.stop()
    fail(f"nginx did not answer within {timeout:.0f} s: {waiting_for()}\n{error_log_tail(tmp)}")
    return None


def start_attempts(name: str, attempts: int, tmp: str, start: Callable[[], object]) -> object:
    """Calls `start()` (which returns None when nginx exited during startup) up
    to `attempts` times, each on fresh ports; returns its first other result."""
    for attempt in range(attempts):
        result = start()
        if result is not None:
            return result
        print(f"{name}: nginx exited during startup (attempt {attempt + 1})\n"
              f"{error_log_tail(tmp)}", file=sys.stderr, flush=True)
    fail("nginx kept exiting during startup; see its messages above")
    return None


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def parent_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        close = stat.rindex(b")")
        if stat[close + 2:close + 3] in (b"Z", b"X"):
            return False
    except (OSError, ValueError):
        pass
    return True


def _pdeathsig_preexec() -> None:
    """Runs in the forked child before exec: SIGTERM it when we die, and let it be stopped."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass


class ChildGroup:
    """A child process leading its own process group."""

    def __init__(self, argv: Sequence[str], **popen_kwargs) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=popen_kwargs.pop("stdout", sys.stderr.fileno()),  # never our stdout
            start_new_session=True,
            preexec_fn=_pdeathsig_preexec,
            **popen_kwargs,
        )
        self.pgid = self.proc.pid  # session leader == group leader

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _group_exists(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def stop(self, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        """Signal the whole group, wait up to `grace` s, then SIGKILL what is left."""
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.proc.poll()  # reap the leader so it does not count as alive
            if not self._group_exists():
                break
            time.sleep(0.05)
        else:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        # Grandchildren killed by SIGKILL are reaped by init; give them a moment
        # so that callers that check for leftovers right after we exit see none.
        deadline = time.monotonic() + 2.0
        while self._group_exists() and time.monotonic() < deadline:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.05)


class Stop(Exception):
    pass


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def install_stop_signals() -> None:
    def handler(signum, frame):
        raise Stop(signal.Signals(signum).name)

    # A launcher started from a Swift test process inherits the signal mask of the thread
    # that spawned it, and Swift's pool threads block SIGTERM: unblock, or `terminate()`
    # would never reach us (and our children would inherit the mask too).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def announce(line: str) -> None:
    """Print the READY line, then make sure nothing else reaches stdout."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    sys.stdout = sys.stderr


def supervise(parent_pid: int | None, children: Sequence[ChildGroup],
              cleanup: Callable[[], None] | None = None) -> int:
    """Block until the parent goes away, a stop signal arrives, or a child dies.
    Then stop every child and run `cleanup`.  Returns the exit code."""
    original_ppid = os.getppid()
    watched = parent_pid
    code = 0
    try:
        while True:
            time.sleep(0.5)
            if watched is not None:
                if not parent_alive(watched):
                    break
                if watched == original_ppid and os.getppid() != original_ppid:
                    break
            elif os.getppid() != original_ppid:
                break
            dead = [c for c in children if not c.alive()]
            if dead:
                print(f"{os.path.basename(sys.argv[0])}: {dead[0].argv[0]} exited unexpectedly "
                      f"with status {dead[0].proc.returncode}", file=sys.stderr, flush=True)
                code = 1
                break
    except Stop:
        pass
    finally:
        shutdown(children, cleanup)
    return code


def shutdown(children: Sequence[ChildGroup], cleanup: Callable[[], None] | None = None) -> None:
    # Ignore further stop signals while we clean up.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    for c in children:
        c.stop()
    if cleanup is not None:
        cleanup()
