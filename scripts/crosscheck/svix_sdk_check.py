#!/usr/bin/env python3
"""Drives a running hookd with the official Svix Python SDK, as a user's code would.

    svix_sdk_check.py BASE_URL ADMIN_TOKEN RECEIVER_URL

RECEIVER_URL is an HTTP receiver that answers 2xx; the delivery half of the check publishes to
it and reads the attempts back. Exits non-zero (with a traceback) on the first call that fails or returns the wrong thing.
"""
import base64
import os
import sys
import time
import uuid
from datetime import datetime, timezone

from svix.models import (
    AppUsageStatsIn,
    EventTypeImportOpenApiIn,
    BackgroundTaskType,
    BulkReplayIn,
    MessageStatus,
    OperationalWebhookEndpointHeadersIn,
    OperationalWebhookEndpointIn,
    OperationalWebhookEndpointSecretIn,
    OperationalWebhookEndpointUpsertIn,
)
from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    ApplicationPatch,
    EndpointHeadersIn,
    EndpointHeadersPatchIn,
    EndpointIn,
    EndpointPatch,
    EndpointSecretRotateIn,
    EndpointUpsertIn,
    EventTypeIn,
    EventTypePatch,
    EventTypeUpsertIn,
    EventExampleIn,
    MessageIn,
    MessagePrecheckIn,
    RecoverIn,
    ReplayIn,
    Svix,
    SvixOptions,
)
from svix.api.application import ApplicationListOptions
from svix.api.background_task import BackgroundTaskListOptions
from svix.api.message import MessageGetOptions, MessageListOptions
from svix.exceptions import HttpError, HTTPValidationError


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok  {what}")


