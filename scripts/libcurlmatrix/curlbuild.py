"""libcurl releases built once each into a cache outside the checkout.

`<cache>/<version>/` is an install prefix holding libcurl's library, headers and libcurl.pc,
and nothing else (no curl tool, no manual). Its stamp records the tarball's sha256 and the
configure line; the prefix is built again only when either changes (or on --rebuild). A lock
file per version keeps two runs (two worktrees) from building the same prefix at once.
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
from dataclasses import dataclass
from pathlib import Path

from .common import ROOT, duration, run_logged, say, tail

TARBALL = re.compile(r"^curl-(\d+)_(\d+)_(\d+)\.tar\.xz$")

# Debian's packages the builds need. Checked with dpkg-query, installed with
# scripts/install-packages when missing (as scripts/bootstrap does for the tests').
BUILD_PACKAGES = [
    "autoconf", "automake", "libtool", "make", "gcc", "pkg-config", "xz-utils", "binutils",
    "libssl-dev", "libnghttp2-dev", "zlib1g-dev", "libbrotli-dev", "libzstd-dev", "libpsl-dev",
    "libidn2-dev", "libkrb5-dev",
]

DEBIAN_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def configure_options() -> list[str]:
    """One configure line for every version (an option an older configure does not know is
    only warned about). What changes HTTP behaviour is kept as distributions build it; what
    Courier never uses is left out to keep the build short."""
    options = [
        "--enable-shared", "--disable-static",
        # CURL_OPENSSL_4 symbol versions, as Debian's and Ubuntu's libcurl have: a binary linked
        # on this machine binds to this library, without "no version information" warnings.
        "--enable-versioned-symbols",
        "--disable-dependency-tracking", "--disable-manual", "--disable-docs",
        # What Courier relies on: TLS, HTTP/2, every content coding it advertises (it reads
        # them from curl_version_info), the public suffix list for cookies, IDN hosts.
        "--with-openssl", "--with-nghttp2", "--with-zlib", "--with-brotli", "--with-zstd",
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


# curl_version_info() feature bits every build must have (curl/curl.h).
REQUIRED_FEATURES = {
    "SSL": 1 << 2, "libz": 1 << 3, "HTTP2": 1 << 16, "GSS-API": 1 << 17, "PSL": 1 << 20,
    "IDN": 1 << 10, "brotli": 1 << 23, "zstd": 1 << 26, "IPv6": 1 << 0, "AsynchDNS": 1 << 7,
    "NTLM": 1 << 4, "HTTPS-proxy": 1 << 21, "UnixSockets": 1 << 19,
}

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


def tarballs(sources: Path) -> dict[str, Path]:
    """The release tarballs in `sources`, by version, oldest first."""
    found = {}
    for path in sources.iterdir():
        match = TARBALL.match(path.name)
        if match:
            found[".".join(match.groups())] = path
    return dict(sorted(found.items(), key=lambda item: version_key(item[0])))


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


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
        subprocess.run([str(ROOT / "scripts" / "install-packages"), *missing], check=True)


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


def build(version: str, tarball: Path, cache: Path, jobs: int, rebuild: bool = False) -> Build:
    """The prefix of `version` in `cache`, built first unless its stamp matches."""
    cache, tarball = cache.resolve(), tarball.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    prefix = cache / version
    with open(cache / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        checksum = hashlib.sha256(tarball.read_bytes()).hexdigest()
        configure = ["./configure", f"--prefix={prefix}", *configure_options()]
        stamp = _read_stamp(prefix)
        if not rebuild and stamp.get("sha256") == checksum and stamp.get("configure") == configure:
            return Build(version, prefix, stamp.get("seconds"), cached=True, description=stamp.get("curl", ""))
        say(f"{version}: building libcurl into {prefix} (log: {cache / 'logs' / (version + '.log')})")
        started = time.monotonic()
        try:
            _build(version, tarball, prefix, cache, configure, jobs)
            library = prefix / "lib" / "libcurl.so.4"
            info = probe(library)
            _check(version, library, info)
        except (RuntimeError, subprocess.CalledProcessError) as error:
            shutil.rmtree(prefix, ignore_errors=True)
            return Build(version, prefix, time.monotonic() - started, error=str(error))
        seconds = time.monotonic() - started
        stamp = {
            "tarball": tarball.name, "sha256": checksum, "configure": configure, "seconds": round(seconds, 1),
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "curl": info["text"],
            "protocols": info["protocols"],
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


def _build(version: str, tarball: Path, prefix: Path, cache: Path, configure: list[str], jobs: int) -> None:
    log = cache / "logs" / f"{version}.log"
    work = cache / "work" / version
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

    step("tar", "-xJf", str(tarball), "-C", str(work), "--strip-components=1", cwd=work)
    _drop_dev_suffix(work / "include" / "curl" / "curlver.h", version)
    if not (work / "configure").exists():  # a git archive of a tag: configure is made here
        step("autoreconf", "-fi", cwd=work)
    step(*configure, cwd=work)
    # The library, its headers and libcurl.pc: not the curl tool, the manual, the tests or
    # lib's own second copy for the unit tests (libcurlu.la, which `make -C lib` would build).
    step("make", f"-j{jobs}", "-C", "lib", "libcurl.la", cwd=work)
    step("make", "-C", "lib", "install-libLTLIBRARIES", cwd=work)
    step("make", "-C", "include", "install", cwd=work)
    step("make", "install-pkgconfigDATA", cwd=work)
    shutil.rmtree(work, ignore_errors=True)


def _drop_dev_suffix(header: Path, version: str) -> None:
    """A tag says "X.Y.Z-DEV"; a release (curl's scripts/maketgz) says "X.Y.Z". configure reads
    the version from this header too (libcurl.pc, curl-config)."""
    text = header.read_text()
    released = text.replace(f'"{version}-DEV"', f'"{version}"')
    if f'#define LIBCURL_VERSION "{version}"' not in released:
        raise RuntimeError(f"{header} does not define LIBCURL_VERSION {version}")
    header.write_text(released)


def _check(version: str, library: Path, info: dict) -> None:
    """The build is the one asked for: its version, the features Courier relies on, HTTP(S),
    and the CURL_OPENSSL_4 symbol versions."""
    problems = []
    if info["version"] != version:
        problems.append(f"it says it is {info['version']}")
    missing = [name for name, bit in REQUIRED_FEATURES.items() if not info["features"] & bit]
    if missing:
        problems.append(f"it lacks {', '.join(missing)}")
    if not {"http", "https"} <= set(info["protocols"]):
        problems.append(f"its protocols are {' '.join(info['protocols'])}")
    versions = subprocess.run(["readelf", "--version-info", "-W", str(library)], capture_output=True, text=True)
    if "CURL_OPENSSL_4" not in versions.stdout:
        problems.append("its symbols are not versioned CURL_OPENSSL_4")
    if problems:
        raise RuntimeError(f"libcurl {version} built, but " + "; ".join(problems))
