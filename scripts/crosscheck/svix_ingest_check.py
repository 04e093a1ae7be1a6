#!/usr/bin/env python3
"""Drives a running hookd's ingest gateway with the official Svix Python SDK (`svix.ingest`).

    svix_ingest_check.py BASE_URL ADMIN_TOKEN RECEIVER_URL

Every `ingest.source`, `ingest.endpoint` and `ingest.authentication` call of the SDK, then a
request signed by the reference `standardwebhooks` library sent to the source's ingestUrl,
which must be accepted. Exits non-zero on the first call that fails or answers wrong.
"""
import json
import sys
import urllib.request
from datetime import datetime, timezone

from standardwebhooks.webhooks import Webhook
from svix.api import Svix, SvixOptions
from svix.exceptions import HttpError, HTTPValidationError
from svix.models import (
    IngestEndpointHeadersIn,
    IngestEndpointIn,
    IngestEndpointSecretIn,
    IngestEndpointUpsertIn,
    IngestSourceConsumerPortalAccessIn,
    IngestSourceIn,
)

PROVIDER_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


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


def sources(ingest):
    created = ingest.source.create(
        IngestSourceIn(
            name="billing",
            uid="billing",
            type="svix",
            config={"secret": PROVIDER_SECRET},
            metadata={"team": "payments"},
        )
    )
    check(created.id.startswith("src_"), "source.create answers a src_ id")
    check(created.ingest_url and "/ingest/in/" in created.ingest_url, "with an ingestUrl")
    check(created.type == "svix" and created.metadata == {"team": "payments"}, "its fields")
    check(ingest.source.get("billing").id == created.id, "source.get by uid")
    listed = ingest.source.list()
    check([s.id for s in listed.data] == [created.id], "source.list")
    updated = ingest.source.upsert(
        created.id,
        IngestSourceIn(name="billing v2", type="svix", config={"secret": PROVIDER_SECRET}),
    )
    check(updated.name == "billing v2", "source.upsert replaces")
    check(updated.ingest_url == created.ingest_url, "and keeps the URL")
    raises(
        HTTPValidationError,
        lambda: ingest.source.create(
            IngestSourceIn(name="x", type="hubspot", config={"secret": "s3cr3t"})
        ),
        "a type hookd does not serve is 422",
    )
    rotated = ingest.source.rotate_token(created.id)
    check(rotated.ingest_url != created.ingest_url, "source.rotate_token: a new URL")
    portal = ingest.authentication.consumer_portal_access(
        created.id, IngestSourceConsumerPortalAccessIn(read_only=True)
    )
    check("/portal/login#token=" in portal.url and portal.token, "authentication.consumer_portal_access")
    return ingest.source.get(created.id)


def endpoints(ingest, source, receiver_url):
    ep = ingest.endpoint.create(
        source.id,
        IngestEndpointIn(url=receiver_url, uid="forward", metadata={"k": "v"}),
    )
    check(ep.id.startswith("ep_") and ep.uid == "forward", "endpoint.create")
    check([e.id for e in ingest.endpoint.list(source.id).data] == [ep.id], "endpoint.list")
    check(ingest.endpoint.get(source.id, "forward").url == receiver_url, "endpoint.get by uid")
    upserted = ingest.endpoint.upsert(
        source.id, ep.id, IngestEndpointUpsertIn(url=receiver_url, description="to the app")
    )
    check(upserted.description == "to the app", "endpoint.upsert")
    old = ingest.endpoint.get_secret(source.id, ep.id).key
    check(old.startswith("whsec_"), "endpoint.get_secret")
    ingest.endpoint.rotate_secret(source.id, ep.id, IngestEndpointSecretIn())
    check(ingest.endpoint.get_secret(source.id, ep.id).key != old, "endpoint.rotate_secret")
    ingest.endpoint.set_headers(
        source.id, ep.id, IngestEndpointHeadersIn(headers={"x-forwarded-by": "hookd"})
    )
    headers = ingest.endpoint.get_headers(source.id, ep.id)
    check(headers.headers == {"x-forwarded-by": "hookd"}, "endpoint.set_headers / get_headers")
    extra = ingest.endpoint.create(source.id, IngestEndpointIn(url=receiver_url))
    ingest.endpoint.delete(source.id, extra.id)
    raises(HttpError, lambda: ingest.endpoint.get(source.id, extra.id), "endpoint.delete")


def signed_request(source):
    body = json.dumps({"type": "invoice.paid", "data": {"id": "in_1"}})
    now = datetime.now(tz=timezone.utc)
    signature = Webhook(PROVIDER_SECRET).sign("evt_sdk_1", now, body)
    request = urllib.request.Request(
        source.ingest_url,
        data=body.encode(),
        headers={
            "content-type": "application/json",
            "webhook-id": "evt_sdk_1",
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        },
        method="POST",
    )
    with urllib.request.urlopen(request) as response:
        check(response.status == 202, "a standardwebhooks-signed request is accepted")


def main():
    base_url, token, receiver_url = sys.argv[1:4]
    svix = Svix(token, SvixOptions(server_url=base_url))
    source = sources(svix.ingest)
    endpoints(svix.ingest, source, receiver_url)
    signed_request(source)
    svix.ingest.source.delete(source.id)
    raises(HttpError, lambda: svix.ingest.source.get(source.id), "source.delete")
    print("svix ingest check passed")


if __name__ == "__main__":
    main()
