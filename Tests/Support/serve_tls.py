#!/usr/bin/env python3
"""Run nginx with a throwaway PKI on free loopback ports for Courier's TLS tests.

Usage:  python3 serve_tls.py [--parent-pid PID] [--nginx PATH]

Everything lives in a fresh temporary directory: two root CAs, server
certificates that are valid, rotated (same CA and names, new key), expired,
for the wrong host and from the other CA, a client certificate (PEM, an
encrypted PEM key and PKCS#12), libcurl public-key pins, a small document
root, nginx's config and its runtime files.  nginx then serves the root on
127.0.0.1 from one server per scenario (see SERVERS below), plus one on a
Unix socket.

Prints exactly ``READY <path-to-info.json>`` on stdout once every server
answers, then nothing more.  info.json holds the ports and file paths; see
write_info() and Tests/Support/README.md.

Stops nginx (SIGTERM to its process group, SIGKILL after 3 s), removes the
temporary directory and exits when the parent process disappears, on
SIGTERM/SIGINT/SIGHUP, or if nginx dies.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import http.client
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

STARTUP_TIMEOUT = 30.0
ATTEMPTS = 3  # fresh ports each time, in case another process took ours
STARTED: list[peerlib.ChildGroup] = []
MIME_TYPES = "/etc/nginx/mime.types"

CLIENT_KEY_PASSWORD = "client-pass"
P12_PASSWORD = "p12-pass"
# xn--bcher-kva.courier.test is bücher.courier.test: a name to test IDNA spellings against.
SERVER_SANS = "DNS:localhost, IP:127.0.0.1, DNS:api.courier.test, DNS:xn--bcher-kva.courier.test"
BIG_SIZE = 1 << 20  # big.bin: 1 MiB, byte i is i % 251
HUGE_SIZE = 1 << 28  # huge.bin: 256 MiB of zeros

# name -> (kind, certificate, ssl_protocols, http2)
#   kind: "tls" (ssl listener), "mtls" (ssl + client certificate required),
#         "h2c" (cleartext HTTP/2 with prior knowledge), "plain" (HTTP/1.1).
SERVERS: dict[str, tuple[str, str | None, str | None, bool]] = {
    "valid":     ("tls",   "valid",     "TLSv1.2 TLSv1.3", True),
    "rotated":   ("tls",   "rotated",   "TLSv1.2 TLSv1.3", False),
    "expired":   ("tls",   "expired",   "TLSv1.2 TLSv1.3", False),
    "wronghost": ("tls",   "wronghost", "TLSv1.2 TLSv1.3", False),
    "otherca":   ("tls",   "otherca",   "TLSv1.2 TLSv1.3", False),
    "tls12":     ("tls",   "valid",     "TLSv1.2",         False),
    "tls13":     ("tls",   "valid",     "TLSv1.3",         False),
    "mtls":      ("mtls",  "valid",     "TLSv1.2 TLSv1.3", True),
    "goaway":    ("tls",   "valid",     "TLSv1.2 TLSv1.3", True),
    # revoked: a ca1 certificate that ca1's CRL (ca1.crl.pem) and OCSP responses list as
    # revoked. stapled and stapledrevoked staple a response of `openssl ocsp` acting as ca1's
    # responder (good for valid, revoked for revoked), from a file: nginx fetches nothing.
    "revoked":   ("tls",   "revoked",   "TLSv1.2 TLSv1.3", False),
    "stapled":   ("tls",   "valid",     "TLSv1.2 TLSv1.3", False),
    "stapledrevoked": ("tls", "revoked", "TLSv1.2 TLSv1.3", False),
    # selfsigned: a certificate for localhost that signs itself (no CA).
    "selfsigned": ("tls",  "selfsigned", "TLSv1.2 TLSv1.3", False),
    "h2c":       ("h2c",   None,        None,              True),
    "plain":     ("plain", None,        None,              False),
}

# ---------------------------------------------------------------------------
# PKI

# One config per CA.  `openssl ca` (not `x509 -req`) signs everything, because
# OpenSSL 3.0 can only set arbitrary validity dates there (-startdate/-enddate).
CA_CONFIG = """\
# Written by Tests/Support/serve_tls.py.
[req]
distinguished_name = req_dn
prompt = no

[req_dn]
CN = overridden by -subj

[ca]
default_ca = ca_default

[ca_default]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/newcerts
serial = $dir/serial
default_md = sha256
policy = policy_any
unique_subject = no
email_in_dn = no
copy_extensions = none

[policy_any]
commonName = supplied

