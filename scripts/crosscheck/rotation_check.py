#!/usr/bin/env python3
"""Verifies deliveries hookd made across a secret rotation with the reference library.

Usage: rotation_check.py DELIVERIES.json

DELIVERIES.json is {"secrets": {"old": "whsec_…", "new": "whsec_…"}, "deliveries": [{"id",
"timestamp", "body", "signature"}, …]}: the headers and body of real requests hookd sent. Each
is verified with standardwebhooks.Webhook under each secret, with the library's clock set to
the delivery's own timestamp (hookd ran on a clock the test moved by days; a receiver checks
the timestamp against the moment it receives). Prints {"old": [true|false, …], "new": […]}.
Used by crates/hookd-engine/tests/rotation.rs.
"""

import json
import sys
from datetime import datetime, timezone

import standardwebhooks.webhooks as reference
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class ReceivedAt(datetime):
    """datetime whose now() is the moment the delivery under check arrived."""

    moment = None

    @classmethod
    def now(cls, tz=None):
        return cls.moment


reference.datetime = ReceivedAt


def verifies(secret, delivery):
    ReceivedAt.moment = datetime.fromtimestamp(int(delivery["timestamp"]), tz=timezone.utc)
    headers = {
        "webhook-id": delivery["id"],
        "webhook-timestamp": delivery["timestamp"],
        "webhook-signature": delivery["signature"],
    }
    try:
        Webhook(secret).verify(delivery["body"].encode(), headers, json_parse=False)
        return True
    except WebhookVerificationError:
        return False


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    json.dump(
        {
            name: [verifies(secret, d) for d in cases["deliveries"]]
            for name, secret in cases["secrets"].items()
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
