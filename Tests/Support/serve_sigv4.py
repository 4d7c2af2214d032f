#!/usr/bin/env python3
"""A server that checks AWS Signature Version 4 with botocore, an implementation independent of
Courier's: for each request it takes the access key, scope and signed field names from
`Authorization`, rebuilds the request from what arrived (those fields, the path and query as
received, the body), has botocore's signer compute the signature for the same date, and
answers 200 with {"verified": true} when the two agree, 403 with both and botocore's canonical
request otherwise. A body whose SHA-256 differs from `X-Amz-Content-SHA256` (unless that says
UNSIGNED-PAYLOAD) is refused too.

Prints `READY <port>` once listening on 127.0.0.1. The secret keys it knows:
AKIDEXAMPLE -> wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402

SECRETS = {"AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
    r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def answer(self, status: int, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            body = b"".join(parts)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
        match = AUTHORIZATION.match(self.headers.get("Authorization", ""))
        if not match:
            return self.answer(403, {"verified": False, "reason": "no SigV4 Authorization field"})
        key, day, region, service, signed_names, signature = match.groups()
        if key not in SECRETS:
            return self.answer(403, {"verified": False, "reason": f"unknown access key {key}"})
        amz_date = self.headers.get("X-Amz-Date", "")
        if not amz_date.startswith(day):
            return self.answer(403, {"verified": False, "reason": "X-Amz-Date is not the scope's day"})
        claimed = self.headers.get("X-Amz-Content-SHA256")
        if claimed and claimed != "UNSIGNED-PAYLOAD" and claimed != hashlib.sha256(body).hexdigest():
            return self.answer(403, {"verified": False, "reason": "the body's SHA-256 is not X-Amz-Content-SHA256"})
        names = signed_names.split(";")
        if "host" not in names:
            return self.answer(403, {"verified": False, "reason": "Host is not signed"})
        headers = {}
        for name in names:
            values = self.headers.get_all(name)
            if values is None:
                return self.answer(403, {"verified": False, "reason": f"signed field {name} is missing"})
            headers[name] = ",".join(values)
        path, _, query = self.path.partition("?")
        request = AWSRequest(method=self.command, url=f"http://{headers['host']}{path}", headers=headers,
                             data=body)
        # The query as AWS reads it: each name and value decoded (botocore encodes them again).
        request.params = [(unquote(k), unquote(v)) for k, _, v in
                          (pair.partition("=") for pair in query.split("&") if pair)]
        token = self.headers.get("X-Amz-Security-Token")
        credentials = Credentials(key, SECRETS[key], token)
        signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(credentials, service, region)
        request.context["timestamp"] = amz_date
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if expected != signature:
            return self.answer(403, {"verified": False, "expected": expected, "got": signature,
                                     "canonical_request": canonical})
        self.answer(200, {"verified": True, "signed_headers": names, "canonical_request": canonical})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    args = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if args.parent_pid is not None:
        def watch() -> None:
            while peerlib.parent_alive(args.parent_pid):
                time.sleep(0.5)
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    sys.stdout.write(f"READY {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
