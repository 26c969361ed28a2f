#!/usr/bin/env python3
"""A real HTTP server on loopback for the webhook plugin's test (tests/plugin_test.cpp).

Usage: webhook_server.py PORT_FILE LOG_FILE SECRET [CERT KEY [CLIENT_CA]]
Listens on 127.0.0.1 (a free port, written to PORT_FILE once listening); with CERT and KEY
(PEM) it speaks https, and with CLIENT_CA it requires a client certificate signed by it. POST /ok answers
200; /flaky answers 503 the first time, then 200; /reject answers 400 "bad payload: no";
/limited answers 429 with "Retry-After: 120" the first time, then 200; /unavailable answers
503 with Retry-After as the HTTP date 120 s from now the first time, then 200; /soon
answers 429 with "Retry-After: 1" the first time, then 200; /hold answers 200 once the file
"go" exists beside LOG_FILE, and keeps in the files "open" and "max_open" there how many
requests it has open now and at most so far.
Each request is appended to LOG_FILE as one JSON line: path, the X-Keywatch-* headers,
the body, and sig_ok (the signature verifies: HMAC-SHA256 of "<timestamp>.<body>").
Runs until killed.
"""
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import ssl
import sys
import threading
import time

port_file, log_file, secret = sys.argv[1], sys.argv[2], sys.argv[3].encode()
seen = {}
data_dir = os.path.dirname(os.path.abspath(log_file))
open_lock = threading.Lock()
open_now = [0, 0]  # open now, most open at once


def write_file(name, text):
    tmp = os.path.join(data_dir, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(data_dir, name))


def count_open(delta):
    with open_lock:
        open_now[0] += delta
        open_now[1] = max(open_now)
        write_file("open", str(open_now[0]))
        write_file("max_open", str(open_now[1]))


def hold_until_go():
    count_open(1)
    try:
        while not os.path.exists(os.path.join(data_dir, "go")):
            time.sleep(0.02)
    finally:
        count_open(-1)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stamp = self.headers.get("X-Keywatch-Timestamp", "")
        sig = self.headers.get("X-Keywatch-Signature", "")
        want = "sha256=" + hmac.new(secret, stamp.encode() + b"." + body,
                                    hashlib.sha256).hexdigest()
        with open(log_file, "a") as f:
            f.write(json.dumps({"path": self.path, "event_id":
                                self.headers.get("X-Keywatch-Event-Id", ""),
                                "extra": self.headers.get("X-Extra", ""),
                                "body": body.decode("utf-8", "replace"),
                                "sig_ok": hmac.compare_digest(sig, want)}) + "\n")
        seen[self.path] = seen.get(self.path, 0) + 1
        retry_after = None
        if self.path == "/flaky" and seen[self.path] == 1:
            status, text = 503, b"busy"
        elif self.path == "/limited" and seen[self.path] == 1:
            status, text, retry_after = 429, b"slow down", "120"
        elif self.path == "/soon" and seen[self.path] == 1:
            status, text, retry_after = 429, b"slow down", "1"
        elif self.path == "/unavailable" and seen[self.path] == 1:
            status, text = 503, b"maintenance"
            retry_after = email.utils.formatdate(time.time() + 120, usegmt=True)
        elif self.path == "/hold":
            hold_until_go()
            status, text = 200, b"ok"
        elif self.path == "/reject":
            status, text = 400, b"bad payload: no"
        else:
            status, text = 200, b"ok"
        self.send_response(status)
        if retry_after:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) > 5:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[4], sys.argv[5])
    if len(sys.argv) > 6:
        tls.load_verify_locations(sys.argv[6])
        tls.verify_mode = ssl.CERT_REQUIRED
    server.socket = tls.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
