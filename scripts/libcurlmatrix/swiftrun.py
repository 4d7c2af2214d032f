"""Building Courier against one libcurl's headers, and running its tests on one libcurl.

A build: `swift build --build-tests` in a scratch folder of its own, with PKG_CONFIG_PATH
naming the libcurl's prefix; its diagnostics read from the log, and the C shim's dependency
file checked for the curlver.h it was compiled against.

A test run: the `swift test` part of scripts/test (its environment, its three runs, or one
filtered run), with LD_LIBRARY_PATH naming the libcurl; `ldd` on the test bundle and a look
at the libraries every process of the run has mapped check which libcurl was really used;
the outcome read from Swift Testing's event stream.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .common import ROOT, duration, run_logged, say, tail

# scripts/test's build: `.build` built the same way is a null build after scripts/test, and
# scripts/test's build is one after this.
DEFAULT_BUILD_FLAGS = ["-Xswiftc", "-warnings-as-errors", "--explicit-target-dependency-import-check", "error"]

# The one warning every build prints (SwiftPM on a dependency's file): not reported.
EXPECTED_WARNING = re.compile(r"'swift-distributed-tracing': found \d+ file\(s\) which are unhandled")
# Warnings that are reported but do not fail the row: SwiftPM drops the -isystem flags that
# libcurl.pc brings from a GSS-API build's Requires.private (krb5's pkg-config file, listed
# from curl 8.x on) and says so. Nothing Courier compiles changes, and Courier cannot avoid it.
HARMLESS_WARNING = re.compile(r"^warning: prohibited flag\(s\): -isystem")

LOCATED = re.compile(r"^(?P<file>/[^:\s]+|[^/:\s][^:\s]*):(?P<line>\d+):(?P<column>\d+): (?P<kind>error|warning): (?P<text>.*)$")
UNLOCATED = re.compile(r"^(?P<kind>error|warning): (?P<text>.*)$")


@dataclass
class Compile:
    scratch: Path
    ok: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    harmless: list[str] = field(default_factory=list)  # warnings that do not fail the row
    headers: str = ""  # the curlver.h the shim was compiled against, or a problem
    headers_ok: bool = False
    seconds: float | None = None
    log: Path | None = None

    @property
    def cell(self) -> str:
        if self.ok and self.headers_ok and not self.warnings:
            return "yes" + (" (SwiftPM drops a flag of libcurl.pc)" if self.harmless else "")
        if self.ok and not self.headers_ok:
            return f"**yes, other headers**: {self.headers}"
        if self.ok:
            return f"**yes, {len(self.warnings)} new warning{'s' * (len(self.warnings) != 1)}**"
        count = len(self.errors)
        text = f"**no**: {count} error{'s' * (count != 1)}" if count else "**no**"
        return text + ("" if self.headers_ok else f" (headers: {self.headers})")

    @property
    def failed(self) -> bool:
        return not (self.ok and self.headers_ok and not self.warnings)


def build(
    scratch: Path, log: Path, *, pkg_config_dir: Path | None, jobs: int | None, extra: list[str] = (),
    expected_header: Path | None = None, target: str | None = None,
) -> Compile:
    """`swift build --build-tests` in `scratch` against the libcurl pkg-config finds first in
    `pkg_config_dir` (None: the system's); with `target`, `swift build --target` of that one
    target and what it depends on instead."""
    env = dict(os.environ)
    env.pop("PKG_CONFIG_PATH", None)
    if pkg_config_dir:
        env["PKG_CONFIG_PATH"] = str(pkg_config_dir)
    what = ["--target", target] if target else ["--build-tests"]
    argv = ["swift", "build", *what, "--scratch-path", str(scratch), *extra]
    if jobs:
        argv += ["--jobs", str(jobs)]
    status, seconds = run_logged(argv, log, env=env)
    result = Compile(scratch, ok=status == 0, seconds=seconds, log=log)
    _read_diagnostics(log, result)
    if not result.ok and not result.errors:
        result.errors.append(tail(log, 5).replace("\n", " / "))
    if expected_header is None:
        expected_header = _system_header()
    result.headers, result.headers_ok = _check_headers(scratch, expected_header)
    return result


def _read_diagnostics(log: Path, result: Compile) -> None:
    located: dict[str, list[str]] = {"error": [], "warning": []}
    unlocated: dict[str, list[str]] = {"error": [], "warning": []}
    for line in log.read_text(errors="replace").splitlines():
        match = LOCATED.match(line)
        if match:
            where = os.path.relpath(match["file"], ROOT) if match["file"].startswith("/") else match["file"]
            text = f"{where}:{match['line']}:{match['column']}: {match['kind']}: {match['text']}"
            if text not in located[match["kind"]]:
                located[match["kind"]].append(text)
            continue
        match = UNLOCATED.match(line)
        if match and not EXPECTED_WARNING.search(match["text"]):
            text = f"{match['kind']}: {match['text']}"
            if text not in unlocated[match["kind"]]:
                unlocated[match["kind"]].append(text)
    # A failed compiler job adds "error: ... command failed"; the located ones say why.
    result.errors = located["error"] or unlocated["error"]
    warnings = located["warning"] + unlocated["warning"]
    result.harmless = [text for text in warnings if HARMLESS_WARNING.match(text)]
    result.warnings = [text for text in warnings if text not in result.harmless]


def _system_header() -> Path:
    env = dict(os.environ)
    env.pop("PKG_CONFIG_PATH", None)
    include = subprocess.run(
        ["pkg-config", "--variable=includedir", "libcurl"], capture_output=True, text=True, env=env
    ).stdout.strip()
    return Path(include or "/usr/include") / "curl" / "curlver.h"


def _check_headers(scratch: Path, expected: Path) -> tuple[str, bool]:
    """Which curlver.h the C shim and the engine were compiled against: their dependency files
    name it (the engine's, through the clang module of libcurl it imported)."""
    found = sorted(scratch.glob("*/debug/CCurlShim.build/*.d")) + sorted(scratch.glob("*/debug/CourierEngine.build/*.d"))
    if not found:
        return "the shim was not compiled", False
    names = set()
    for path in found:
        names.update(re.findall(r"(\S*/curl/curlver\.h)", path.read_text(errors="replace")))
    if not names:
        return f"{found[0].name} names no curlver.h", False
    resolved = {os.path.realpath(name) for name in names}
    if resolved == {os.path.realpath(expected)}:
        return str(expected), True
    return ", ".join(sorted(names)), False


@dataclass
class Failure:
    test: str
    first: str  # file:line: the first issue's message


@dataclass
class Suite:
    label: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Failure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a crash, a timeout, the wrong libcurl
    libcurl: str = ""  # the libcurl the test bundle loads (ldd)
    seen: set[str] = field(default_factory=set)  # libcurls the run's processes had mapped
    seconds: float | None = None
    swapped: bool = False

    @property
    def cell(self) -> str:
        text = f"{self.passed} passed, {self.failed} failed"
        if self.failed:
            text = f"**{text}**"
        if self.skipped:
            text += f", {self.skipped} skipped"
        if self.swapped:
            text += " (system-built binary)"
        if self.problems:
            text += "; **" + "; ".join(self.problems) + "**"
        return text

    @property
    def bad(self) -> bool:
        return bool(self.failed or self.problems)


# scripts/test's runs after its build: the parallel suite, the service lifecycle tests on
# their own, the HTTP cache test suite, the timing tests one at a time. FreshMachineTests is
# left out: it rebuilds Courier against the system's headers in a namespace and says nothing
# about the libcurl at run time.
FULL_RUNS = [
    ("main", ["--skip", "TimingTests|FreshMachineTests|CacheConformanceSuiteTests|ServiceLifecycleTests"]),
    ("lifecycle", ["--filter", "ServiceLifecycleTests"]),
    ("cache suite", ["--filter", "CacheConformanceSuiteTests"]),
    ("timing", ["--filter", "TimingTests"]),
]


def test(
    scratch: Path, work: Path, *, lib_dir: Path | None, test_filter: str | None, label: str,
    timeout: float, swapped: bool = False,
) -> Suite:
    """The tests built in `scratch`, on the libcurl in `lib_dir` (None: the system's). `work`
    holds the run's XDG_CACHE_HOME, TMPDIR, event streams and logs."""
    suite = Suite(label, swapped=swapped)
    bundle = next(iter(sorted(scratch.glob("debug/*.xctest"))), None)
    if bundle is None:
        suite.problems.append(f"no test bundle in {scratch}/debug")
        return suite
    env = _test_env(scratch, work, lib_dir)
    suite.libcurl, problem = _ldd(bundle, env, lib_dir)
    if problem:
        suite.problems.append(problem)
        return suite
    runs = FULL_RUNS if test_filter is None else [("filtered", ["--filter", test_filter, "--skip", "FreshMachineTests"])]
    total = 0.0
    for name, selection in runs:
        say(f"{label}: swift test {' '.join(selection)}")
        for folder in (env["XDG_CACHE_HOME"], env["TMPDIR"]):
            shutil.rmtree(folder, ignore_errors=True)
            Path(folder).mkdir(parents=True)
        stream = work / f"events-{name.replace(' ', '-')}.jsonl"
        stream.unlink(missing_ok=True)
        argv = [
            "swift", "test", "--skip-build", "--scratch-path", str(scratch), *selection,
            "--experimental-event-stream-output", str(stream), "--experimental-event-stream-version", "0",
        ]
        log = work / f"test-{name.replace(' ', '-')}.log"
        watcher = _MappedLibraries()
        watcher.start()
        try:
            status, seconds = run_logged(argv, log, env=env, timeout=timeout)
        finally:
            watcher.stop()
        total += seconds
        suite.seen |= watcher.seen
        _read_events(stream, suite, status, name, log)
        say(f"{label}: {name}: {suite.passed} passed, {suite.failed} failed so far ({duration(seconds)}; {log})")
    suite.seconds = total
    _check_seen(suite, lib_dir)
    return suite


def _test_env(scratch: Path, work: Path, lib_dir: Path | None) -> dict[str, str]:
    """scripts/test's environment: a cache and a temporary folder of the run's own, at fixed
    and short paths in the scratch folder (emptied before each run): tests put Unix sockets in
    TMPDIR, and a socket's path has at most 107 bytes (they add 64 to TMPDIR's)."""
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(scratch / "mx-cache")
    env["TMPDIR"] = str(scratch / "mx-tmp")
    if len(env["TMPDIR"]) + 64 > 107:
        say(f"warning: TMPDIR {env['TMPDIR']} is too long for the tests' Unix sockets")
    env.pop("LD_LIBRARY_PATH", None)
    if lib_dir:
        env["LD_LIBRARY_PATH"] = str(lib_dir)
        # A test runs the `curl` command a cURL description prints. The system's tool needs
        # the system's libcurl (an older one lacks its symbols), so it runs without
        # LD_LIBRARY_PATH: a machine with that libcurl has a tool of its own version.
        shim = work / "bin"
        shim.mkdir(parents=True, exist_ok=True)
        system_curl = shutil.which("curl") or "/usr/bin/curl"
        (shim / "curl").write_text(f'#!/bin/sh\nunset LD_LIBRARY_PATH\nexec {system_curl} "$@"\n')
        (shim / "curl").chmod(0o755)
        env["PATH"] = f"{shim}:{env.get('PATH', '')}"
    return env


def _ldd(binary: Path, env: dict[str, str], lib_dir: Path | None) -> tuple[str, str]:
    """The libcurl `binary` loads in `env`, and what is wrong with it, if anything."""
    result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env)
    match = re.search(r"libcurl\.so\.4 => (\S+)", result.stdout)
    if not match:
        return "", f"ldd {binary.name} names no libcurl"
    path = os.path.realpath(match[1])
    if "no version information" in result.stderr + result.stdout:
        return path, f"ldd {binary.name}: no version information (the library lacks CURL_OPENSSL_4)"
    if lib_dir and not path.startswith(os.path.realpath(lib_dir) + "/"):
        return path, f"{binary.name} loads {path}, not the one in {lib_dir}"
    return path, ""


class _MappedLibraries:
    """Every two seconds, the libcurl files mapped by the processes of this process's
    children's sessions (run_logged starts each command in a session of its own): the test
    process, its helpers, the CLI. The `curl` tool is left out (it runs the system's library on
    purpose)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        me = os.getpid()
        while not self._stop.wait(2):
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    self._look(entry.name, me)

    def _look(self, pid: str, me: int) -> None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            parent_session = fields[3]  # session id: a session run_logged started has a child of ours as leader
            if not _is_child_session(int(parent_session), me):
                return
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "curl":
                return
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                if "libcurl.so" in line:
                    self.seen.add(os.path.realpath(line.split(None, 5)[-1]))
        except (OSError, ValueError, IndexError):
            return


def _is_child_session(session: int, me: int) -> bool:
    """Whether `session` was started by a child of this process (its leader's parent is us)."""
    if session <= 0:
        return False
    try:
        stat = Path(f"/proc/{session}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[1]) == me
    except (OSError, ValueError, IndexError):
        return False


def _check_seen(suite: Suite, lib_dir: Path | None) -> None:
    expected = os.path.realpath(lib_dir) + "/" if lib_dir else None
    others = {path for path in suite.seen if (expected and not path.startswith(expected))
              or (not expected and path != suite.libcurl)}
    if others:
        suite.problems.append(f"processes of the run mapped {', '.join(sorted(others))}")


def _read_events(stream: Path, suite: Suite, status: int, run: str, log: Path) -> None:
    """Counts from Swift Testing's event stream (ABI version 0): a test function with an issue
    that is not a known one failed; one that ended without passed; a skipped one is skipped."""
    names: dict[str, str] = {}
    functions: set[str] = set()
    started: list[str] = []
    ended: set[str] = set()
    first: dict[str, str] = {}
    finished = False
    try:
        lines = stream.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload", {})
        if record.get("kind") == "test":
            names[payload.get("id", "")] = _display(payload)
            if payload.get("kind") == "function":
                functions.add(payload.get("id", ""))
            continue
        kind, test_id = payload.get("kind"), payload.get("testID", "")
        if kind == "testStarted" and test_id in functions:
            started.append(test_id)
        elif kind == "testEnded" and test_id in functions:
            ended.add(test_id)
        elif kind == "testSkipped" and test_id in functions:
            suite.skipped += 1
        elif kind == "issueRecorded" and not payload.get("issue", {}).get("isKnown"):
            owner = _owning_function(test_id, functions) or test_id or f"({run} run)"
            if owner not in first:
                first[owner] = _issue_text(payload)
        elif kind == "runEnded":
            finished = True
    for test_id, text in first.items():
        suite.failures.append(Failure(names.get(test_id, _display({"id": test_id})), text))
    suite.failures.sort(key=lambda failure: failure.test)
    suite.failed += len(first)
    suite.passed += len([t for t in set(started) if t in ended and t not in first])
    if not lines:
        suite.problems.append(f"{run} run: no test ran (exit {status}): {tail(log, 3)}")
    elif not finished:
        running = [names.get(t, t) for t in started if t not in ended]
        what = "timed out" if status == 124 else f"ended early (exit {status})"
        suite.problems.append(f"{run} run {what}" + (f" in {', '.join(running[:3])}" if running else ""))
    elif status != 0 and not first:
        suite.problems.append(f"{run} run exited {status} with no failed test ({log})")


def _owning_function(test_id: str, functions: set[str]) -> str | None:
    """An issue of a parameterized test's case names the function's ID (or one under it)."""
    for function in functions:
        if test_id == function or test_id.startswith(function + "/"):
            return function
    return None


def _display(payload: dict) -> str:
    """`Suite.function(args:)`, from an ID such as `CourierTests.Suite/function()/File.swift:12:5`."""
    test_id = payload.get("id", "")
    parts = [part for part in test_id.split("/") if not re.fullmatch(r".+\.swift:\d+:\d+", part)]
    if parts:
        parts[0] = parts[0].split(".", 1)[-1]  # the module
    return ".".join(parts) or payload.get("name", test_id)


def _issue_text(payload: dict) -> str:
    location = payload.get("issue", {}).get("sourceLocation", {})
    where = ""
    if location:
        where = f"{Path(location.get('fileID', location.get('_filePath', '?'))).name}:{location.get('line', '?')}: "
    # The expectation and its comment; a source comment Swift Testing attaches is left out,
    # and so is the bare "Issue recorded" of Issue.record(_:) when its message follows.
    messages = [m.get("text", "") for m in payload.get("messages", []) if m.get("text")]
    messages = [text for text in messages if not text.lstrip().startswith("//")]
    if len(messages) > 1 and messages[0] == "Issue recorded":
        messages = messages[1:]
    text = " / ".join(messages[:2]).replace("\n", " ")
    return where + (text[:400] + "…" if len(text) > 400 else text)