def wait_for(what, probe):
    """Polls `probe` (bounded) until it returns something truthy."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def deliveries(svix, app_id, event_type, receiver_url):
    """The engine delivers; the SDK reads the attempts, resends, recovers and sends a test."""
    ep = svix.endpoint.create(app_id, EndpointIn(url=receiver_url, event_types=[event_type]))
    check(svix.message.precheck(app_id, MessagePrecheckIn(event_type=event_type)).active, "message.precheck: active")
    check(
        not svix.message.precheck(app_id, MessagePrecheckIn(event_type="nobody.listens")).active,
        "message.precheck: not active",
    )
    msg = svix.message.create(app_id, MessageIn(event_type=event_type, payload={"orderId": 1}))
    def attempts_to_receiver(msg_id):
        return [a for a in svix.message_attempt.list_by_msg(app_id, msg_id).data if a.endpoint_id == ep.id]

    first = wait_for("the first attempt", lambda: attempts_to_receiver(msg.id))[0]
    check(200 <= first.response_status_code < 300, "message_attempt.list_by_msg shows the delivery")
    check(str(first.status_text) == "success", "the attempt succeeded")
    check(svix.message_attempt.get(app_id, msg.id, first.id).id == first.id, "message_attempt.get")
    svix.message_attempt.resend(app_id, msg.id, ep.id)
    wait_for("the resend", lambda: len(attempts_to_receiver(msg.id)) == 2)
    check(True, "message_attempt.resend sends again")
    since = datetime(2000, 1, 1, tzinfo=timezone.utc)
    recovered = svix.endpoint.recover(app_id, ep.id, RecoverIn(since=since))
    check(str(recovered.status) == "finished", "endpoint.recover")
    example = svix.endpoint.send_example(app_id, ep.id, EventExampleIn(event_type=event_type))
    wait_for("the example", lambda: attempts_to_receiver(example.id))
    check(True, "endpoint.send_example is delivered")
    by_endpoint = svix.message_attempt.list_by_endpoint(app_id, ep.id).data
    check(len(by_endpoint) == 3, "message_attempt.list_by_endpoint shows all three attempts")


def expunging(svix, app_id, event_type, receiver_url):
    """A message's own retention period is accepted; its payload and an attempt's response are
    dropped on request, and read back as Svix shows them."""
    ep = svix.endpoint.create(app_id, EndpointIn(url=receiver_url, event_types=[event_type]))
    msg = svix.message.create(
        app_id, MessageIn(event_type=event_type, payload={"card": "4242"}, payload_retention_period=5)
    )
    check(msg.id.startswith("msg_"), "message.create with payload_retention_period")
    attempt = wait_for(
        "the attempt",
        lambda: [a for a in svix.message_attempt.list_by_msg(app_id, msg.id).data if a.endpoint_id == ep.id],
    )[0]
    svix.message_attempt.expunge_content(app_id, msg.id, attempt.id)
    shown = svix.message_attempt.get(app_id, msg.id, attempt.id)
    check(shown.response == "EXPUNGED", "message_attempt.expunge_content")
    svix.message.expunge_content(app_id, msg.id)
    fetched = svix.message.get(app_id, msg.id, MessageGetOptions(with_content=True))
    check(fetched.payload == {"expired": True}, "message.expunge_content")
    try:
        svix.message.expunge_content(app_id, "msg_nope")
        check(False, "expunging a missing message refused")
    except HttpError as e:
        check(e.status_code == 404, "expunging a missing message is HttpError 404")
    svix.endpoint.delete(app_id, ep.id)


def background_tasks(svix, receiver_url):
    """Replaying what an endpoint missed and expunging every payload run as background tasks
    the SDK starts, follows and lists."""
    app = svix.application.create(ApplicationIn(name="Tasks"))
    for n in range(2):
        svix.message.create(app.id, MessageIn(event_type="order.shipped", payload={"n": n}))
    # Created after the messages: it never had them.
    ep = svix.endpoint.create(app.id, EndpointIn(url=receiver_url))
    since = datetime(2020, 1, 1, tzinfo=timezone.utc)
    started = svix.endpoint.replay_missing(app.id, ep.id, ReplayIn(since=since))
    check(str(started.task) == "endpoint.replay", "endpoint.replay_missing")
    done = wait_for("the replay", lambda: _finished(svix, started.id))
    check(done.data["messagesSent"] == 2, "background_task.get: the replay sent both")
    replays = svix.background_task.list(BackgroundTaskListOptions(task=BackgroundTaskType.ENDPOINT_REPLAY))
    check(any(t.id == started.id for t in replays.data), "background_task.list")
    # Sent once each now: a bulk replay of the succeeded ones sends both again.
    wait_for("both delivered", lambda: all(
        str(d.status) == "0" for d in svix.message_attempt.list_attempted_messages(app.id, ep.id).data
    ) and len(svix.message_attempt.list_attempted_messages(app.id, ep.id).data) == 2)
    bulk = svix.endpoint.bulk_replay(app.id, ep.id, BulkReplayIn(since=since, status=MessageStatus.SUCCESS))
    check(str(bulk.task) == "endpoint.bulk-replay", "endpoint.bulk_replay")
    resent = wait_for("the bulk replay", lambda: _finished(svix, bulk.id))
    check(resent.data["messagesSent"] == 2, "the bulk replay sent both again")
    now = datetime.now(timezone.utc)
    usage = svix.statistics.aggregate_app_stats(
        AppUsageStatsIn(since=since, until=now, app_ids=[app.id, "no-such-app"]))
    check(usage.unresolved_app_ids == ["no-such-app"], "statistics.aggregate_app_stats")
    counted = wait_for("the app stats", lambda: _finished(svix, usage.id))
    check(counted.data["appStats"] == [{"appId": app.id, "appUid": None, "messageDestinations": 2}],
          "app stats count the two deliveries")
    aggregate = svix.statistics.aggregate_event_types()
    listed = wait_for("the event-type aggregate", lambda: _finished(svix, aggregate.id))
    mine = [line for line in listed.data["event_types"] if line["appId"] == app.id]
    check(mine == [{"appId": app.id, "explicitlySubscribedEventTypes": [], "hasCatchAllEndpoint": True}],
          "statistics.aggregate_event_types")
    purge = svix.message.expunge_all_contents(app.id)
    check(str(purge.task) == "application.purge_content", "message.expunge_all_contents")
    purged = wait_for("the expunge", lambda: _finished(svix, purge.id))
    check(purged.data["messagesPurged"] == 2, "expunge_all_contents purged both")
    svix.application.delete(app.id)


def event_catalog(svix):
    """An OpenAPI document's webhooks become event types with their schemas."""
    name = f"parcel.sent.{uuid.uuid4().hex[:8]}"
    spec = {
        "openapi": "3.1.0", "info": {"title": "Shop", "version": "1"},
        "webhooks": {name: {"post": {"summary": "A parcel was sent", "requestBody": {"content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Parcel"}}}}}}},
        "components": {"schemas": {"Parcel": {"type": "object", "properties": {"id": {"type": "integer"}}}}},
    }
    dry = svix.event_type.import_openapi(EventTypeImportOpenApiIn(spec=spec, dry_run=True))
    check([t.name for t in dry.data.to_modify] == [name] and dry.data.modified == [],
          "event_type.import_openapi dry run")
    done = svix.event_type.import_openapi(EventTypeImportOpenApiIn(spec=spec))
    check(done.data.modified == [name], "event_type.import_openapi")
    imported = svix.event_type.get(name)
    check(imported.schemas["1"]["properties"]["id"] == {"type": "integer"}, "the imported schema")


def _finished(svix, task_id):
    task = svix.background_task.get(task_id)
    return task if str(task.status) == "finished" else None


