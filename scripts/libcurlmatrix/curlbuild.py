"""libcurl releases built once each into a cache outside the checkout.

`<cache>/<version>/` is an install prefix holding libcurl's library, headers and libcurl.pc,
and nothing else (no curl tool, no manual; but see HTTP/3 below). Its stamp records the tarball's sha256 and the
configure line; the prefix is built again only when either changes (or on --rebuild). A lock
file per version keeps two runs (two worktrees) from building the same prefix at once.

The HTTP/3 build, `<newest>-http3` (8.21.0-http3), exists when ngtcp2's and nghttp3's
tarballs are there too: the newest curl release with GnuTLS as its TLS library (Debian 12's
OpenSSL 3.0 has no QUIC API; ngtcp2's GnuTLS backend works with its GnuTLS 3.7.9), nghttp3 and
ngtcp2 linked in statically (loading it needs only the system's libraries), and the curl tool
in `<prefix>/bin/curl` (a benchmark compares Courier with the tool on the same library). Its
stamp has the three tarballs' sha256 and the three configure lines.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import ROOT, duration, progress, run_logged, say, tail

TARBALL = re.compile(r"^curl-(\d+)_(\d+)_(\d+)\.tar\.xz$")
# The QUIC libraries of the HTTP/3 build, in the order they are built (ngtcp2 does not need
# nghttp3; curl needs both).
QUIC_TARBALLS = {"nghttp3": re.compile(r"^nghttp3-(\d+\.\d+\.\d+)\.tar\.xz$"),
                 "ngtcp2": re.compile(r"^ngtcp2-(\d+\.\d+\.\d+)\.tar\.xz$")}
# The HTTP/3 build's version: the curl release's, and this.
HTTP3 = "-http3"

# Debian's packages the builds need. Checked with dpkg-query, installed with
# scripts/install-packages when missing (as scripts/bootstrap does for the tests').
BUILD_PACKAGES = [
    "autoconf", "automake", "libtool", "make", "gcc", "pkg-config", "xz-utils", "binutils",
    "libssl-dev", "libnghttp2-dev", "zlib1g-dev", "libbrotli-dev", "libzstd-dev", "libpsl-dev",
    "libidn2-dev", "libkrb5-dev",
]
# And the HTTP/3 build's: GnuTLS and nettle (curl's GnuTLS backend hashes, and NTLM's DES and
# MD4, with nettle). ngtcp2 and nghttp3 built as libraries alone need nothing else.
HTTP3_BUILD_PACKAGES = ["libgnutls28-dev", "nettle-dev"]

DEBIAN_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def configure_options(quic: Path | None = None) -> list[str]:
    """One configure line for every version (an option an older configure does not know is
    only warned about). What changes HTTP behaviour is kept as distributions build it; what
    Courier never uses is left out to keep the build short.

    With `quic`, the prefix nghttp3 and ngtcp2 were installed into: the HTTP/3 build's line,
    the same but for TLS (GnuTLS, the one TLS library here ngtcp2 can use) and HTTP/3."""
    tls, versioned = ["--with-openssl"], "--enable-versioned-symbols"
    if quic:
        tls = ["--without-openssl", "--with-gnutls", f"--with-ngtcp2={quic}", f"--with-nghttp3={quic}"]
        # configure would name the versions after the TLS library (CURL_GNUTLS_4, as Debian's
        # libcurl3-gnutls has); a binary linked here against libcurl4-openssl-dev requires
        # CURL_OPENSSL_4 (curl 8.21's configure takes the prefix as the option's value).
        versioned += "=OPENSSL_"
    options = [
        "--enable-shared", "--disable-static",
        # CURL_OPENSSL_4 symbol versions, as Debian's and Ubuntu's libcurl have: a binary linked
        # on this machine binds to this library, without "no version information" warnings.
        versioned,
        "--disable-dependency-tracking", "--disable-manual", "--disable-docs",
        # What Courier relies on: TLS, HTTP/2, every content coding it advertises (it reads
        # them from curl_version_info), the public suffix list for cookies, IDN hosts.
        *tls, "--with-nghttp2", "--with-zlib", "--with-brotli", "--with-zstd",
        "--with-libpsl", "--with-libidn2",
        # Negotiate (SPNEGO) is part of CURLAUTH_ANY on every distribution's build.
        "--with-gssapi",
        # NTLM (Courier offers it) is opt-in from 8.20.0 (curl's docs/DEPRECATE.md); on by
        # default before, and on in every distribution's build seen.
        "--enable-ntlm",
        # Nothing Courier speaks: other protocols and their libraries. Proxies, cookies, NTLM,
        # alt-svc, the threaded resolver and the rest of HTTP keep their defaults.
        "--without-libssh2", "--without-libssh", "--without-librtmp", "--disable-ldap",
        "--disable-ldaps", "--disable-rtsp", "--disable-dict", "--disable-telnet", "--disable-tftp",
        "--disable-pop3", "--disable-imap", "--disable-smb", "--disable-smtp", "--disable-gopher",
        "--disable-mqtt", "--disable-ftp", "--disable-file",
    ]
    if os.path.exists(DEBIAN_CA_BUNDLE):
        # Debian's built-in trust (its own configure line has both): CURLINFO_CAINFO names it.
        options += [f"--with-ca-bundle={DEBIAN_CA_BUNDLE}", "--with-ca-path=/etc/ssl/certs"]
    return options


def quic_configure(name: str, prefix: Path) -> list[str]:
    """nghttp3's or ngtcp2's configure line: the libraries alone (no examples, no tests' tools),
    static and position-independent, to be linked into libcurl.so, which then needs neither
    at run time."""
    options = [
        "./configure", f"--prefix={prefix}", "--enable-lib-only", "--disable-shared", "--enable-static",
        "--with-pic", "--disable-dependency-tracking",
    ]
    if name == "ngtcp2":
        # Its crypto is GnuTLS's; OpenSSL 3.0 has no QUIC API (configure would only find so).
        options += ["--with-gnutls", "--without-openssl"]
    return options


# curl_version_info() feature bits every build must have (curl/curl.h).
REQUIRED_FEATURES = {
    "SSL": 1 << 2, "libz": 1 << 3, "HTTP2": 1 << 16, "GSS-API": 1 << 17, "PSL": 1 << 20,
    "IDN": 1 << 10, "brotli": 1 << 23, "zstd": 1 << 26, "IPv6": 1 << 0, "AsynchDNS": 1 << 7,
    "NTLM": 1 << 4, "HTTPS-proxy": 1 << 21, "UnixSockets": 1 << 19,
}
# The HTTP/3 build's: the same with GnuTLS (nettle gives NTLM its DES and MD4, and GnuTLS does
# HTTPS proxies), and HTTP/3.
HTTP3_FEATURES = {**REQUIRED_FEATURES, "HTTP3": 1 << 25}

# Run in a process of its own per library: curl_version() and the feature bits and protocols
# of curl_version_info() (its first fields are the same in every version).
PROBE = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
class Info(ctypes.Structure):
    _fields_ = [("age", ctypes.c_int), ("version", ctypes.c_char_p), ("version_num", ctypes.c_uint),
                ("host", ctypes.c_char_p), ("features", ctypes.c_int), ("ssl_version", ctypes.c_char_p),
                ("ssl_version_num", ctypes.c_long), ("libz_version", ctypes.c_char_p),
                ("protocols", ctypes.POINTER(ctypes.c_char_p))]
lib.curl_version_info.restype = ctypes.POINTER(Info)
lib.curl_version.restype = ctypes.c_char_p
info = lib.curl_version_info(0).contents
protocols, i = [], 0
while info.protocols[i]:
    protocols.append(info.protocols[i].decode()); i += 1
print(json.dumps({"text": lib.curl_version().decode(), "version": info.version.decode(),
                  "features": info.features, "protocols": protocols}))
"""


def probe(library: Path) -> dict:
    """What a libcurl says of itself (curl_version, features, protocols)."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(library)], capture_output=True, text=True, env=_clean_env()
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot load {library}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("PKG_CONFIG_PATH", None)
    return env


@dataclass
class Sources:
    """What one prefix is built from: a curl release's tarball, and for the HTTP/3 build
    nghttp3's and ngtcp2's (by name, in QUIC_TARBALLS' order)."""

    curl: Path
    quic: dict[str, Path] = field(default_factory=dict)


def tarballs(sources: Path) -> dict[str, Sources]:
    """The builds the tarballs in `sources` make, by version, oldest first: each curl release,
    and the newest one with HTTP/3 when there are an nghttp3 and an ngtcp2 (the newest of each)."""
    found: dict[str, Sources] = {}
    quic: dict[str, list[tuple[str, Path]]] = {name: [] for name in QUIC_TARBALLS}
    for path in sources.iterdir():
        match = TARBALL.match(path.name)
        if match:
            found[".".join(match.groups())] = Sources(path)
        for name, pattern in QUIC_TARBALLS.items():
            match = pattern.match(path.name)
            if match:
                quic[name].append((match[1], path))
    if found and all(quic.values()):
        newest = max(found, key=version_key)
        newest_quic = {name: max(releases, key=lambda item: version_key(item[0]))[1] for name, releases in quic.items()}
        found[newest + HTTP3] = Sources(found[newest].curl, newest_quic)
    return dict(sorted(found.items(), key=lambda item: version_key(item[0])))


def version_key(version: str) -> tuple[int, ...]:
    """Oldest first; a release's HTTP/3 build right after the release."""
    return (*(int(part) for part in release(version).split(".")), int(is_http3(version)))


def release(version: str) -> str:
    """The curl release a build is of: `8.21.0` for `8.21.0-http3`."""
    return version.removesuffix(HTTP3)


def is_http3(version: str) -> bool:
    return version.endswith(HTTP3)


def system_version() -> str | None:
    """The system's libcurl (pkg-config without PKG_CONFIG_PATH): what `.build` compiles against."""
    result = subprocess.run(
        ["pkg-config", "--modversion", "libcurl"], capture_output=True, text=True, env=_clean_env()
    )
    return result.stdout.strip() if result.returncode == 0 else None


def ensure_packages(packages: list[str]) -> None:
    """Installs the packages dpkg does not list as installed, through scripts/install-packages."""
    if not shutil.which("dpkg-query"):
        return
    missing = []
    for package in packages:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
        ).stdout
        if "install ok installed" not in status:
            missing.append(package)
    if missing:
        say(f"installing {' '.join(missing)} (the libcurl builds need them)")
        # Its output goes where say's does: --build-only keeps stdout for its results.
        subprocess.run([str(ROOT / "scripts" / "install-packages"), *missing], check=True, stdout=progress())


@dataclass
class Build:
    """One libcurl in its prefix: how long building it took, and whether this run built it."""

    version: str
    prefix: Path
    seconds: float | None = None
    cached: bool = False
    description: str = ""
    error: str = ""

    @property
    def lib_dir(self) -> Path:
        return self.prefix / "lib"

    @property
    def pkg_config_dir(self) -> Path:
        return self.prefix / "lib" / "pkgconfig"

    @property
    def cell(self) -> str:
        """The table's curl build column."""
        if self.error:
            return "**failed**"
        return f"cached ({duration(self.seconds)})" if self.cached else duration(self.seconds)


STAMP = "courier-libcurl.json"


@dataclass
class _Part:
    """One tarball a build unpacks, configures, makes and installs."""

    tarball: Path
    configure: list[str]

    def stamp(self) -> dict:
        """What the prefix's stamp records of it."""
        checksum = hashlib.sha256(self.tarball.read_bytes()).hexdigest()
        return {"tarball": self.tarball.name, "sha256": checksum, "configure": self.configure}


def build(version: str, sources: Sources, cache: Path, jobs: int, rebuild: bool = False) -> Build:
    """The prefix of `version` in `cache`, built first unless its stamp matches."""
    cache = cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    prefix, work = cache / version, cache / "work" / version
    # nghttp3 and ngtcp2 are installed next to the sources, in the work folder removed after the
    # build: libcurl.so has them inside.
    quic_prefix = work / "quic" if sources.quic else None
    curl = _Part(sources.curl.resolve(), ["./configure", f"--prefix={prefix}", *configure_options(quic_prefix)])
    quic = [_Part(path.resolve(), quic_configure(name, quic_prefix)) for name, path in sources.quic.items()]
    log = cache / "logs" / f"{version}.log"
    with open(cache / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # The curl tarball's sha256 and configure line at the stamp's top (as before there was
        # an HTTP/3 build: the other prefixes stay valid), the QUIC libraries' under "quic".
        wanted = curl.stamp() | ({"quic": [part.stamp() for part in quic]} if quic else {})
        stamp = _read_stamp(prefix)
        if not rebuild and all(stamp.get(key) == value for key, value in wanted.items()):
            return Build(version, prefix, stamp.get("seconds"), cached=True, description=stamp.get("curl", ""))
        say(f"{version}: building libcurl into {prefix} (log: {log})")
        started = time.monotonic()
        try:
            _build(version, curl, quic, prefix, work, log, jobs)
            info = probe(prefix / "lib" / "libcurl.so.4")
            _check(version, prefix, info)
        except (RuntimeError, subprocess.CalledProcessError) as error:
            shutil.rmtree(prefix, ignore_errors=True)
            return Build(version, prefix, time.monotonic() - started, error=str(error))
        seconds = time.monotonic() - started
        stamp = {
            **wanted, "seconds": round(seconds, 1), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "curl": info["text"], "protocols": info["protocols"],
        }
        # Written last: a prefix without a stamp (a build cut short) is built again.
        (prefix / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        say(f"{version}: built in {duration(seconds)}: {info['text']}")
        return Build(version, prefix, seconds, description=info["text"])


def _read_stamp(prefix: Path) -> dict:
    try:
        return json.loads((prefix / STAMP).read_text())
    except (OSError, ValueError):
        return {}


def _build(version: str, curl: _Part, quic: list[_Part], prefix: Path, work: Path, log: Path, jobs: int) -> None:
    """curl's library into `prefix`; for the HTTP/3 build, nghttp3 and ngtcp2 first (into the
    prefix their configure lines name) and the curl tool after."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(prefix, ignore_errors=True)
    work.mkdir(parents=True)
    append = False

    def step(*argv: str, cwd: Path) -> None:
        nonlocal append
        status, _ = run_logged(argv, log, cwd=cwd, env=_clean_env(), append=append)
        append = True
        if status != 0:
            raise RuntimeError(f"`{shlex.join(argv)[:60]}` failed (exit {status}); {log}:\n{tail(log)}")

    def unpack(part: _Part, name: str) -> Path:
        source = work / name
        source.mkdir()
        step("tar", "-xJf", str(part.tarball), "-C", str(source), "--strip-components=1", cwd=source)
        return source

    for part in quic:
        source = unpack(part, part.tarball.name.removesuffix(".tar.xz"))
        step("autoreconf", "-fi", cwd=source)  # a git archive of a tag, like curl's
        step(*part.configure, cwd=source)
        step("make", f"-j{jobs}", cwd=source)
        step("make", "install", cwd=source)
    source = unpack(curl, "curl")
    _drop_dev_suffix(source / "include" / "curl" / "curlver.h", release(version))
    if not (source / "configure").exists():  # a git archive of a tag: configure is made here
        step("autoreconf", "-fi", cwd=source)
    step(*curl.configure, cwd=source)
    # The library, its headers and libcurl.pc: not the curl tool, the manual, the tests or
    # lib's own second copy for the unit tests (libcurlu.la, which `make -C lib` would build).
    step("make", f"-j{jobs}", "-C", "lib", "libcurl.la", cwd=source)
    step("make", "-C", "lib", "install-libLTLIBRARIES", cwd=source)
    step("make", "-C", "include", "install", cwd=source)
    step("make", "install-pkgconfigDATA", cwd=source)
    if quic:
        # The HTTP/3 build's curl tool too, linked to the library just built: a benchmark
        # compares Courier with it on the same library.
        step("make", f"-j{jobs}", "-C", "src", cwd=source)
        step("make", "-C", "src", "install-binPROGRAMS", cwd=source)
        _unlist_quic(prefix, work)
    shutil.rmtree(work, ignore_errors=True)


def _unlist_quic(prefix: Path, work: Path) -> None:
    """libcurl.pc names nghttp3 and ngtcp2 (Requires.private; Libs.private, with their lib/ in
    `work`), which pkg-config then looks for, --cflags too, and does not find once `work` is
    gone: they are inside libcurl.so, and there is no static libcurl to link them with.
    libcurl.la names them too (dependency_libs): it goes, as Debian ships none."""
    names = ("libnghttp3", "libngtcp2", "libngtcp2_crypto_gnutls")
    flags = {f"-l{name.removeprefix('lib')}" for name in names}
    pc = prefix / "lib" / "pkgconfig" / "libcurl.pc"
    lines = []
    for line in pc.read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Requires.private":
            line = f"{key}: " + ",".join(n.strip() for n in value.split(",") if n.strip() not in names)
        elif key == "Libs.private":
            kept = [word for word in value.split() if word not in flags and not word.startswith(f"-L{work}/")]
            line = f"{key}: " + " ".join(kept)
        lines.append(line)
    pc.write_text("\n".join(lines) + "\n")
    (prefix / "lib" / "libcurl.la").unlink()


def _drop_dev_suffix(header: Path, version: str) -> None:
    """A tag says "X.Y.Z-DEV"; a release (curl's scripts/maketgz) says "X.Y.Z". configure reads
    the version from this header too (libcurl.pc, curl-config)."""
    text = header.read_text()
    released = text.replace(f'"{version}-DEV"', f'"{version}"')
    if f'#define LIBCURL_VERSION "{version}"' not in released:
        raise RuntimeError(f"{header} does not define LIBCURL_VERSION {version}")
    header.write_text(released)


def _check(version: str, prefix: Path, info: dict) -> None:
    """The build is the one asked for: its version, the features Courier relies on (and
    HTTP/3 for the HTTP/3 build), HTTP(S), and the CURL_OPENSSL_4 symbol versions. The
    HTTP/3 build's library needs no nghttp3 or ngtcp2 of its own, and its tool runs on it."""
    library = prefix / "lib" / "libcurl.so.4"
    problems = []
    if info["version"] != release(version):
        problems.append(f"it says it is {info['version']}")
    required = HTTP3_FEATURES if is_http3(version) else REQUIRED_FEATURES
    missing = [name for name, bit in required.items() if not info["features"] & bit]
    if missing:
        problems.append(f"it lacks {', '.join(missing)}")
    if not {"http", "https"} <= set(info["protocols"]):
        problems.append(f"its protocols are {' '.join(info['protocols'])}")
    versions = subprocess.run(["readelf", "--version-info", "-W", str(library)], capture_output=True, text=True)
    if "CURL_OPENSSL_4" not in versions.stdout:
        problems.append("its symbols are not versioned CURL_OPENSSL_4")
    # What compiling Courier against it asks (SwiftPM reads libcurl.pc and what it requires).
    found = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "libcurl"], capture_output=True, text=True,
        env={**_clean_env(), "PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")},
    )
    if found.returncode != 0:
        problems.append(f"pkg-config says: {found.stderr.strip()[:300]}")
    if is_http3(version):
        needed = subprocess.run(["ldd", str(library)], capture_output=True, text=True, env=_clean_env()).stdout
        if re.search(r"libng(tcp2|http3)", needed):
            problems.append("it loads a shared nghttp3 or ngtcp2")
        tool = subprocess.run(
            [str(prefix / "bin" / "curl"), "-V"], capture_output=True, text=True,
            env={**_clean_env(), "LD_LIBRARY_PATH": str(prefix / "lib")},
        )
        first, _, rest = tool.stdout.partition("\n")
        if f" libcurl/{release(version)} " not in first or not re.search(r"^Features:.* HTTP3\b", rest, re.MULTILINE):
            problems.append(f"its curl tool says: {(tool.stdout + tool.stderr).strip()[:300]}")
    if problems:
        raise RuntimeError(f"libcurl {version} built, but " + "; ".join(problems))
