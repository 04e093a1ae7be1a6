"""Checks, field by field, that hookd answers every field the installed Svix SDKs read.

For each resource the SDKs model, this creates one through hookd's API with every optional
value set, reads it back as raw JSON, and compares the keys with the fields each SDK's model
reads, taken from the installed packages, never from a hand-copied list:
- the Python SDK: `svix.models.*Out`, their fields' aliases;
- the JavaScript SDK (npm `svix`, when its package folder is given): the keys each model's
  `_fromJsonObject` reads (`object["…"]`) in the package's `src/models/*.ts`.
A field an SDK reads that hookd never answers fails the check, unless it is in that SDK's
`NOT_YET` (fields hookd does not have yet, each with the reason); an entry of `NOT_YET` that
hookd now answers fails it too, so the list stays true.

Usage: svix_fields_check.py BASE_URL TOKEN RECEIVER_URL [JS_PACKAGE_DIR]

JS_PACKAGE_DIR is the installed npm package (`…/node_modules/svix`).
"""

import json
import re
import sys
from pathlib import Path
import time
import urllib.request
import uuid

import svix.models as models

# Fields each SDK reads that hookd does not answer yet, by model.
NOT_YET: dict[str, dict[str, set[str]]] = {"python": {}, "javascript": {}}


def call(base, token, method, path, body=None):
    request = urllib.request.Request(
        f"{base}/api/v1{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        text = response.read()
        return json.loads(text) if text else None


def python_fields(model):
    return {field.alias or name for name, field in getattr(models, model).model_fields.items()}


# A model's serializer in the JavaScript SDK, and each key its `_fromJsonObject` reads.
JS_SERIALIZER = re.compile(
    r"export const (\w+)Serializer = \{\s*_fromJsonObject\(object[^)]*\)[^{]*\{(.*?)\n  \},",
    re.S,
)
JS_READ = re.compile(r'object\["([^"]+)"\]')


def javascript_models(package_dir):
    """The fields each model of the JavaScript SDK at `package_dir` reads, by model name."""
    found = {}
    for source in sorted(Path(package_dir, "src", "models").glob("*.ts")):
        for name, body in JS_SERIALIZER.findall(source.read_text(encoding="utf-8")):
            found[name] = set(JS_READ.findall(body))
    if not found:
        raise SystemExit(f"no model serializers found under {package_dir}/src/models")
    return found


def javascript_fields(package_dir):
    found = javascript_models(package_dir)

    def fields(model):
        if model not in found:
            raise SystemExit(f"the JavaScript SDK at {package_dir} has no model {model}")
        return found[model]

    return fields


def answers(base, token, receiver_url):
    """One answer of hookd's for each model the SDKs read, as raw JSON, by model name."""
    api = lambda method, path, body=None: call(base, token, method, path, body)
    suffix = uuid.uuid4().hex[:8]
    event_type = f"order.shipped.{suffix}"
    api("POST", "/event-type", {
        "name": event_type, "description": "An order left the warehouse",
        "groupName": "orders", "featureFlags": ["beta"],
        "schemas": {"1": {"type": "object"}},
    })
    app = api("POST", "/app", {
        "name": "Fields", "uid": f"fields-{suffix}", "metadata": {"tier": "gold"}, "throttleRate": 100,
    })
    endpoint = api("POST", f"/app/{app['id']}/endpoint", {
        "url": receiver_url, "uid": f"ep-{suffix}", "description": "orders",
        "eventTypes": [event_type], "channels": ["eu"], "metadata": {"team": "ops"},
        "throttleRate": 50,
    })
    message = api("POST", f"/app/{app['id']}/msg", {
        "eventType": event_type, "eventId": f"evt-{suffix}", "channels": ["eu"],
        "payload": {"orderId": 1},
    })
    deadline = time.monotonic() + 20
    while True:
        attempts = api("GET", f"/app/{app['id']}/attempt/msg/{message['id']}?with_msg=true")
        if attempts["data"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    ops = api("POST", "/operational-webhook/endpoint", {
        "url": receiver_url, "description": "ops", "eventTypes": ["endpoint.created"],
        "metadata": {"team": "ops"}, "throttleRate": 10,
    })
    answered = {
        "ApplicationOut": api("GET", f"/app/{app['id']}"),
        "ListResponseApplicationOut": api("GET", "/app"),
        "EndpointOut": api("GET", f"/app/{app['id']}/endpoint/{endpoint['id']}"),
        "EventTypeOut": api("GET", f"/event-type/{event_type}"),
        "MessageOut": api("GET", f"/app/{app['id']}/msg/{message['id']}"),
        "MessageAttemptOut": attempts["data"][0],
        "EndpointMessageOut": api("GET", f"/app/{app['id']}/endpoint/{endpoint['id']}/msg")["data"][0],
        "MessageEndpointOut": api("GET", f"/app/{app['id']}/msg/{message['id']}/endpoint")["data"][0],
        "OperationalWebhookEndpointOut": api("GET", f"/operational-webhook/endpoint/{ops['id']}"),
        "ListResponseOperationalWebhookEndpointOut": api("GET", "/operational-webhook/endpoint"),
        "OperationalWebhookEndpointSecretOut": api("GET", f"/operational-webhook/endpoint/{ops['id']}/secret"),
        "OperationalWebhookEndpointHeadersOut": api("GET", f"/operational-webhook/endpoint/{ops['id']}/headers"),
    }
    replay = api("POST", f"/app/{app['id']}/endpoint/{endpoint['id']}/replay-missing",
                 {"since": "2020-01-01T00:00:00Z"})
    answered.update({
        "ReplayOut": replay,
        "BackgroundTaskOut": api("GET", f"/background-task/{replay['id']}"),
        "ListResponseBackgroundTaskOut": api("GET", "/background-task"),
        "ExpungeAllContentsOut": api("POST", f"/app/{app['id']}/msg/expunge-all-contents"),
        "AppUsageStatsOut": api("POST", "/stats/usage/app",
                                {"since": "2020-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z"}),
        "AggregateEventTypesOut": api("PUT", "/stats/usage/event-types"),
        "EventTypeImportOpenApiOut": api("POST", "/event-type/import/openapi", {
            "dryRun": True, "spec": {"webhooks": {event_type: {"post": {}}}}}),
    })
    answered["EventTypeImportOpenApiOutData"] = answered["EventTypeImportOpenApiOut"]["data"]
    answered["EventTypeFromOpenApi"] = answered["EventTypeImportOpenApiOutData"]["to_modify"][0]
    endpoint_path = f"/app/{app['id']}/endpoint/{endpoint['id']}"
    answered.update({
        "ListResponseEndpointOut": api("GET", f"/app/{app['id']}/endpoint"),
        "ListResponseEventTypeOut": api("GET", "/event-type"),
        "ListResponseMessageOut": api("GET", f"/app/{app['id']}/msg"),
        "ListResponseMessageAttemptOut": attempts,
        "ListResponseEndpointMessageOut": api("GET", f"{endpoint_path}/msg"),
        "ListResponseMessageEndpointOut": api("GET", f"/app/{app['id']}/msg/{message['id']}/endpoint"),
        "EndpointSecretOut": api("GET", f"{endpoint_path}/secret"),
        "EndpointHeadersOut": api("GET", f"{endpoint_path}/headers"),
        "EndpointStats": api("GET", f"{endpoint_path}/stats"),
        "RecoverOut": api("POST", f"{endpoint_path}/recover", {"since": "2020-01-01T00:00:00Z"}),
        "MessagePrecheckOut": api("POST", f"/app/{app['id']}/msg/precheck/active", {"eventType": event_type}),
        "AppPortalAccessOut": api("POST", f"/auth/app-portal-access/{app['id']}", {}),
    })
    return answered


def unanswered(sdk, fields, answered):
    """What `sdk`'s models (`fields` gives each one's) read that hookd never answers."""
    wrong = []
    for model, body in answered.items():
        read = fields(model)
        missing = read - set(body)
        not_yet = NOT_YET[sdk].get(model, set())
        if missing - not_yet:
            wrong.append(f"{sdk} {model}: the SDK reads {sorted(missing - not_yet)}, hookd never answers them")
        if not_yet - missing:
            wrong.append(f"{sdk} {model}: hookd now answers {sorted(not_yet - missing)}: take them out of NOT_YET")
        print(f"ok  {sdk} {model}: {len(read)} fields" + (f" ({sorted(missing)} not yet)" if missing else ""))
    return wrong


def main(base, token, receiver_url, js_package_dir=None):
    answered = answers(base, token, receiver_url)
    sdks = {"python": python_fields}
    if js_package_dir:
        sdks["javascript"] = javascript_fields(js_package_dir)
    wrong = [line for sdk, fields in sdks.items() for line in unanswered(sdk, fields, answered)]
    if wrong:
        raise SystemExit("\n".join(wrong))
    print(f"svix fields check passed: {', '.join(sdks)}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
