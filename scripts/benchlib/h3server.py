"""The HTTP/3 rows' tools: the HTTP/3 libcurl (and its curl tool), and an HTTP/3 server,
ngtcp2's example server over GnuTLS (`gtlsserver`), built once from the same tarballs.

The libcurl is scripts/libcurl-matrix's HTTP/3 build (`<newest curl>-http3`: curl with ngtcp2
and nghttp3 on GnuTLS, the curl tool in `<prefix>/bin/curl`), found in its cache or built by
`scripts/libcurl-matrix --build-only`.

The server: ngtcp2's examples/gtlsserver, built from ../shared/third-party's ngtcp2 and
nghttp3 tarballs (the ones the libcurl has inside) into a cache of its own,
`${COURIER_H3SERVER_CACHE:-~/.cache/courier/h3server}/ngtcp2-X.Y.Z+nghttp3-X.Y.Z/bin/gtlsserver`,
with a stamp of the tarballs' sha256, the configure lines and the compatibility header
below; built again only when the stamp differs. nghttp3 and ngtcp2 are linked in statically;
the binary needs libev, GnuTLS and libstdc++ at run time.

ngtcp2's examples are C++23, using the library of it (std::println, std::format's
std::formatter, std::ranges::to): Debian 12's g++ 12 and its libstdc++ have neither <print>
nor <format>. So the examples are compiled by a clang++ that speaks C++23 (the Swift
toolchain's) against libstdc++ 12, with a <print> of our own (COMPAT_PRINT: std::print and
std::println over {fmt}, header-only, Debian's libfmt-dev; std::ranges::to<C>() as a pipe),
and their two `std::formatter<T>` specializations rewritten as `fmt::formatter<T>` (sed).
The server's code is otherwise ngtcp2's own.

The server is one thread (a libev loop; one UDP socket, GSO on), serves files from -d DIR
(each file mmapped once and kept), answers HTTP/3 only. Run as
`gtlsserver -q -d DIR --max-streams-bidi=128 127.0.0.1 PORT KEY CERT`: -q, no logging;
128 streams a client may open at once, as nginx's http2_max_concurrent_streams allows on an
HTTP/2 connection.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .settings import log

# scripts/ is on sys.path (scripts/bench puts it there): the libcurl matrix's tarball rules.
from libcurlmatrix import curlbuild  # noqa: E402

# Debian's packages the server's build needs (checked with dpkg-query, installed through
# scripts/install-packages, as the libcurl matrix installs its own).
BUILD_PACKAGES = ["autoconf", "automake", "libtool", "make", "pkg-config", "xz-utils", "libgnutls28-dev",
                  "libev-dev", "libfmt-dev"]
STAMP = "courier-h3server.json"
SERVER_STREAMS = 128  # --max-streams-bidi: nginx's http2_max_concurrent_streams

COMPAT_PRINT = r"""// <print> for a libstdc++ without it (GCC 12's), written by scripts/benchlib/h3server.py:
// std::print and std::println over {fmt} (header-only), and std::ranges::to<C>() as a pipe:
// what ngtcp2's example server uses of C++23's library that libstdc++ 12 lacks.
#pragma once
#ifndef FMT_HEADER_ONLY
#define FMT_HEADER_ONLY 1
#endif
#include <fmt/format.h>
#include <cstdio>
#include <ranges>
#include <string>
#include <utility>

