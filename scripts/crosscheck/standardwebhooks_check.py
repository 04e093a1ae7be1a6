"""Cross-checks hookd's Standard Webhooks signatures with the reference Python library.

Usage: standardwebhooks_check.py CASES.json

CASES.json is {"verify": [case, ...], "sign": N}, each case {"secret", "id", "timestamp",
"body", "signature"} with a UTF-8 text body. Every case is verified with
standardwebhooks.Webhook (v1 entries only; it skips v1a), and N random messages are signed with
it, stamped now. Prints {"verified": [true|false, ...], "signed": [case, ...]} as JSON.
Used by crates/webhook-signature/tests/crosscheck_python.rs.
"""

import base64
import json
import random
import string
import sys
from datetime import datetime, timezone

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

# ASCII, JSON punctuation, the separator, whitespace, and 2-, 3- and 4-byte UTF-8 characters.
BODY_CHARS = string.ascii_letters + string.digits + ' {}[]":,.\\\n\t' + "éß€中😀𝄞"
ID_CHARS = string.ascii_letters + string.digits + "_-"


def verify(case):
    headers = {
        "webhook-id": case["id"],
        "webhook-timestamp": case["timestamp"],
        "webhook-signature": case["signature"],
    }
    try:
        Webhook(case["secret"]).verify(case["body"].encode(), headers, json_parse=False)
        return True
    except WebhookVerificationError:
        return False


def sign_random(rng):
    secret = "whsec_" + base64.b64encode(rng.randbytes(rng.randint(24, 64))).decode()
    msg_id = "msg_" + "".join(rng.choices(ID_CHARS, k=rng.randint(1, 30)))
    body = "".join(rng.choices(BODY_CHARS, k=rng.choice([0, rng.randint(1, 500)])))
    now = datetime.now(tz=timezone.utc)
    signature = Webhook(secret).sign(msg_id, now, body)
    return {
        "secret": secret,
        "id": msg_id,
        "timestamp": str(int(now.timestamp())),
        "body": body,
        "signature": signature,
    }


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    rng = random.Random()
    json.dump(
        {
            "verified": [verify(case) for case in cases["verify"]],
            "signed": [sign_random(rng) for _ in range(cases["sign"])],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