def portal(svix, base_url, app_id, ep_id):
    """A portal link for one application: its token reads that application only."""
    access = svix.authentication.app_portal_access(app_id, AppPortalAccessIn())
    check(access.url == f"{base_url}/portal/login#token={access.token}", "authentication.app_portal_access link")
    customer = Svix(access.token, SvixOptions(server_url=base_url, retry_schedule=[]))
    check(ep_id in [e.id for e in customer.endpoint.list(app_id).data], "the portal token reads its application")
    try:
        customer.application.list()
        check(False, "the portal token cannot list applications")
    except HttpError as e:
        check(e.status_code == 403, "the portal token is scoped: 403 elsewhere")
    customer.authentication.logout()
    try:
        customer.endpoint.list(app_id)
        check(False, "a logged-out token is refused")
    except HttpError as e:
        check(e.status_code == 401, "authentication.logout revokes the token")


def operational_endpoints(svix, receiver_url):
    """Svix's operational-webhook endpoint API: the reserved application's endpoints."""
    created = svix.operational_webhook.endpoint.create(
        OperationalWebhookEndpointIn(url=receiver_url, event_types=["endpoint.created"], description="ops")
    )
    check(created.id.startswith("ep_") and created.event_types == ["endpoint.created"],
          "operational_webhook.endpoint.create")
    check(svix.operational_webhook.endpoint.get(created.id).url == receiver_url,
          "operational_webhook.endpoint.get")
    check(any(e.id == created.id for e in svix.operational_webhook.endpoint.list().data),
          "operational_webhook.endpoint.list")
    updated = svix.operational_webhook.endpoint.upsert(
        created.id, OperationalWebhookEndpointUpsertIn(url=receiver_url, description="ops, renamed")
    )
    check(updated.description == "ops, renamed", "operational_webhook.endpoint.upsert")
    secret = svix.operational_webhook.endpoint.get_secret(created.id)
    check(secret.key.startswith("whsec_"), "operational_webhook.endpoint.get_secret")
    svix.operational_webhook.endpoint.rotate_secret(created.id, OperationalWebhookEndpointSecretIn())
    check(svix.operational_webhook.endpoint.get_secret(created.id).key != secret.key,
          "operational_webhook.endpoint.rotate_secret")
    svix.operational_webhook.endpoint.set_headers(
        created.id, OperationalWebhookEndpointHeadersIn(headers={"X-Team": "ops"})
    )
    check(svix.operational_webhook.endpoint.get_headers(created.id).headers == {"X-Team": "ops"},
          "operational_webhook.endpoint.set_headers / get_headers")
    svix.operational_webhook.endpoint.delete(created.id)
    try:
        svix.operational_webhook.endpoint.get(created.id)
        check(False, "deleted operational endpoint is gone")
    except HttpError as e:
        check(e.status_code == 404, "operational_webhook.endpoint.delete")


