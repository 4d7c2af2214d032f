"""The environment variables of scripts/bench, read and checked once."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .catalog import ALL_ROWS, CLIENTS, ROWS

DEFAULT_CLIENTS = ("c c-nocapath curl courier courier-decode ahc ahc-decode urlsession"
                   " openapi-courier openapi-ahc openapi-urlsession wskit")
BODY_BYTES = 500  # the small file's length


class BenchError(Exception):
    """A reason to stop: logged as `bench: error: ...`, exit status 1."""


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def log_details(lines: list[str]) -> None:
    """Lines under a message (a failed run's last output lines), indented."""
    for line in lines:
        print(f"    {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Settings:
    root: Path
    rows: tuple[str, ...]
    clients: tuple[str, ...]
    clients_given: bool
    runs: int
    total: int
    concurrency: int
    h2_concurrency: int
    new_total: int
    total_10k: int
    system_ca_bundle: Path
    c_loop: str
    warmup_total: int
    run_timeout: str
    count_calls: bool
    skip_build: bool
    baseline_bin: str
    results_dir: Path
    nginx: str
    keep_work: bool
    big_runs: int
    big_warmup: int
    big_bytes: int
    big_dir: Path
    stream_buffer: int
    upload_sink: str
    verify: bool
    sse_events: int
    ws_sockets: int
    ws_rounds: int
    ws_messages: int
    ws_bytes: int
    ws_server_threads: int
    server_cpus: str
    client_cpus: str

    @property
    def bench(self) -> Path:
        return self.root / "Benchmarks"

    def relative(self, path: Path) -> str:
        """`path` relative to the repository when it is inside it (for messages)."""
        try:
            return str(Path(path).relative_to(self.root))
        except ValueError:
            return str(path)


def _uint(env: Mapping[str, str], name: str, default: int, *, positive: bool = True) -> int:
    value = env.get(name) or str(default)
    if not re.fullmatch(r"[0-9]+", value) or (positive and int(value) == 0):
        kind = "a positive" if positive else "a non-negative"
        raise BenchError(f"{name} must be {kind} integer (got '{value}')")
    return int(value)


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, str]) -> str:
    value = env.get(name) or default
    if value not in choices:
        raise BenchError(f"{name} must be {choices[0]} or {choices[1]} (got '{value}')")
    return value


def _rows(env: Mapping[str, str]) -> tuple[str, ...]:
    words = (env.get("ROWS") or "small").replace(",", " ").split()
    if words == ["all"]:
        words = list(ALL_ROWS)
    if not words:
        raise BenchError("ROWS is empty")
    for row in words:
        if row not in ROWS:
            raise BenchError(f"unknown row '{row}' (known: {' '.join(ALL_ROWS)}, or all)")
    return tuple(words)


def _clients(env: Mapping[str, str]) -> tuple[str, ...]:
    words = (env.get("CLIENTS") or DEFAULT_CLIENTS).split()
    if not words:
        raise BenchError("CLIENTS is empty")
    for client in words:
        if client not in CLIENTS:
            raise BenchError(f"unknown client '{client}' (known: {' '.join(CLIENTS)})")
    return tuple(words)


def _cpus(env: Mapping[str, str], name: str) -> str:
    value = env.get(name) or ""
    if value and not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", value):
        raise BenchError(f"{name} must be a CPU list for taskset -c, such as 0 or 2-5,7 (got '{value}')")
    return value


def load_settings(env: Mapping[str, str], root: Path) -> Settings:
    """The settings from `env` (os.environ), with the defaults; BenchError on a bad value."""
    stream_buffer = env.get("STREAM_BUFFER") or "102400"
    if not re.fullmatch(r"[0-9]+", stream_buffer) or not (
        int(stream_buffer) == 0 or 1024 <= int(stream_buffer) <= 524288
    ):
        raise BenchError(f"STREAM_BUFFER must be 0 or 1024 to 524288 (got '{stream_buffer}')")
    settings = Settings(
        root=root,
        rows=_rows(env),
        clients=_clients(env),
        clients_given=bool(env.get("CLIENTS")),
        runs=_uint(env, "RUNS", 5),
        total=_uint(env, "TOTAL", 20000),
        concurrency=_uint(env, "CONCURRENCY", 64),
        h2_concurrency=_uint(env, "H2_CONCURRENCY", 256),
        new_total=_uint(env, "NEW_TOTAL", 1000),
        total_10k=_uint(env, "TOTAL_10K", 10000),
        system_ca_bundle=Path(env.get("SYSTEM_CA_BUNDLE") or "/etc/ssl/certs/ca-certificates.crt"),
        c_loop=_choice(env, "C_LOOP", "poll", ("poll", "socket")),
        warmup_total=_uint(env, "WARMUP_TOTAL", 2000, positive=False),
        run_timeout=env.get("RUN_TIMEOUT") or "300",
        count_calls=(env.get("COUNT_CALLS") or "1") == "1",
        skip_build=env.get("SKIP_BUILD") == "1",
        baseline_bin=env.get("BASELINE_BIN") or "",
        results_dir=Path(env.get("RESULTS_DIR") or root / "Benchmarks" / "results"),
        nginx=env.get("NGINX") or "/usr/sbin/nginx",
        keep_work=env.get("KEEP_WORK") == "1",
        big_runs=_uint(env, "BIG_RUNS", 3),
        big_warmup=_uint(env, "BIG_WARMUP", 1, positive=False),
        big_bytes=_uint(env, "BIG_BYTES", 1073741824),
        big_dir=Path(env.get("BIG_DIR") or "/dev/shm"),
        stream_buffer=int(stream_buffer),
        upload_sink=_choice(env, "UPLOAD_SINK", "file", ("file", "discard")),
        verify=(env.get("VERIFY") or "1") == "1",
        sse_events=_uint(env, "SSE_EVENTS", 100000),
        ws_sockets=_uint(env, "WS_SOCKETS", 64),
        ws_rounds=_uint(env, "WS_ROUNDS", 1000),
        ws_messages=_uint(env, "WS_MESSAGES", 1000),
        ws_bytes=_uint(env, "WS_BYTES", 32),
        ws_server_threads=_uint(env, "WS_SERVER_THREADS", 0, positive=False),
        server_cpus=_cpus(env, "SERVER_CPUS"),
        client_cpus=_cpus(env, "CLIENT_CPUS"),
    )
    if settings.ws_bytes < 16:
        raise BenchError(f"WS_BYTES must be 16 or more (got {settings.ws_bytes})")
    if not os.access(settings.nginx, os.X_OK):
        raise BenchError(f"nginx not found at {settings.nginx} (apt-get install nginx)")
    return settings
