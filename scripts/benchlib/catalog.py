"""What scripts/bench knows: its rows, its clients, and which client takes part in which row."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientSpec:
    """A client: the program it runs and how its command line differs from its siblings'."""

    name: str
    product: str  # the binary of its request rows: multi_get, curl, bench-courier, ...
    flags: tuple[str, ...] = ()  # a Swift client's extra flags (--decode, --fast-monitor, ...)
    loop: str | None = None  # multi_get's loop style; None: C_LOOP
    capath_none: bool = False  # multi_get with CAPATH_NONE=1
    as_courier: bool = False  # multi_get with AS_COURIER=1: libcurl set up as Courier sets it up
    bundle_flag: str = "--ca-file"  # how a Swift client is given the https-new row's bundle

    @property
    def is_c(self) -> bool:
        return self.product == "multi_get"

    @property
    def is_swift(self) -> bool:
        return self.product.startswith("bench-")


# In the order `unknown client` lists them.
CLIENTS: dict[str, ClientSpec] = {
    spec.name: spec
    for spec in (
        ClientSpec("c", "multi_get"),
        ClientSpec("c-poll", "multi_get", loop="poll"),
        ClientSpec("c-socket", "multi_get", loop="socket"),
        ClientSpec("c-nocapath", "multi_get", capath_none=True),
        ClientSpec("c-as-courier", "multi_get", loop="socket", as_courier=True),
        ClientSpec("curl", "curl"),
        ClientSpec("courier", "bench-courier", bundle_flag="--ca-bundle"),
        # The engine alone, no session above it (Benchmarks/EngineOnly, in the Courier package).
        ClientSpec("courier-engine", "bench-engine"),
        # The shape alone: a child task per request, resumed from another thread, no HTTP.
        ClientSpec("floor", "bench-courier", flags=("--floor",)),
        ClientSpec("courier-decode", "bench-courier", flags=("--decode",)),
        ClientSpec("courier-monitor", "bench-courier", flags=("--fast-monitor",)),
        ClientSpec("courier-slow-monitor", "bench-courier", flags=("--slow-monitor",)),
        # The scaling rows: one engine, two, four (engineCount; `courier` is the default).
        ClientSpec("courier-1e", "bench-courier", flags=("--engines", "1"), bundle_flag="--ca-bundle"),
        ClientSpec("courier-2e", "bench-courier", flags=("--engines", "2"), bundle_flag="--ca-bundle"),
        ClientSpec("courier-4e", "bench-courier", flags=("--engines", "4"), bundle_flag="--ca-bundle"),
        ClientSpec("courier-base", "bench-courier-base", bundle_flag="--ca-bundle"),
        ClientSpec("courier-decode-base", "bench-courier-base", flags=("--decode",)),
        ClientSpec("ahc", "bench-ahc"),
        ClientSpec("ahc-decode", "bench-ahc", flags=("--decode",)),
        ClientSpec("urlsession", "bench-urlsession"),
        ClientSpec("urlsession-decode", "bench-urlsession", flags=("--decode",)),
        ClientSpec("openapi-courier", "bench-openapi", flags=("--transport", "courier")),
        ClientSpec("openapi-ahc", "bench-openapi", flags=("--transport", "ahc")),
        ClientSpec("openapi-urlsession", "bench-openapi", flags=("--transport", "urlsession")),
        ClientSpec("wskit", "bench-wskit"),
    )
}


@dataclass(frozen=True)
class RowSpec:
    """A row: its clients (those that can take part), its reference, and its kind."""

    name: str
    clients: tuple[str, ...]
    reference: str
    large: bool = False  # one large transfer per run (else: many small GETs)
    sse: bool = False  # one event stream per run (the sse-decode row)
    ws: bool = False  # WebSockets to bench-wsserver (the ws-echo row)
    h3: bool = False  # over HTTP/3 and HTTP/2 with the HTTP/3 libcurl (the h3 and download-h3 rows)

    def product_for(self, client: ClientSpec) -> str:
        """The program `client` runs in this row."""
        if self.h3 and client.product == "curl":
            return H3_CURL  # the HTTP/3 build's curl tool, not the system's
        return "stream_get" if self.name == "stream-discard" and client.is_c else client.product


H3_CURL = "curl-h3"  # the product name of the HTTP/3 libcurl's curl tool (scripts/benchlib/h3server.py)


