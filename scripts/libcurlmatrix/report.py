"""The matrix as markdown: one row per libcurl, then the compile errors and the failing tests
with their first failure line, the builds, and the logs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .common import duration
from .curlbuild import Build
from .swiftrun import Compile, Suite


@dataclass
class Row:
    version: str
    system: bool = False
    build: Build | None = None
    compile: Compile | None = None
    suite: Suite | None = None
    steps: tuple[str, ...] = ()  # "compile", "test" (on its own build), "swap" (on the system's)

    @property
    def label(self) -> str:
        return f"{self.version} (system)" if self.system else self.version

    @property
    def bad(self) -> bool:
        return bool(
            (self.build and self.build.error) or (self.compile and self.compile.failed) or (self.suite and self.suite.bad)
        )


def _names(suite: Suite | None) -> str:
    if not suite or not suite.failures:
        return "–"
    return ", ".join(f"`{failure.test}`" for failure in suite.failures)


def render(rows: list[Row], *, command: str, revision: str, when: str, wall: float, work: Path) -> str:
    out = [
        f"`{command}` at {revision}, {when}: {duration(wall)} in all.",
        "",
        "| libcurl | compiles | suite | failing tests | curl build | compile | tests |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        curl_build = "system" if row.system else (row.build.cell if row.build else "–")
        out.append(
            f"| {row.label} | {row.compile.cell if row.compile else '–'} | {row.suite.cell if row.suite else '–'} "
            f"| {_names(row.suite)} | {curl_build} | {duration(row.compile.seconds) if row.compile else '–'} "
            f"| {duration(row.suite.seconds) if row.suite else '–'} |"
        )
    errors = [row for row in rows if row.compile and (row.compile.errors or row.compile.warnings or row.compile.harmless)]
    if errors:
        out += ["", "Compile errors and warnings (besides SwiftPM's one about swift-distributed-tracing):", ""]
        for row in errors:
            for line in row.compile.errors + row.compile.warnings:
                out.append(f"- {row.label}: `{line}`")
            for line in row.compile.harmless:
                out.append(f"- {row.label}: `{line}` (harmless: libcurl.pc's Requires.private, dropped by SwiftPM)")
    failures = [(row, failure) for row in rows if row.suite for failure in row.suite.failures]
    if failures:
        out += ["", "| libcurl | failing test | first failure |", "| --- | --- | --- |"]
        for row, failure in failures:
            first = failure.first.replace("|", "\\|")
            out.append(f"| {row.label} | `{failure.test}` | {first} |")
    out += ["", "Libraries:", ""]
    for row in rows:
        if row.build and row.build.error:
            out.append(f"- {row.label}: the build failed: {row.build.error.splitlines()[0]}")
            continue
        facts = []
        if row.build and row.build.description:
            facts.append(row.build.description)
        if row.compile:
            facts.append(f"compiled against {row.compile.headers} in `{row.compile.scratch.name}`")
        if row.suite and row.suite.libcurl:
            facts.append(f"tests loaded {row.suite.libcurl}")
        if facts:
            out.append(f"- {row.label}: " + "; ".join(facts))
    out += ["", f"Logs: `{work}`."]
    return "\n".join(out) + "\n"


def verdict(rows: list[Row]) -> str:
    """One line for the end of the output, which is what a CI log's tail shows: every bad row
    and why (a build, a compile, failing tests with their first failure, or a run's problem)."""
    bad = []
    for row in rows:
        reasons = []
        if row.build and row.build.error:
            reasons.append("the libcurl build failed: " + row.build.error.splitlines()[0])
        if row.compile and row.compile.failed:
            reasons.append("the compile failed: " + "; ".join((row.compile.errors + row.compile.warnings)[:2]))
        if row.suite:
            reasons += [f"{failure.test} failed: {failure.first}" for failure in row.suite.failures[:3]]
            reasons += row.suite.problems[:2]
        if reasons:
            bad.append(f"{row.label}: " + " | ".join(reasons))
    return "libcurl-matrix: every row passed" if not bad else "libcurl-matrix: FAILED: " + " || ".join(bad)
