"""A webhook receiver for hookd in Python: verify, deduplicate, answer, then apply in order.

    pip install standardwebhooks==1.1.0
    WEBHOOK_SECRET=whsec_... python receiver.py

RECEIVER_PORT (default 8000, 0 picks a free port) and RECEIVER_DATABASE (default receiver.db)
are optional. Events come in the Standard Webhooks envelope (the application's "envelope": true):
{"type": "consignment.updated", "timestamp": "...", "data": {"consignment": "C-4471",
"status": "delivered", "version": 4}}; a test send carries "test": true and changes nothing.
"""

import json
import os
import sqlite3
import threading
import time
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

VERIFIER = Webhook(os.environ["WEBHOOK_SECRET"])
DATABASE = os.environ.get("RECEIVER_DATABASE", "receiver.db")
KEEP_IDS_MS = 30 * 24 * 3600 * 1000  # longer than hookd's retries and manual resends
WAKE = threading.Event()

SCHEMA = """
CREATE TABLE IF NOT EXISTS webhook_inbox (
    webhook_id TEXT PRIMARY KEY, received_at BIGINT NOT NULL, payload BLOB,
    claimed_until BIGINT NOT NULL DEFAULT 0, processed_at BIGINT);
CREATE TABLE IF NOT EXISTS consignments (
    key TEXT PRIMARY KEY, version BIGINT NOT NULL, state TEXT NOT NULL);
"""


def connect():
    db = sqlite3.connect(DATABASE, isolation_level=None, timeout=5)  # autocommit
    db.execute("PRAGMA journal_mode=WAL")
    return db


def now_ms():
    return int(time.time() * 1000)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            # The raw bytes, before any JSON parsing: the signature covers exactly these.
            VERIFIER.verify(body, dict(self.headers), json_parse=False)
        except WebhookVerificationError as error:
            return self.answer(401, {"error": "unverified", "reason": str(error)})
        webhook_id = self.headers["webhook-id"]
        with closing(connect()) as db:
            # One conditional insert: a retry of the same webhook-id inserts nothing.
            inserted = db.execute(
                "INSERT INTO webhook_inbox (webhook_id, received_at, payload) VALUES (?, ?, ?)"
                " ON CONFLICT (webhook_id) DO NOTHING",
                (webhook_id, now_ms(), body),
            ).rowcount
        if inserted:
            WAKE.set()
        self.answer(204)  # new or duplicate: acknowledged, the worker does the rest

    def answer(self, status, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def apply(db, webhook_id, payload):
    """Applies one recorded webhook: only a newer version changes a consignment."""
    try:
        envelope = json.loads(payload)
        # The mark is inside the signed body: once verified, a test send really is one.
        if envelope.get("test") is True:
            print(f"{webhook_id}: a test send, nothing applied", flush=True)
            return
        event = envelope["data"] if envelope["type"] == "consignment.updated" else None
        row = (event["consignment"], event["version"], json.dumps({"status": event["status"]}))
    except (ValueError, KeyError, TypeError, AttributeError):
        print(f"{webhook_id}: not a consignment event, ignored", flush=True)
        return
    applied = db.execute(
        "INSERT INTO consignments (key, version, state) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET version = excluded.version, state = excluded.state"
        " WHERE consignments.version < excluded.version",
        row,
    ).rowcount
    outcome = "applied" if applied else "stale, skipped"
    print(f"{webhook_id}: version {event['version']} {outcome}", flush=True)


def work():
    """Applies recorded webhooks oldest first, and forgets old ids hourly."""
    db = connect()
    next_purge = 0
    while True:
        WAKE.clear()
        if time.time() >= next_purge:  # hourly: forget ids processed 30 days ago
            db.execute("DELETE FROM webhook_inbox WHERE processed_at < ?", (now_ms() - KEEP_IDS_MS,))
            next_purge = time.time() + 3600
        pending = db.execute(
            "SELECT webhook_id, payload FROM webhook_inbox"
            " WHERE processed_at IS NULL ORDER BY received_at"
        ).fetchall()
        for webhook_id, payload in pending:
            apply(db, webhook_id, payload)
            db.execute(
                "UPDATE webhook_inbox SET processed_at = ?, payload = NULL WHERE webhook_id = ?",
                (now_ms(), webhook_id),
            )
        WAKE.wait(timeout=1)


if __name__ == "__main__":
    with closing(connect()) as db:
        db.executescript(SCHEMA)
    threading.Thread(target=work, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("RECEIVER_PORT", "8000"))), Handler)
    print(f"receiving webhooks at http://127.0.0.1:{server.server_port}/webhooks", flush=True)
    server.serve_forever()