_ENGINES = ("courier-1e", "courier-2e", "courier-4e")
_SMALL = (
    "c c-poll c-socket c-as-courier courier courier-engine floor courier-decode ahc ahc-decode urlsession "
    "urlsession-decode courier-monitor courier-slow-monitor courier-base courier-decode-base"
).split() + list(_ENGINES)
_PEERS = ("c", "courier", "ahc", "courier-base") + _ENGINES
_OPENAPI = ("c", "openapi-courier", "openapi-ahc", "openapi-urlsession")

# In the order of ROWS=all.
ROWS: dict[str, RowSpec] = {
    spec.name: spec
    for spec in (
        RowSpec("small", tuple(_SMALL), "c"),
        RowSpec("openapi", _OPENAPI, "c"),
        RowSpec("https", _PEERS, "c"),
        RowSpec("h2", _PEERS, "c"),
        RowSpec("https-new", ("c", "c-nocapath", "courier", "ahc", "courier-base") + _ENGINES, "c-nocapath"),
        RowSpec("h1-10k", _PEERS, "c"),
        RowSpec("h2-10k", _PEERS, "c"),
        RowSpec("download-file", ("curl", "courier"), "curl", large=True),
        RowSpec("stream-discard", ("c", "courier", "ahc"), "c", large=True),
        RowSpec("upload-file", ("curl", "courier"), "curl", large=True),
        RowSpec("multipart-file", ("curl", "courier"), "curl", large=True),
        RowSpec("sse-decode", ("courier", "ahc"), "ahc", sse=True),
        RowSpec("ws-echo", ("courier", "wskit", "courier-base") + _ENGINES, "wskit", ws=True),
        RowSpec("h3", ("curl", "courier"), "curl", h3=True),
        RowSpec("download-h3", ("curl", "courier"), "curl", h3=True),
    )
}
ALL_ROWS = tuple(ROWS)
TLS_ROWS = ("https", "h2", "https-new", "h2-10k")
WIDE_ROWS = ("h1-10k", "h2-10k")  # all requests in flight at once


@dataclass(frozen=True)
class RequestRow:
    """A row of small GETs, with its figures from the settings."""

    name: str
    total: int  # requests per run
    concurrency: int  # requests in flight
    server: str  # the nginx server it uses: plain, tls, close, wide_plain, wide_tls
    trust: str | None  # what the clients trust: None (plain HTTP), "cert" or "bundle"
    http_version: str | None  # asked of the clients and checked on every response
    log_protocol: str | None  # $server_protocol of every logged request; None: not logged
    warmup: int  # requests per client in the warm-up
    wide: bool = False  # the 10k rows: a one-request run before each run, for the RSS per request

    @property
    def reference_candidates(self) -> tuple[str, ...]:
        """The clients the ratios are to, the first that has runs (the limit: C)."""
        return ("c-nocapath", "c") if self.name == "https-new" else ("c", "c-poll", "c-socket")


def request_row(name: str, settings) -> RequestRow:
    """The RequestRow named `name` (small, openapi, https, h2, https-new, h1-10k, h2-10k)."""
    s = settings
    if name in ("small", "openapi"):
        return RequestRow(name, s.total, s.concurrency, "plain", None, None, None, s.warmup_total)
    if name == "https":
        return RequestRow(name, s.total, s.concurrency, "tls", "cert", "1.1", "HTTP/1.1", s.warmup_total)
    if name == "h2":
        return RequestRow(name, s.total, s.h2_concurrency, "tls", "cert", "2", "HTTP/2.0", s.warmup_total)
    if name == "https-new":
        # A handshake per request: a shorter warm-up does.
        warmup = min(s.warmup_total, 200)
        return RequestRow(name, s.new_total, s.concurrency, "close", "bundle", "1.1", "HTTP/1.1", warmup)
    if name == "h1-10k":
        n = s.total_10k
        return RequestRow(name, n, n, "wide_plain", None, None, "HTTP/1.1", s.warmup_total, wide=True)
    if name == "h2-10k":
        n = s.total_10k
        return RequestRow(name, n, n, "wide_tls", "cert", "2", "HTTP/2.0", s.warmup_total, wide=True)
    raise ValueError(f"not a row of small GETs: {name}")
