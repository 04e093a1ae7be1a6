#!/usr/bin/env python3
"""Drives a running hookd's destinations and pollers with the official Svix Python SDK.

    svix_destinations_check.py BASE_URL ADMIN_TOKEN CLOCK_OFFSET_FILE

CLOCK_OFFSET_FILE is hookd's test clock (HOOKD_TEST_CLOCK_OFFSET_FILE): the check moves it
forward so that the messages it published are settled for polling. Every polled message is
verified with the reference `standardwebhooks` library and the destination's secret as the
SDK's rotate_secret returned it. Exits non-zero on the first call that fails or answers wrong.
"""
import json
import os
import sys
from datetime import datetime, timezone

from standardwebhooks.webhooks import Webhook
from svix.api import (
    ApplicationIn,
    DestinationIn,
    DestinationListOptions,
    DestinationPatch,
    EndpointSecretRotateIn,
    MessageIn,
    MessagePollerConsumerPollOptions,
    MessagePollerPollOptions,
    Svix,
    SvixOptions,
)
from svix.exceptions import HttpError, HTTPValidationError
from svix.models import (
    FifoEndpointConfigIn,
    PollingEndpointConsumerSeekIn,
    RabbitMqConfigIn,
    S3ConfigIn,
    SnsConfigIn,
    SqsConfigIn,
)


# Distinct enough that no id or timestamp in a listing can contain it by chance.
SECRET_KEY = "hookd-check-secret-access-key"


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok  {what}")


def raises(error, call, what):
    try:
        call()
    except error:
        print(f"ok  {what}")
        return
    raise AssertionError(f"{what}: no {error.__name__}")


def set_clock(path, offset_ms):
    staging = path + ".new"
    with open(staging, "w") as f:
        f.write(str(offset_ms))
    os.rename(staging, path)


def verified(secret, page):
    """The payloads' `n` of a poll answer, each message verified with standardwebhooks."""
    reference = Webhook(secret)
    seen = []
    for message in page.data:
        body = json.dumps(message.payload, separators=(",", ":"), ensure_ascii=False)
        reference.verify(body, message.headers)
        assert message.headers["webhook-id"] == message.id
        seen.append(message.payload["n"])
    return seen


def main(base_url, token, clock):
    svix = Svix(token, SvixOptions(server_url=base_url))
    app = svix.application.create(ApplicationIn(name="destinations")).id
    d = svix.destination

    poller = d.create(app, DestinationIn(uid="poller", type="pollingEndpoint", config={},
                                         event_types=["order.paid"]))
    check(poller.type == "pollingEndpoint" and poller.uid == "poller", "create pollingEndpoint")
    fifo = d.create(app, DestinationIn(type="fifoEndpoint",
                                       config=FifoEndpointConfigIn(url="http://127.0.0.1:9/f")))
    check(fifo.config.url == "http://127.0.0.1:9/f", "create fifoEndpoint")
    rabbit = d.create(app, DestinationIn(
        type="rabbitMq", batch_size=1, event_types=["order.paid"],
        config=RabbitMqConfigIn(uri="amqp://guest:hunter2@127.0.0.1:5672/%2f",
                                routing_key="orders")))
    check("hunter2" not in rabbit.config.uri and rabbit.config.routing_key == "orders",
          "create rabbitMq: the URI's password is not shown")
    queue = d.create(app, DestinationIn(type="sqs", config=SqsConfigIn(
        queue_url="http://127.0.0.1:5000/123456789012/q.fifo", region="us-east-1",
        access_key_id="AK", secret_access_key=SECRET_KEY, endpoint_url="http://127.0.0.1:5000")))
    check(queue.config.region == "us-east-1", "create sqs")
    d.create(app, DestinationIn(type="sns", config=SnsConfigIn(
        topic_arn="arn:aws:sns:us-east-1:123456789012:t", region="us-east-1",
        access_key_id="AK", secret_access_key=SECRET_KEY, endpoint_url="http://127.0.0.1:5000")))
    d.create(app, DestinationIn(type="amazonS3", batch_size=100, max_wait_secs=10,
                                config=S3ConfigIn(bucket="hookd-events", access_key_id="AK",
                                                  secret_access_key=SECRET_KEY,
                                                  endpoint_url="http://127.0.0.1:5000")))
    listed = d.list(app, DestinationListOptions(limit=10))
    check([x.type for x in listed.data]
          == ["pollingEndpoint", "fifoEndpoint", "rabbitMq", "sqs", "sns", "amazonS3"],
          "list: every type parses as DestinationOut")
    check(SECRET_KEY not in listed.model_dump_json(), "list: no secretAccessKey shown")

    check(d.get(app, "poller").id == poller.id, "get by uid")
    upserted = d.upsert(app, "poller", DestinationIn(type="pollingEndpoint", config={},
                                                     uid="poller",
                                                     event_types=["order.paid"]))
    check(upserted.id == poller.id, "upsert replaces")
    patched = d.patch(app, rabbit.id, DestinationPatch(type="rabbitMq",
                                                       config={"routingKey": "k2"},
                                                       status="disabled"))
    check(patched.config.routing_key == "k2" and patched.status == "disabled", "patch")
    raises(HTTPValidationError,
           lambda: d.patch(app, rabbit.id, DestinationPatch(type="sqs", config={})),
           "patch to another type: HTTPValidationError")
    rotated = d.rotate_secret(app, fifo.id, EndpointSecretRotateIn())
    check(rotated.key.startswith("whsec_"), "rotate_secret of a fifoEndpoint")
    d.delete(app, queue.id)
    raises(HttpError, lambda: d.get(app, queue.id), "delete: then 404")

    # The polling destination's key, rotated at once so only it signs.
    secret = d.rotate_secret(app, "poller", EndpointSecretRotateIn(grace_period_seconds=0)).key
    for n, event_type in [(1, "order.paid"), (2, "order.shipped"), (3, "order.paid")]:
        svix.message.create(app, MessageIn(event_type=event_type,
                                           payload={"n": n, "text": "héllo"}))
    p = svix.message.poller
    early = p.poll(app, "poller")
    check(early.data == [] and isinstance(early.iterator, str), "unsettled: nothing yet")
    set_clock(clock, 10_000)

    page = p.poll(app, "poller", MessagePollerPollOptions(limit=1))
    check(verified(secret, page) == [1] and not page.done, "poll: oldest first, verified")
    rest = p.poll(app, "poller", MessagePollerPollOptions(iterator=page.iterator))
    check(verified(secret, rest) == [3] and rest.done, "poll: order.shipped filtered out")
    since = datetime(2020, 1, 1, tzinfo=timezone.utc)
    after = p.poll(app, "poller", MessagePollerPollOptions(after=since, event_type="order.paid"))
    check(verified(secret, after) == [1, 3], "poll: after and event_type")

    one = MessagePollerConsumerPollOptions(limit=1)
    check(verified(secret, p.consumer_poll(app, "poller", "worker", one)) == [1],
          "consumer_poll: first")
    check(verified(secret, p.consumer_poll(app, "poller", "worker")) == [3],
          "consumer_poll: on from where it got to")
    check(p.consumer_poll(app, "poller", "worker").data == [], "consumer_poll: at the end")
    sought = p.consumer_seek(app, "poller", "worker", PollingEndpointConsumerSeekIn(after=since))
    check(isinstance(sought.iterator, str), "consumer_seek")
    check(verified(secret, p.consumer_poll(app, "poller", "worker")) == [1, 3],
          "consumer_poll: again after the seek")
    print("svix destinations check passed")


if __name__ == "__main__":
    main(*sys.argv[1:4])
