"""A real SMTP server (aiosmtpd) for hookd's e-mail notice tests.

Listens on a free loopback port, says where on its first line, then prints one JSON line per
message received: its envelope sender and recipients, subject and text body.
"""

import json
import socket
import threading
from email import message_from_bytes
from email.policy import default

from aiosmtpd.controller import Controller


class Printer:
    async def handle_DATA(self, server, session, envelope):
        message = message_from_bytes(envelope.content, policy=default)
        print(
            json.dumps(
                {
                    "from": envelope.mail_from,
                    "to": envelope.rcpt_tos,
                    "subject": message["Subject"],
                    "body": message.get_content(),
                }
            ),
            flush=True,
        )
        return "250 OK"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


port = free_port()
controller = Controller(Printer(), hostname="127.0.0.1", port=port)
controller.start()
# The test harness reads the first line with a URL in it; this server speaks SMTP there.
print(f"SMTP server listening at http://127.0.0.1:{port}", flush=True)
threading.Event().wait()