def main(base_url, token, receiver_url):
    svix = Svix(token, SvixOptions(server_url=base_url, retry_schedule=[]))
    suffix = uuid.uuid4().hex[:8]

    # Applications
    app = svix.application.create(ApplicationIn(name="Acme", uid=f"acme-{suffix}", metadata={"tier": "gold"}))
    check(app.id.startswith("app_") and app.metadata == {"tier": "gold"}, "application.create")
    check(svix.application.get(app.uid).id == app.id, "application.get by uid")
    same = svix.application.get_or_create(ApplicationIn(name="Acme", uid=app.uid))
    check(same.id == app.id, "application.get_or_create returns the existing app")
    renamed = svix.application.upsert(app.id, ApplicationIn(name="Acme Inc", uid=app.uid))
    check(renamed.name == "Acme Inc", "application.upsert")
    patched = svix.application.patch(app.id, ApplicationPatch(metadata={"tier": "platinum"}))
    check(patched.metadata == {"tier": "platinum"} and patched.name == "Acme Inc", "application.patch")
    listed = svix.application.list(ApplicationListOptions(limit=250))
    check(any(a.id == app.id for a in listed.data), "application.list")
    try:
        svix.application.create(ApplicationIn(name="Dup", uid=app.uid))
        check(False, "duplicate uid refused")
    except HttpError as e:
        check(e.status_code == 409, "duplicate uid is HttpError 409")
    try:
        svix.application.get("no-such-app")
        check(False, "unknown app refused")
    except HttpError as e:
        check(e.status_code == 404, "unknown app is HttpError 404")

    # Event types
    name = f"order.shipped.{suffix}"
    et = svix.event_type.create(EventTypeIn(name=name, description="An order was shipped"))
    check(et.name == name and not et.deprecated, "event_type.create")
    check(svix.event_type.get(name).description == "An order was shipped", "event_type.get")
    et = svix.event_type.upsert(name, EventTypeUpsertIn(description="Shipped"))
    check(et.description == "Shipped", "event_type.upsert")
    et = svix.event_type.patch(name, EventTypePatch(deprecated=True))
    check(et.deprecated, "event_type.patch")
    check(any(e.name == name for e in svix.event_type.list().data), "event_type.list")

    # Endpoints
    ep = svix.endpoint.create(
        app.id,
        EndpointIn(url="http://127.0.0.1:9/hook", uid=f"ep-{suffix}", event_types=[name], description="orders"),
    )
    check(ep.id.startswith("ep_") and ep.event_types == [name], "endpoint.create")
    check(svix.endpoint.get(app.id, ep.uid).id == ep.id, "endpoint.get by uid")
    ep = svix.endpoint.upsert(app.id, ep.id, EndpointUpsertIn(url="http://127.0.0.1:9/v2", event_types=[name]))
    check(ep.url == "http://127.0.0.1:9/v2", "endpoint.upsert")
    ep = svix.endpoint.patch(app.id, ep.id, EndpointPatch(description="patched"))
    check(ep.description == "patched" and ep.url.endswith("/v2"), "endpoint.patch")
    check([e.id for e in svix.endpoint.list(app.id).data] == [ep.id], "endpoint.list")
    secret = svix.endpoint.get_secret(app.id, ep.id)
    check(secret.key.startswith("whsec_"), "endpoint.get_secret")
    rotated = svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn())
    check(rotated.key.startswith("whsec_") and rotated.key != secret.key, "endpoint.rotate_secret answers a new secret")
    check(svix.endpoint.get_secret(app.id, ep.id).key == rotated.key, "the rotated secret is current")
    own = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    rotated = svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn(key=own, grace_period_seconds=3600))
    check(rotated.key == own, "endpoint.rotate_secret takes the caller's key and grace period")
    try:
        svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn(grace_period_seconds=8 * 86400))
        check(False, "a grace period over 7 days refused")
    except HTTPValidationError as e:
        check(e.detail[0].loc[-1] == "gracePeriodSeconds", "a grace period over 7 days is HTTPValidationError")
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Tenant": "42"}))
    svix.endpoint.patch_headers(app.id, ep.id, EndpointHeadersPatchIn(headers={"X-Region": "eu"}))
    check(svix.endpoint.get_headers(app.id, ep.id).headers == {"X-Tenant": "42", "X-Region": "eu"}, "endpoint headers")
    try:
        svix.endpoint.create(app.id, EndpointIn(url="ftp://example.com"))
        check(False, "bad url refused")
    except HTTPValidationError as e:
        check(e.detail[0].loc[-1] == "url", "bad url is HTTPValidationError naming url")

    # Messages
    msg = svix.message.create(app.id, MessageIn(event_type=name, event_id=f"evt-{suffix}", payload={"orderId": 1003}))
    # SDK v2 asks for with_content=false unless told otherwise, so payloads come back as {}.
    check(msg.id.startswith("msg_") and msg.event_type == name, "message.create")
    fetched = svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True))
    check(fetched.event_id == f"evt-{suffix}" and fetched.payload == {"orderId": 1003}, "message.get")
    check(svix.message.get(app.id, f"evt-{suffix}").id == msg.id, "message.get by eventId")
    try:
        svix.message.create(app.id, MessageIn(event_type=name, event_id=f"evt-{suffix}", payload={}))
        check(False, "duplicate eventId refused")
    except HttpError as e:
        check(e.status_code == 409, "duplicate eventId is HttpError 409")
    listed = svix.message.list(app.id, MessageListOptions(event_types=[name]))
    check([m.id for m in listed.data] == [msg.id], "message.list filtered by event type")

    # Delivery log views (attempts appear once the engine delivers)
    destinations = svix.message_attempt.list_attempted_destinations(app.id, msg.id)
    check([d.id for d in destinations.data] == [ep.id], "message_attempt.list_attempted_destinations")
    check(svix.message_attempt.list_by_msg(app.id, msg.id).data is not None, "message_attempt.list_by_msg")
    check(svix.message_attempt.list_by_endpoint(app.id, ep.id).data is not None, "message_attempt.list_by_endpoint")
    attempted = svix.message_attempt.list_attempted_messages(app.id, ep.id)
    check([m.id for m in attempted.data] == [msg.id], "message_attempt.list_attempted_messages")

    deliveries(svix, app.id, name, receiver_url)
    expunging(svix, app.id, name, receiver_url)
    portal(svix, base_url, app.id, ep.id)

    # Clean-up verbs
    svix.endpoint.delete(app.id, ep.id)
    svix.event_type.delete(name)
    svix.application.delete(app.id)
    try:
        svix.application.get(app.id)
        check(False, "deleted app is gone")
    except HttpError as e:
        check(e.status_code == 404, "application.delete")
    operational_endpoints(svix, receiver_url)
    background_tasks(svix, receiver_url)
    event_catalog(svix)
    svix.health.get()
    print("svix SDK check passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