namespace std {
template <class... A> inline void print(FILE *f, fmt::format_string<A...> s, A &&...a) {
  fmt::print(f, s, std::forward<A>(a)...);
}
template <class... A> inline void print(fmt::format_string<A...> s, A &&...a) {
  fmt::print(stdout, s, std::forward<A>(a)...);
}
template <class... A> inline void println(FILE *f, fmt::format_string<A...> s, A &&...a) {
  auto text = fmt::format(s, std::forward<A>(a)...);
  text += '\n';
  fwrite(text.data(), 1, text.size(), f);
}
template <class... A> inline void println(fmt::format_string<A...> s, A &&...a) {
  std::println(stdout, s, std::forward<A>(a)...);
}
inline void println(FILE *f) { fputc('\n', f); }
namespace ranges {
template <template <class...> class C> struct __compat_to {};
template <template <class...> class C> constexpr __compat_to<C> to() { return {}; }
template <class R, template <class...> class C>
  requires std::ranges::input_range<R>
auto operator|(R &&r, __compat_to<C>) {
  C<std::ranges::range_value_t<R>> out;
  for (auto &&x : r) out.push_back(std::forward<decltype(x)>(x));
  return out;
}
} // namespace ranges
} // namespace std
"""
# The one change to ngtcp2's sources: its std::formatter specializations become {fmt}'s.
SED_FORMATTER = "s/std::formatter</fmt::formatter</g"

CXX23_PROBE = """#include <expected>
#include <ranges>
#include <span>
struct S { int f(this S const &self) { return 0; } };
int main() { std::expected<int, int> e{1}; return *e - 1 + S{}.f(); }
"""


class H3Unavailable(Exception):
    """Why the HTTP/3 rows cannot run here (they are skipped, with this)."""


@dataclass(frozen=True)
class H3Tools:
    """What the HTTP/3 rows run: the libcurl's prefix, its curl tool, and the server."""

    version: str  # 8.21.0-http3
    prefix: Path
    curl: Path
    description: str  # libcurl/8.21.0 GnuTLS/3.7.9 ... ngtcp2/1.23.0 nghttp3/1.16.0
    server: Path
    server_name: str  # ngtcp2-1.23.0+nghttp3-1.16.0
    server_built: str  # "built in 2m31s" or "cached"

    @property
    def lib(self) -> Path:
        return self.prefix / "lib"

    def env(self) -> dict[str, str]:
        """Every client of the HTTP/3 rows loads the HTTP/3 libcurl."""
        return {"LD_LIBRARY_PATH": str(self.lib)}

    def loads_it(self, binary: str) -> bool:
        """Whether `binary` run with env() binds libcurl.so.4 from the prefix (ldd)."""
        result = subprocess.run(["ldd", binary], capture_output=True, text=True, env={**os.environ, **self.env()})
        lines = [line for line in result.stdout.splitlines() if "libcurl.so" in line]
        return bool(lines) and all(str(self.lib) in line for line in lines)


def third_party(root: Path) -> Path:
    return root.parent / "shared" / "third-party"


def http3_sources(root: Path) -> tuple[str, curlbuild.Sources]:
    """The HTTP/3 build's version and tarballs, from ../shared/third-party."""
    sources = third_party(root)
    if not sources.is_dir():
        raise H3Unavailable(f"no {sources} (the curl, ngtcp2 and nghttp3 tarballs)")
    builds = {v: src for v, src in curlbuild.tarballs(sources).items() if curlbuild.is_http3(v)}
    if not builds:
        raise H3Unavailable(f"{sources} has no curl, ngtcp2 and nghttp3 tarballs for an HTTP/3 build")
    version = max(builds, key=curlbuild.version_key)
    return version, builds[version]