[ext_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[ext_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = {server_sans}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer

[ext_wronghost]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:wrong.courier.test
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer

[ext_client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""


def asn1_time(t: datetime.datetime) -> str:
    return t.strftime("%y%m%d%H%M%SZ")  # UTCTime, what `openssl ca -startdate` takes


class CA:
    def __init__(self, pki: str, name: str, subject: str,
                 start: datetime.datetime, end: datetime.datetime) -> None:
        self.dir = os.path.join(pki, name)
        os.makedirs(os.path.join(self.dir, "newcerts"))
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write(f"{secrets.randbits(62) | (1 << 62):016X}\n")  # positive, 16 hex digits
        self.config = os.path.join(self.dir, "openssl.cnf")
        with open(self.config, "w") as f:
            f.write(CA_CONFIG.format(dir=self.dir, server_sans=SERVER_SANS))
        self.key = new_key(os.path.join(pki, f"{name}.key"))
        self.cert = os.path.join(pki, f"{name}.pem")
        self.sign(self.key, f"/CN={subject}", "ext_ca", start, end, self.cert, selfsign=True)

    def revoke(self, cert: str) -> None:
        peerlib.openssl("ca", "-batch", "-config", self.config, "-cert", self.cert, "-keyfile", self.key,
                        "-revoke", cert)

    def crl(self, out: str) -> str:
        peerlib.openssl("ca", "-batch", "-config", self.config, "-cert", self.cert, "-keyfile", self.key,
                        "-gencrl", "-crldays", "30", "-out", out)
        return out

    def ocsp_response(self, cert: str, out: str) -> str:
        """The answer of `openssl ocsp` as this CA's responder (signing with the CA's own key)
        to a request about `cert`, from the CA's index: good, or revoked."""
        request = out + ".request"
        peerlib.openssl("ocsp", "-issuer", self.cert, "-cert", cert, "-no_nonce", "-reqout", request)
        peerlib.openssl("ocsp", "-index", os.path.join(self.dir, "index.txt"), "-CA", self.cert,
                        "-rsigner", self.cert, "-rkey", self.key, "-reqin", request, "-respout", out,
                        "-ndays", "30")
        os.unlink(request)
        return out

    def sign(self, key: str, subject: str, extensions: str,
             start: datetime.datetime, end: datetime.datetime, out: str,
             selfsign: bool = False) -> str:
        csr = out[:-len(".pem")] + ".csr"
        peerlib.openssl("req", "-new", "-config", self.config, "-key", key, "-subj", subject, "-out", csr)
        issuer = ["-selfsign"] if selfsign else ["-cert", self.cert]
        peerlib.openssl("ca", "-batch", "-notext", "-config", self.config, *issuer,
                "-keyfile", self.key if not selfsign else key,
                "-in", csr, "-out", out, "-extensions", extensions,
                "-startdate", asn1_time(start), "-enddate", asn1_time(end))
        os.unlink(csr)
        return out


def new_key(path: str) -> str:
    peerlib.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)
    return path


def pin(key: str) -> str:
    """libcurl's CURLOPT_PINNEDPUBLICKEY form: sha256// + base64(SHA-256(DER SubjectPublicKeyInfo))."""
    spki = peerlib.openssl("pkey", "-in", key, "-pubout", "-outform", "DER")
    return "sha256//" + base64.b64encode(hashlib.sha256(spki).digest()).decode()


def make_pki(tmp: str) -> dict:
    pki = os.path.join(tmp, "pki")
    os.makedirs(pki)
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    start = now - datetime.timedelta(days=1)
    end = start + datetime.timedelta(days=30)
    ca_end = start + datetime.timedelta(days=365)
    ca1 = CA(pki, "ca1", "Courier Test CA 1", start, ca_end)
    ca2 = CA(pki, "ca2", "Courier Test CA 2", start, ca_end)

    def p(name: str) -> str:
        return os.path.join(pki, name)

    # expired, wronghost and otherca share the valid key on purpose: a pin of the
    # valid key matches them, so a test can show that a matching pin does not
    # excuse a failed chain, date or name check.
    valid_key = new_key(p("valid.key"))
    rotated_key = new_key(p("rotated.key"))
    certs = {
        "valid": ca1.sign(valid_key, "/CN=localhost", "ext_server", start, end, p("valid.pem")),
        "rotated": ca1.sign(rotated_key, "/CN=localhost", "ext_server", start, end, p("rotated.pem")),
        "expired": ca1.sign(valid_key, "/CN=localhost", "ext_server",
                            datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
                            datetime.datetime(2020, 2, 1, tzinfo=datetime.timezone.utc),
                            p("expired.pem")),
        "wronghost": ca1.sign(valid_key, "/CN=wrong.courier.test", "ext_wronghost",
                              start, end, p("wronghost.pem")),
        "otherca": ca2.sign(valid_key, "/CN=localhost", "ext_server", start, end, p("otherca.pem")),
    }
    selfsigned_key = new_key(p("selfsigned.key"))
    certs["selfsigned"] = p("selfsigned.pem")
    peerlib.openssl("req", "-x509", "-new", "-key", selfsigned_key, "-subj", "/CN=localhost",
                    "-addext", f"subjectAltName = {SERVER_SANS}", "-days", "30", "-out", certs["selfsigned"])
    revoked_key = new_key(p("revoked.key"))
    certs["revoked"] = ca1.sign(revoked_key, "/CN=localhost", "ext_server", start, end, p("revoked.pem"))
    ca1.revoke(certs["revoked"])
    keys = {"valid": valid_key, "rotated": rotated_key, "expired": valid_key,
            "wronghost": valid_key, "otherca": valid_key, "revoked": revoked_key, "selfsigned": selfsigned_key}
    staples = {"stapled": ca1.ocsp_response(certs["valid"], p("valid.ocsp.der")),
               "stapledrevoked": ca1.ocsp_response(certs["revoked"], p("revoked.ocsp.der"))}
    # The stapling servers send their CA after the leaf: a client finds the issuer that the
    # response's certificate ID names in the chain the server sent (libcurl does).
    chains = {}
    for name, cert in (("stapled", certs["valid"]), ("stapledrevoked", certs["revoked"])):
        chains[name] = p(f"{name}-chain.pem")
        with open(chains[name], "w") as out:
            out.write(open(cert).read() + open(ca1.cert).read())

    client_key = new_key(p("client.key"))
    client_cert = ca1.sign(client_key, "/CN=courier-client", "ext_client", start, end, p("client.pem"))
    client_key_encrypted = p("client.key.encrypted.pem")
    peerlib.openssl("pkey", "-in", client_key, "-aes-256-cbc", "-passout", f"pass:{CLIENT_KEY_PASSWORD}",
            "-out", client_key_encrypted)
    client_p12 = p("client.p12")
    # OpenSSL 3's defaults, spelled out: PBES2/PBKDF2 with AES-256-CBC, HMAC-SHA256
    # MAC, no RC2 or 3DES, so no legacy provider is needed to read it.
    peerlib.openssl("pkcs12", "-export", "-in", client_cert, "-inkey", client_key,
            "-certfile", ca1.cert, "-name", "courier-client",
            "-certpbe", "AES-256-CBC", "-keypbe", "AES-256-CBC", "-macalg", "sha256",
            "-passout", f"pass:{P12_PASSWORD}", "-out", client_p12)

    ca_dir = os.path.join(tmp, "ca1-dir")
    os.makedirs(ca_dir)
    shutil.copy(ca1.cert, os.path.join(ca_dir, "ca1.pem"))
    peerlib.openssl("rehash", ca_dir)
    if not any(n.endswith(".0") for n in os.listdir(ca_dir)):
        peerlib.fail(f"openssl rehash made no hash link in {ca_dir}")

    return {
        "ca1": ca1.cert, "ca2": ca2.cert, "ca_dir": ca_dir, "ca1_crl": ca1.crl(p("ca1.crl.pem")),
        "staples": staples, "chains": chains,
        # SHA-256 of each certificate's DER, in lower-case hex: what a fingerprint pin names.
        "fingerprints": {name: hashlib.sha256(peerlib.openssl("x509", "-in", cert, "-outform", "DER")).hexdigest()
                         for name, cert in certs.items()},
        "certs": certs, "keys": keys,
        "client": {"cert": client_cert, "key": client_key,
                   "key_encrypted": client_key_encrypted, "key_password": CLIENT_KEY_PASSWORD,
                   "p12": client_p12, "p12_password": P12_PASSWORD},
        "pins": {"valid": pin(valid_key), "rotated": pin(rotated_key)},
    }


def make_root(tmp: str) -> str:
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    with open(os.path.join(root, "pushed.txt"), "w") as f:
        f.write("pushed\n")
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello\n")
    pattern = bytes(range(251))
    big = (pattern * (BIG_SIZE // 251 + 1))[:BIG_SIZE]
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(big)
    # huge.bin: 256 MiB of zeros, a sparse file (no disk space), for a transfer that stays in
    # flight while a test holds its body unread.
    with open(os.path.join(root, "huge.bin"), "wb") as f:
        f.truncate(HUGE_SIZE)
    return root


# ---------------------------------------------------------------------------
# nginx

def check_nginx(nginx: str) -> None:
    if not os.access(nginx, os.X_OK):
        peerlib.fail(f"{nginx} not found or not executable (apt-get install nginx)")
    done = subprocess.run([nginx, "-V"], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    flags = done.stdout + done.stderr
    for module in ("--with-http_ssl_module", "--with-http_v2_module"):
        if module not in flags:
            peerlib.fail(f"{nginx} was built without {module}")


def server_block(name: str, port: int, root: str, pki: dict) -> str:
    kind, cert, protocols, h2 = SERVERS[name]
    listen = f"127.0.0.1:{port}"
    if kind in ("tls", "mtls"):
        listen += " ssl"
    if h2:
        listen += " http2"
    lines = [f"    # {name}", "    server {", f"        listen {listen};",
             "        server_name localhost;", f"        root {root};"]
    if cert is not None:
        lines += [f"        ssl_certificate {pki.get('chains', {}).get(name, pki['certs'][cert])};",
                  f"        ssl_certificate_key {pki['keys'][cert]};",
                  f"        ssl_protocols {protocols};"]
    if name in pki.get("staples", {}):
        lines += ["        ssl_stapling on;", f"        ssl_stapling_file {pki['staples'][name]};"]
    if kind == "mtls":
        lines += ["        ssl_verify_client on;",
                  f"        ssl_client_certificate {pki['ca1']};"]
    if name == "goaway":
        lines += ["        keepalive_requests 10;  # over HTTP/2: GOAWAY after the 10th request"]
    lines += ["        location / {", "        }"]
    if kind in ("tls", "mtls"):
        lines += ["        location = /tls {", "            default_type text/plain;",
                  '            return 200 "$ssl_protocol $ssl_client_verify $ssl_client_s_dn\\n";',
                  "        }"]
    else:
        lines += ["        location = /tls {", "            default_type text/plain;",
                  '            return 200 "plain\\n";', "        }"]
    if name == "valid":
        lines += ["        location = /hsts {",
                  '            add_header Strict-Transport-Security "max-age=3600; includeSubDomains" always;',
                  "            default_type text/plain;",
                  '            return 200 "hsts\\n";', "        }"]
        lines += ["        location = /private.txt {", '            auth_basic "tls";',
                  f"            auth_basic_user_file {pki['htpasswd']};", "        }"]
        # A page that comes with a server push of /hello.txt (HTTP/2 PUSH_PROMISE).
        lines += ["        location = /pushed.txt {", "            http2_push /hello.txt;", "        }"]
    lines += ["    }", ""]
    return "\n".join(lines)


def write_config(tmp: str, root: str, ports: dict[str, int], sock: str, pki: dict) -> str:
    nofile = peerlib.nofile_limit(4096)
    types = f"include {MIME_TYPES};" if os.path.exists(MIME_TYPES) else """types {
        text/html html htm; text/plain txt; application/json json;
        application/octet-stream bin;
    }"""
    user = "user root;" if os.geteuid() == 0 else ""
    # /private.txt on "valid" asks for Basic authentication (user ada, password lovelace).
    htpasswd = os.path.join(tmp, "htpasswd")
    with open(htpasswd, "w") as f:
        f.write("ada:{PLAIN}lovelace\n")
    with open(os.path.join(root, "private.txt"), "w") as f:
        f.write("private\n")
    pki = dict(pki, htpasswd=htpasswd)
    servers = "".join(server_block(name, ports[name], root, pki) for name in SERVERS)
    conf = f"""\
# Written by Tests/Support/serve_tls.py; everything lives in {tmp}.
daemon off;
master_process on;
worker_processes 1;
{user}
pid {tmp}/nginx.pid;
error_log {tmp}/error.log error;
worker_rlimit_nofile {nofile};

events {{
    worker_connections {max(512, nofile // 2)};
}}

http {{
    {types}
    default_type application/octet-stream;

    # Space-separated, one line per request; an empty value is written as "-".
    map $http2 $courier_http2 {{
        "" "-";
        default $http2;
    }}
    map $server_port $courier_port {{
        "" "-";
        default $server_port;
    }}
    # $ssl_session_reused: "r" when the client resumed a TLS session, "." for a full handshake.
    # $msec and $request_time: when a request ended and how long it took (from its first
    # byte), for how many streams overlapped on one connection.
    log_format courier '$courier_port "$request" $status $connection $connection_requests '
                       '$msec $request_time $ssl_protocol $courier_http2 $ssl_session_reused';
    access_log {tmp}/access.log courier;

    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65;
    client_max_body_size 0;

    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;

{servers}
    # unix
    server {{
        listen unix:{sock};
        server_name localhost;
        root {root};
        location / {{
        }}
        location = /tls {{
            default_type text/plain;
            return 200 "unix\\n";
        }}
    }}
}}
"""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    return path


# ---------------------------------------------------------------------------
# readiness

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def _answers(conn: http.client.HTTPConnection) -> bool:
    try:
        conn.request("GET", "/tls")
        conn.getresponse().read()  # any status will do (mtls says 400 without a certificate)
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def h2c_answers(port: int) -> bool:
    """Send the HTTP/2 preface and an empty SETTINGS frame; expect a SETTINGS frame back."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            head = b""
            while len(head) < 9:
                more = s.recv(9 - len(head))
                if not more:
                    return False
                head += more
            return head[3] == 4
    except OSError:
        return False


def answers(name: str, port: int) -> bool:
    kind = SERVERS[name][0]
    if kind == "h2c":
        return h2c_answers(port)
    if kind == "plain":
        return _answers(http.client.HTTPConnection("127.0.0.1", port, timeout=2))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # expired, wronghost and otherca must answer too
    return _answers(http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=ctx))


def free_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        port = peerlib.free_port()
        if port not in ports:
            ports.append(port)
    return ports


def start(nginx: str, tmp: str, root: str, sock: str, pki: dict):
    """Start nginx; returns (child, ports), or None if it died early."""
    ports = dict(zip(SERVERS, free_ports(len(SERVERS))))
    if os.path.exists(sock):
        os.unlink(sock)  # left by an attempt that died
    conf = write_config(tmp, root, ports, sock, pki)
    pending = set(SERVERS) | {"unix"}

    def all_answer() -> bool:
        for name in sorted(pending):
            if name == "unix":
                ok = _answers(UnixHTTPConnection(sock, timeout=2))
            else:
                ok = answers(name, ports[name])
            if ok:
                pending.discard(name)
        return not pending

    child = peerlib.start_nginx(nginx, tmp, conf, STARTED, all_answer, STARTUP_TIMEOUT,
                                lambda: ", ".join(sorted(pending)))
    return None if child is None else (child, ports)


def write_info(tmp: str, root: str, sock: str, ports: dict[str, int], pki: dict) -> str:
    info = {
        "dir": tmp,
        "ports": ports,
        "socket": sock,
        "ca1": pki["ca1"],
        "ca2": pki["ca2"],
        "ca_dir": pki["ca_dir"],
        "ca1_crl": pki["ca1_crl"],
        "fingerprints": pki["fingerprints"],
        "client": pki["client"],
        "pins": pki["pins"],
        "certs": pki["certs"],
        # Added for serve_websocket.py's wss servers: the servers' private keys (by the same
        # names as certs) and the CA the mtls server checks client certificates against.
        "keys": pki["keys"],
        "client_ca": pki["ca1"],
        "access_log": os.path.join(tmp, "access.log"),
        "root": root,
    }
    path = os.path.join(tmp, "info.json")
    with open(path + ".part", "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    os.replace(path + ".part", path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description="Run nginx with a throwaway PKI for TLS tests.")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process disappears (default: the parent)")
    ap.add_argument("--nginx", default="/usr/sbin/nginx", help="nginx binary")
    args = ap.parse_args()

    check_nginx(args.nginx)
    peerlib.install_stop_signals()
    dirs: list[str] = []

    def cleanup() -> None:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)

    try:
        try:
            dirs.append(tempfile.mkdtemp(prefix="courier-tls-"))
            tmp = os.path.realpath(dirs[0])
            sock = os.path.join(tmp, "courier.sock")
            if len(os.fsencode(sock)) > 100:  # sun_path holds 108 bytes
                short = tempfile.mkdtemp(prefix="courier-tls-", dir="/tmp")
                dirs.append(short)
                sock = os.path.join(short, "courier.sock")
            pki = make_pki(tmp)
            root = make_root(tmp)
            child, ports = peerlib.start_attempts(
                "serve_tls.py", ATTEMPTS, tmp, lambda: start(args.nginx, tmp, root, sock, pki))
            info = write_info(tmp, root, sock, ports, pki)
        except peerlib.Stop:
            peerlib.shutdown(STARTED, cleanup)
            return 0
    except BaseException:  # peerlib.fail's SystemExit, or anything unexpected
        peerlib.shutdown(STARTED, cleanup)
        raise

    peerlib.announce(f"READY {info}")
    return peerlib.supervise(args.parent_pid, [child], cleanup)


if __name__ == "__main__":
    sys.exit(main())
