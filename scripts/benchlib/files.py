"""The files the server serves and the clients trust: small.json, the large fixture, the
certificate and the CA bundle."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

from .settings import BenchError

# The certificate's openssl configuration is the test peers' (Tests/Support/peerlib.py):
# one definition of what the local servers present.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Tests" / "Support"))
import peerlib  # noqa: E402


def write_small_json(path: Path, size: int) -> None:
    """A deterministic JSON object of exactly `size` bytes; its shape is `Small` in
    Benchmarks/Sources/BenchSupport."""
    value = {
        "id": 1,
        "name": "courier-benchmark",
        "active": True,
        "score": 98.5,
        "tags": ["swift", "libcurl", "http", "json"],
        "owner": {"id": 42, "login": "courier"},
        "created": "2024-01-01T00:00:00Z",
        "padding": "",
    }
    base = len(json.dumps(value, separators=(",", ":")).encode())
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    value["padding"] = "".join(alphabet[i % len(alphabet)] for i in range(size - base))
    data = json.dumps(value, separators=(",", ":")).encode()
    assert len(data) == size, len(data)
    json.loads(data)
    path.write_bytes(data)


def write_fixture(path: Path, size: int) -> None:
    """`size` bytes of AES-128-CTR keystream under a fixed key: deterministic and
    incompressible (without openssl: Python's seeded generator, 1 MiB per seed)."""
    with open(path, "wb") as out:
        if shutil.which("openssl"):
            command = ["openssl", "enc", "-aes-128-ctr", "-nosalt", "-K", "000102030405060708090a0b0c0d0e0f",
                       "-iv", "00000000000000000000000000000000", "-in", "/dev/zero"]
            with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as keystream:
                left = size
                while left > 0:
                    chunk = keystream.stdout.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    out.write(chunk)
                    left -= len(chunk)
                keystream.kill()
        else:
            left, block = size, 0
            while left > 0:
                n = min(left, 1 << 20)
                out.write(random.Random(block).randbytes(n))
                left -= n
                block += 1
    if path.stat().st_size != size:
        raise BenchError(f"could not write the fixture {path}")




def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed (so its own CA) ECDSA P-256 certificate for 127.0.0.1 and localhost, as
    the test peers make it (Tests/Support/peerlib.py); returns (certificate, key)."""
    if not shutil.which("openssl"):
        raise BenchError("the https and h2 rows need the openssl command line tool")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "openssl.cnf").write_text(peerlib.LOCALHOST_OPENSSL_CONFIG)
    cert, key = directory / "cert.pem", directory / "key.pem"
    command = ["openssl", "req", "-x509", "-config", str(directory / "openssl.cnf"), "-newkey", "ec",
               "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out", str(cert),
               "-days", "30", "-sha256"]
    with open(directory / "openssl.log", "wb") as out:
        status = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT).returncode
    if status != 0:
        detail = " ".join((directory / "openssl.log").read_text(errors="replace").splitlines()[-3:])
        raise BenchError(f"openssl could not make the certificate: {detail}")
    return cert, key


def make_bundle(system_bundle: Path, cert: Path, bundle: Path) -> int:
    """The https-new row's bundle: the system's, with the bench certificate appended; returns
    how many certificates it holds."""
    try:
        data = system_bundle.read_bytes() + cert.read_bytes()
    except OSError:
        raise BenchError(
            f"the https-new row needs SYSTEM_CA_BUNDLE ({system_bundle}; apt-get install ca-certificates)"
        ) from None
    bundle.write_bytes(data)
    return count_certificates(bundle)


def count_certificates(bundle: Path) -> int:
    return sum(1 for line in bundle.read_text(errors="replace").splitlines() if "BEGIN CERTIFICATE" in line)


def files_equal(a: Path, b: Path) -> bool:
    """Whether two files have the same bytes (cmp -s)."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True