def find_libcurl(root: Path, version: str, work: Path) -> Path:
    """The HTTP/3 libcurl's prefix, through `scripts/libcurl-matrix --build-only` (at once when
    it is in the cache; a build of about five minutes otherwise)."""
    logfile = work / "libcurl-matrix.log"
    log(f"h3: the HTTP/3 libcurl ({version}): scripts/libcurl-matrix --build-only --versions {version}"
        f" (log: {logfile})")
    with open(logfile, "wb") as err:
        result = subprocess.run([str(root / "scripts" / "libcurl-matrix"), "--build-only", "--versions", version],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    prefixes = [line.split()[1] for line in result.stdout.splitlines() if line.split()[:1] == [version]]
    if result.returncode != 0 or not prefixes:
        tail = " ".join(logfile.read_text(errors="replace").splitlines()[-3:])
        raise H3Unavailable(f"scripts/libcurl-matrix could not build {version} (exit {result.returncode}): {tail}")
    prefix = Path(prefixes[0])
    if not os.access(prefix / "bin" / "curl", os.X_OK):
        raise H3Unavailable(f"{prefix} has no bin/curl")
    return prefix


def _cxx23() -> str:
    """A C++ compiler that takes -std=c++23 (language and <expected>): H3SERVER_CXX, else the
    clang++ on PATH (the Swift toolchain's), else g++."""
    candidates = [os.environ.get("H3SERVER_CXX") or "", shutil.which("clang++") or "", "/opt/swift/usr/bin/clang++",
                  shutil.which("g++") or ""]
    with tempfile.TemporaryDirectory(prefix="h3server-cxx.") as tmp:
        source = Path(tmp) / "probe.cc"
        source.write_text(CXX23_PROBE)
        for cxx in dict.fromkeys(c for c in candidates if c and os.access(c, os.X_OK)):
            ok = subprocess.run([cxx, "-std=c++23", "-o", str(Path(tmp) / "probe"), str(source)],
                                capture_output=True).returncode == 0
            if ok:
                return cxx
    raise H3Unavailable("no C++23 compiler for ngtcp2's examples (clang++ 17 or newer: the Swift toolchain's,"
                        " or H3SERVER_CXX)")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(argv: list[str], cwd: Path, logfile: Path, env: dict[str, str] | None = None) -> None:
    with open(logfile, "ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        status = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env).returncode
    if status != 0:
        tail = " | ".join(logfile.read_text(errors="replace").splitlines()[-4:])
        raise H3Unavailable(f"`{' '.join(argv)[:80]}` failed (exit {status}; {logfile}): {tail}")


def build_server(sources: curlbuild.Sources, cache: Path | None = None,
                 jobs: int | None = None) -> tuple[Path, str, str]:
    """gtlsserver, built unless its stamp matches: (binary, name, "cached" or "built in Ns")."""
    try:
        nghttp3, ngtcp2 = sources.quic["nghttp3"], sources.quic["ngtcp2"]
    except KeyError:
        raise H3Unavailable("no ngtcp2 and nghttp3 tarballs") from None
    cache = (cache or Path(os.environ.get("COURIER_H3SERVER_CACHE")
                           or Path.home() / ".cache" / "courier" / "h3server")).resolve()
    name = f"{ngtcp2.name.removesuffix('.tar.xz')}+{nghttp3.name.removesuffix('.tar.xz')}"
    prefix, work = cache / name, cache / "work" / name
    binary = prefix / "bin" / "gtlsserver"
    quic = work / "quic"
    nghttp3_configure = ["./configure", f"--prefix={quic}", "--enable-lib-only", "--disable-shared",
                         "--enable-static", "--with-pic", "--disable-dependency-tracking"]
    ngtcp2_configure = ["./configure", "--disable-shared", "--enable-static", "--disable-dependency-tracking",
                        "--with-gnutls", "--without-openssl", "--with-libev", "--with-libnghttp3",
                        "--without-jemalloc", "--without-libbrotlienc", "--without-libbrotlidec"]
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "logs").mkdir(exist_ok=True)
    logfile = cache / "logs" / f"{name}.log"
    with open(cache / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = {
            "nghttp3": {"tarball": nghttp3.name, "sha256": _sha256(nghttp3), "configure": nghttp3_configure},
            "ngtcp2": {"tarball": ngtcp2.name, "sha256": _sha256(ngtcp2), "configure": ngtcp2_configure,
                       "patch": SED_FORMATTER},
            "compat_print_sha256": hashlib.sha256(COMPAT_PRINT.encode()).hexdigest(),
        }
        try:
            stamp = json.loads((prefix / STAMP).read_text())
        except (OSError, ValueError):
            stamp = {}
        if os.access(binary, os.X_OK) and all(stamp.get(k) == v for k, v in wanted.items()):
            return binary, name, "cached"
        curlbuild.ensure_packages(BUILD_PACKAGES)
        cxx = _cxx23()
        log(f"h3: building ngtcp2's gtlsserver ({name}, {cxx}) into {prefix} (log: {logfile})")
        started = time.monotonic()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(prefix, ignore_errors=True)
        work.mkdir(parents=True)
        logfile.write_text("")
        jobs = str(jobs or os.cpu_count() or 2)
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
        for tarball in (nghttp3, ngtcp2):
            _run(["tar", "xf", str(tarball), "-C", str(work)], work, logfile)
        src3 = work / nghttp3.name.removesuffix(".tar.xz")
        src2 = work / ngtcp2.name.removesuffix(".tar.xz")
        _run(["autoreconf", "-fi"], src3, logfile, env)
        _run(nghttp3_configure, src3, logfile, env)
        _run(["make", f"-j{jobs}"], src3, logfile, env)
        _run(["make", "install"], src3, logfile, env)
        shim = work / "compat"
        shim.mkdir()
        (shim / "print").write_text(COMPAT_PRINT)
        examples = src2 / "examples"
        patched = sorted(str(p.relative_to(src2)) for p in [*examples.glob("*.h"), *examples.glob("*.cc")])
        _run(["sed", "-i", SED_FORMATTER, *patched], src2, logfile, env)
        _run(["autoreconf", "-fi"], src2, logfile, env)
        env2 = {**env, "PKG_CONFIG_PATH": str(quic / "lib" / "pkgconfig")}
        _run([*ngtcp2_configure, f"CXX={cxx}", f"CXXFLAGS=-O2 -isystem {shim}", "CFLAGS=-O2"], src2, logfile, env2)
        if "Examples:         yes" not in logfile.read_text(errors="replace"):
            raise H3Unavailable(f"ngtcp2's configure leaves the examples out (see {logfile})")
        for directory in ("lib", "crypto", "third-party"):
            _run(["make", f"-j{jobs}", "-C", directory], src2, logfile, env2)
        _run(["make", f"-j{jobs}", "-C", "examples", "gtlsserver"], src2, logfile, env2)
        (prefix / "bin").mkdir(parents=True)
        shutil.copy2(examples / "gtlsserver", binary)
        seconds = time.monotonic() - started
        stamp = {**wanted, "cxx": cxx, "seconds": round(seconds, 1),
                 "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (prefix / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")  # last: a cut build has none
        shutil.rmtree(work, ignore_errors=True)
        log(f"h3: gtlsserver built in {seconds:.0f} s")
        return binary, name, f"built in {seconds:.0f} s"


def prepare(root: Path, work: Path) -> H3Tools:
    """The libcurl and the server; H3Unavailable (the rows are skipped) when either cannot be
    had."""
    version, sources = http3_sources(root)
    prefix = find_libcurl(root, version, work)
    try:
        description = json.loads((prefix / "courier-libcurl.json").read_text()).get("curl", version)
    except (OSError, ValueError):
        description = version
    server, name, built = build_server(sources)
    return H3Tools(version, prefix, prefix / "bin" / "curl", description, server, name, built)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class H3Server:
    """gtlsserver on a free loopback UDP port, serving `docroot`; stopped on exit."""

    def __init__(self, tools: H3Tools, docroot: Path, cert: Path, key: Path, work: Path, cpus: str = ""):
        self.tools = tools
        self.docroot = docroot
        self.cert = cert
        self.key = key
        self.work = work
        self.cpus = cpus
        self.process: subprocess.Popen | None = None
        self.port = 0

    def argv(self, port: int) -> list[str]:
        return [*(["taskset", "-c", self.cpus] if self.cpus else []), str(self.tools.server), "-q",
                "-d", str(self.docroot), f"--max-streams-bidi={SERVER_STREAMS}", "127.0.0.1", str(port),
                str(self.key), str(self.cert)]

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}/{path}"

    def start(self, probe_path: str, probe_bytes: int) -> None:
        """Started and answering GET /probe_path over HTTP/3 (the curl tool) with its bytes."""
        logs = self.work / "h3server.log"
        for attempt in range(1, 6):
            port = free_udp_port()
            with open(logs, "ab") as out:
                self.process = subprocess.Popen(self.argv(port), stdout=out, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)
            self.port = port
            for _ in range(30):
                if self.process.poll() is not None:
                    break
                if self._ready(probe_path, probe_bytes):
                    return
                time.sleep(0.2)
            log(f"h3: gtlsserver did not answer on UDP port {port} (attempt {attempt}): "
                + " | ".join(logs.read_text(errors="replace").splitlines()[-3:]))
            self.stop()
        raise H3Unavailable("gtlsserver did not start")

    def _ready(self, path: str, size: int) -> bool:
        result = subprocess.run(
            [str(self.tools.curl), "-sS", "--http3-only", "--cacert", str(self.cert), "-o", "/dev/null",
             "--max-time", "3", "-w", "%{http_code} %{size_download} %{http_version}", self.url(path)],
            capture_output=True, text=True, env={**os.environ, **self.tools.env()})
        return result.stdout.split() == ["200", str(size), "3"]

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def ticks(self) -> int:
        """CPU ticks (user + system) of the server so far (the process under taskset: exec'd)."""
        if not self.process:
            return 0
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except OSError:
            return 0
        fields = stat.rsplit(") ", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def wait_until_idle(self) -> None:
        """Until the server used no CPU for 200 ms (at most 5 s)."""
        for _ in range(25):
            before = self.ticks()
            time.sleep(0.2)
            if self.ticks() == before:
                return

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def main(argv: list[str]) -> int:
    """scripts/h3server: build (or find) gtlsserver and print its path; with --libcurl, also
    find (or build) the HTTP/3 libcurl and print `<version> <prefix>` first."""
    from libcurlmatrix.common import progress_to_stderr

    progress_to_stderr()  # stdout: the paths alone
    root = Path(__file__).resolve().parents[2]
    try:
        if "--libcurl" in argv:
            version, sources = http3_sources(root)
            with tempfile.TemporaryDirectory(prefix="h3server.") as tmp:
                print(version, find_libcurl(root, version, Path(tmp)), flush=True)
        else:
            _, sources = http3_sources(root)
        binary, _, _ = build_server(sources)
    except H3Unavailable as why:
        log(f"h3server: {why}")
        return 1
    print(binary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
