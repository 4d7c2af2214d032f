#!/usr/bin/env python3
"""Run nginx on free loopback ports for Courier's tests and benchmarks.

Usage:  python3 serve_nginx.py --root DIR [--parent-pid PID] [--nginx PATH]

Writes a config, a self-signed certificate and all of nginx's runtime files
into a fresh temporary directory, then serves DIR over

  * plain HTTP/1.1 (keep-alive, sendfile, Range, ETag), and
  * HTTPS with HTTP/2 (ALPN h2 and http/1.1), certificate for
    CN=localhost, subjectAltName IP:127.0.0.1 and DNS:localhost.

Prints exactly ``READY <http_port> <https_port> <path-to-cert.pem>`` on
stdout once both ports answer, then nothing more.  The certificate is
self-signed, so it is its own CA: pass it as the CA bundle (curl --cacert).

Stops nginx (SIGTERM to its process group, SIGKILL after 3 s), removes the
temporary directory and exits when the parent process disappears, on
SIGTERM/SIGINT/SIGHUP, or if nginx dies.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import ssl
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

STARTUP_TIMEOUT = 30.0
ATTEMPTS = 3  # fresh ports each time, in case another process took ours
STARTED: list[peerlib.ChildGroup] = []
MIME_TYPES = "/etc/nginx/mime.types"

def write_config(tmp: str, root: str, http_port: int, https_port: int,
                 cert: str, key: str) -> str:
    nofile = peerlib.nofile_limit(65536)
    connections = max(1024, min(16384, nofile // 2))
    types = f"include {MIME_TYPES};" if os.path.exists(MIME_TYPES) else """types {
        text/html html htm; text/plain txt; application/json json;
        application/octet-stream bin;
    }"""
    user = "user root;" if os.geteuid() == 0 else ""
    conf = f"""\
# Written by Tests/Support/serve_nginx.py; everything lives in {tmp}.
daemon off;
master_process on;
worker_processes 2;
{user}
pid {tmp}/nginx.pid;
error_log {tmp}/error.log error;
worker_rlimit_nofile {nofile};

events {{
    worker_connections {connections};
}}

http {{
    {types}
    default_type application/octet-stream;
    access_log off;

    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    etag on;
    client_max_body_size 0;

    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;

    server {{
        listen 127.0.0.1:{http_port} backlog=4096;
        server_name localhost 127.0.0.1;
        root {root};

        location / {{
        }}
        # An upload sink: any method, any size; the body is read and discarded.
        location = /upload {{
            return 200 "ok\\n";
        }}
    }}

    server {{
        listen 127.0.0.1:{https_port} ssl http2 backlog=4096;
        server_name localhost 127.0.0.1;
        root {root};

        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;

        location / {{
        }}
        # Over HTTP/2, answering before the body is read (what `return` does)
        # makes curl 7.88 stall once the first 64 KiB window is used up.  So
        # here nginx reads the whole body first (proxy request buffering, in
        # memory up to 16 MiB, then a temp file) and hands it to the plain sink.
        location = /upload {{
            client_body_buffer_size 16m;
            proxy_pass http://127.0.0.1:{http_port}/upload;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    return path


def http_answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("HEAD", "/")
        conn.getresponse().read()
        conn.close()
        return True
    except (OSError, http.client.HTTPException):
        return False


def https_answers(port: int, cert: str) -> bool:
    try:
        ctx = ssl.create_default_context(cafile=cert)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost"):
                return True
    except (OSError, ssl.SSLError):
        return False


def start(nginx: str, tmp: str, root: str, cert: str, key: str):
    """Start nginx; returns (child, http_port, https_port), or None if it died early."""
    http_port = peerlib.free_port()
    https_port = peerlib.free_port()
    while https_port == http_port:
        https_port = peerlib.free_port()
    conf = write_config(tmp, root, http_port, https_port, cert, key)
    child = peerlib.start_nginx(
        nginx, tmp, conf, STARTED, lambda: http_answers(http_port) and https_answers(https_port, cert),
        STARTUP_TIMEOUT, lambda: f"127.0.0.1:{http_port}/{https_port}")
    return None if child is None else (child, http_port, https_port)


def main() -> int:
    ap = argparse.ArgumentParser(description="Run nginx on free loopback ports (HTTP and HTTPS/h2).")
    ap.add_argument("--root", required=True, help="document root to serve")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process disappears (default: the parent)")
    ap.add_argument("--nginx", default="/usr/sbin/nginx", help="nginx binary")
    args = ap.parse_args()

    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        peerlib.fail(f"--root {root} is not a directory")
    if not os.access(args.nginx, os.X_OK):
        peerlib.fail(f"{args.nginx} not found or not executable (apt-get install nginx)")

    peerlib.install_stop_signals()
    tmp = tempfile.mkdtemp(prefix="courier-nginx-")

    def cleanup() -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    try:
        try:
            cert, key = peerlib.make_localhost_certificate(tmp)
            child, http_port, https_port = peerlib.start_attempts(
                "serve_nginx.py", ATTEMPTS, tmp, lambda: start(args.nginx, tmp, root, cert, key))
        except peerlib.Stop:
            peerlib.shutdown(STARTED, cleanup)
            return 0
    except SystemExit:
        peerlib.shutdown(STARTED, cleanup)
        raise

    peerlib.announce(f"READY {http_port} {https_port} {cert}")
    return peerlib.supervise(args.parent_pid, [child], cleanup)


if __name__ == "__main__":
    sys.exit(main())
