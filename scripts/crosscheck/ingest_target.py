"""A forwarding target for hookd's ingest tests, verifying with the reference library.

Usage: ingest_target.py SECRET...

Listens on a free loopback port, says where on its first line, then checks each POST with
standardwebhooks.Webhook on the raw bytes, against each SECRET (every forwarding endpoint has a
key of its own) and prints one JSON line per request: whether
it verified, its webhook-id, its body (base64, so the bytes can be compared exactly) and its
headers. Answers 204 when it verified, 401 otherwise. Used by
crates/hookd/tests/ingest_providers.rs.
"""

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

VERIFIERS = [Webhook(secret) for secret in sys.argv[1:]]


def verifies(body, headers):
    for verifier in VERIFIERS:
        try:
            verifier.verify(body, headers, json_parse=False)
            return True
        except WebhookVerificationError:
            pass
    return False


class Target(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {name.lower(): value for name, value in self.headers.items()}
        verified = verifies(body, headers)
        record = {
            "verified": verified,
            "id": headers.get("webhook-id"),
            "body": base64.b64encode(body).decode(),
            "headers": headers,
        }
        print(json.dumps(record), flush=True)
        self.send_response(204 if verified else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Target)
print(f"ingest target listening at http://127.0.0.1:{server.server_address[1]}/hooks", flush=True)
server.serve_forever()
