"""Calls per request: how many `malloc`s, `swift_retain`s and `swift_release`s one small GET
costs each client, counted exactly with perf's uprobes. Counts, not samples: a change of a few
per request shows here, where one run's seconds move by 10% from run to run on a busy machine.

Each client runs twice after the timed runs, LOW and then HIGH GETs, under `perf stat`; the
difference divided by HIGH - LOW is the count per request, without what starting the process
costs. The probes are added for the run (`perf probe -x LIBRARY FUNCTION`, which needs root)
and removed after, unless they were there before."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable

LOW, HIGH = 2000, 12000

# (library file name, function): what is counted where the client loads that library.
_PROBED = (("libc.so.6", "malloc"), ("libswiftCore.so", "swift_retain"), ("libswiftCore.so", "swift_release"))


def _libraries(binary: str) -> dict[str, str]:
    """The shared libraries `binary` loads (file name -> path), from ldd."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False).stdout
    except OSError:
        return {}
    return {m.group(1): m.group(2) for m in (re.match(r"\s*(\S+) => (\S+)", line) for line in out.splitlines()) if m}


class CallCounter:
    """Adds the probes the clients need, counts per request, and removes what it added."""

    def __init__(self) -> None:
        self.perf = shutil.which("perf")
        self.added: list[str] = []
        self.events: dict[tuple[str, str], str] = {}  # (library, function) -> perf's event name

    def prepare(self, binaries: list[str]) -> str:
        """Probes for what the binaries load; an empty string, or why nothing can be counted."""
        if self.perf is None:
            return "perf not found (apt-get install linux-perf)"
        paths: dict[str, str] = {}
        for binary in binaries:
            paths.update(_libraries(binary))
        for library, function in _PROBED:
            if library not in paths:
                continue
            # perf names an event probe_<library up to its first dot>:<function>.
            event = f"probe_{library.split('.')[0]}:{function}"
            listed = subprocess.run([self.perf, "probe", "-l", event], capture_output=True, text=True, check=False)
            if event not in listed.stdout:
                added = subprocess.run([self.perf, "probe", "-q", "-x", paths[library], function],
                                       capture_output=True, text=True, check=False)
                if added.returncode != 0:
                    first = (added.stderr.strip().splitlines() or ["no message"])[0]
                    self.close()
                    return f"perf probe -x {paths[library]} {function} failed: {first}"
                self.added.append(event)
            self.events[(library, function)] = event
        return ""

    def count(self, command: Callable[[int], list[str]], env: dict[str, str], binary: str) -> dict[str, float] | None:
        """Per request, by function, for the client that `command(total)` runs; None if a run
        failed or nothing applies to it."""
        loaded = _libraries(binary)
        wanted = {function: event for (library, function), event in self.events.items() if library in loaded}
        if not wanted or self.perf is None:
            return None
        counted: dict[int, dict[str, int]] = {}
        for total in (LOW, HIGH):
            argv = [self.perf, "stat", "-x", ",", "-e", ",".join(wanted.values()), "--", *command(total)]
            done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env}, check=False)
            if done.returncode != 0:
                return None
            counted[total] = {fields[2]: int(fields[0]) for fields in (line.split(",") for line in done.stderr.splitlines())
                              if len(fields) > 2 and fields[0].isdigit()}
        return {function: (counted[HIGH][event] - counted[LOW][event]) / (HIGH - LOW)
                for function, event in wanted.items() if event in counted[LOW] and event in counted[HIGH]}

    def close(self) -> None:
        """Removes the probes this counter added."""
        for event in self.added:
            subprocess.run([self.perf or "perf", "probe", "-q", "-d", event], capture_output=True, check=False)
        self.added = []


def describe(counts: dict[str, dict[str, float]]) -> str:
    """The report's line: each client's calls per request."""
    return "; ".join(f"{client} " + ", ".join(f"{found[f]:.1f} `{f}`" for f in ("malloc", "swift_retain", "swift_release")
                                              if f in found)
                     for client, found in counts.items() if found)
