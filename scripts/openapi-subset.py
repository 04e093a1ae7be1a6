#!/usr/bin/env python3
"""Writes crates/hookd-api/openapi.json: the operations of Svix's OpenAPI document that hookd
serves, with the schemas they reference. Run it after adding a route:

    python3 scripts/openapi-subset.py ../shared/reference/svix-oss-openapi.json
"""
import json
import sys
from pathlib import Path

SERVED = {
    "/api/v1/app": ["get", "post"],
    "/api/v1/app/{app_id}": ["get", "put", "patch", "delete"],
    "/api/v1/app/{app_id}/endpoint": ["get", "post"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}": ["get", "put", "patch", "delete"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret": ["get"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate": ["post"],
    "/api/v1/auth/app-portal-access/{app_id}": ["post"],
    "/api/v1/auth/logout": ["post"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers": ["get", "put", "patch"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/msg": ["get"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover": ["post"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/send-example": ["post"],
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/stats": ["get"],
    "/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend": ["post"],
    "/api/v1/app/{app_id}/attempt/endpoint/{endpoint_id}": ["get"],
    "/api/v1/app/{app_id}/attempt/msg/{msg_id}": ["get"],
    "/api/v1/app/{app_id}/msg": ["get", "post"],
    "/api/v1/app/{app_id}/msg/{msg_id}": ["get"],
    "/api/v1/app/{app_id}/msg/{msg_id}/content": ["delete"],
    "/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content": ["delete"],
    "/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}": ["get"],
    "/api/v1/app/{app_id}/msg/{msg_id}/endpoint": ["get"],
    "/api/v1/event-type": ["get", "post"],
    "/api/v1/event-type/{event_type_name}": ["get", "put", "patch", "delete"],
    "/api/v1/health": ["get"],
    "/api/v1/health/ping": ["get"],
}


TIMEOUT = {
    "description": "hookd addition: this endpoint's attempt timeout in seconds, instead of "
    "the server's default.",
    "format": "uint16", "maximum": 30, "minimum": 1, "nullable": True, "type": "integer",
}
MAX_CONCURRENCY = {
    "description": "hookd addition: at most this many attempts in flight to this endpoint at "
    "once (across every hookd process), when lower than the server's ceiling "
    "(`--endpoint-max-concurrency`).",
    "format": "uint16", "maximum": 1000, "minimum": 1, "nullable": True, "type": "integer",
}
DISABLED = {
    "disabledAt": {
        "description": "When the endpoint was disabled, while it is.",
        "format": "date-time", "nullable": True, "type": "string",
    },
    "disabledReason": {
        "description": "Why the endpoint is disabled (by hookd, or through the API), while it is.",
        "nullable": True, "type": "string",
    },
}
RATE_LIMIT = {
    "description": "hookd: the same as throttleRate (deliveries per second), under its newer name.",
    "format": "uint16", "nullable": True, "type": "integer",
}
# Given on create or replace, a rate is at least 1, as throttleRate's is there.
RATE_LIMIT_IN = {**RATE_LIMIT, "minimum": 1}
SCHEMES = {
    "description": "hookd addition: the signature schemes the endpoint signs with: `v1` "
    "(HMAC-SHA256 with the whsec_ secret; the default) and/or `v1a` (ed25519; receivers verify "
    "with `publicKey`, hookd keeps the private key sealed).",
    "items": {"enum": ["v1", "v1a"], "type": "string"}, "minItems": 1, "type": "array",
}
PUBLIC_KEY = {
    "description": "hookd addition: the whpk_ ed25519 public key receivers verify `v1a` "
    "signatures with, when the endpoint signs `v1a`.",
    "nullable": True, "type": "string",
}
FILTER_TYPES = {
    "description": "hookd: the same as `eventTypes`, under the name Svix's cloud API gives it; "
    "send one of the two. Answers show both.",
}
FILTER_TYPES_OUT = {
    "description": "hookd: the same list as `eventTypes`, under the name Svix's cloud API "
    "gives it.",
}
HEADERS = {
    "description": "hookd: custom headers sent with every delivery to the endpoint, as the "
    "endpoint's headers route sets them (at most 20, none of those hookd sets itself).",
    "maxProperties": 20, "nullable": True,
}
# Properties hookd reads where Svix's schema lacks them, made from Svix's own definitions:
# (schema, property) -> (Svix's schema, its property, what hookd changes in it).
BORROWED = {
    ("EndpointIn", "filterTypes"): ("EndpointIn", "eventTypes", FILTER_TYPES),
    ("EndpointUpdate", "filterTypes"): ("EndpointUpdate", "eventTypes", FILTER_TYPES),
    ("EndpointPatch", "filterTypes"): ("EndpointPatch", "eventTypes", FILTER_TYPES),
    ("EndpointOut", "filterTypes"): ("EndpointOut", "eventTypes", FILTER_TYPES_OUT),
    ("MessageEndpointOut", "filterTypes"): ("MessageEndpointOut", "eventTypes", FILTER_TYPES_OUT),
    ("EndpointIn", "headers"): ("EndpointHeadersIn", "headers", HEADERS),
    ("EndpointUpdate", "headers"): (
        "EndpointHeadersIn", "headers",
        {**HEADERS, "description": HEADERS["description"] + " Without it the endpoint keeps "
         "the headers it has."},
    ),
    ("EndpointUpdate", "secret"): (
        "EndpointIn", "secret",
        {"description": "hookd: the secret of the endpoint PUT creates (for a uid no endpoint "
         "of the application has yet), as on create. An existing endpoint keeps its secret; "
         "the endpoint's secret/rotate route changes it."},
    ),
}
RETENTION = {
    "payloadRetentionPeriod": {
        "description": "Days this message's payload and attempts are kept once every delivery "
        "is settled, instead of the server's retention window (`--retention`). Mutually "
        "exclusive with `payloadRetentionHours`.",
        "example": 90, "format": "int64", "maximum": 3650, "minimum": 1, "nullable": True,
        "type": "integer",
    },
    "payloadRetentionHours": {
        "description": "The same in hours. Mutually exclusive with `payloadRetentionPeriod`.",
        "example": 24, "format": "int64", "maximum": 87600, "minimum": 1, "nullable": True,
        "type": "integer",
    },
}
ENVELOPE = {
    "envelope": {
        "description": "hookd addition: its messages go out in the Standard Webhooks envelope "
        "`{\"type\", \"timestamp\", \"data\"}`, built by hookd around the published payload "
        "(on where the application or the event type asks for it). Shown only when on; a PUT "
        "without it leaves it as it is.",
        "nullable": True, "type": "boolean",
    }
}
OCCURRED_AT = {
    "occurredAt": {
        "description": "hookd addition: when the event happened (RFC 3339), the envelope's "
        "`timestamp` where the envelope is on; the publish time when not given.",
        "format": "date-time", "nullable": True, "type": "string",
    }
}
# hookd's additions to Svix's schemas: (properties, names added to `required`). A property
# Svix's schema has too is replaced whole.
ADDITIONS = {
    "EventTypeOut": (
        {
            "example": {
                "description": "hookd addition, with the content: an example payload of the "
                "newest schema (its own example, or one made from it).",
                "nullable": True, "type": "object",
            },
            **ENVELOPE,
        },
        [],
    ),
    "EventTypeIn": (ENVELOPE, []),
    "EventTypeUpdate": (ENVELOPE, []),
    "EventTypePatch": (ENVELOPE, []),
    "ApplicationIn": (ENVELOPE, []),
    "ApplicationOut": (ENVELOPE, []),
    "ApplicationPatch": (ENVELOPE, []),
    "MessageIn": ({**RETENTION, **OCCURRED_AT}, []),
    "EndpointSecretOut": ({"publicKey": PUBLIC_KEY}, []),
    "EndpointSecretRotateIn": (
        {
            "key": {
                "description": "The new key: a whsec_ secret rotates `v1`, a whsk_ ed25519 key "
                "(hookd addition) rotates `v1a`. Without it hookd makes a new key for every "
                "scheme the endpoint signs with.",
                "nullable": True, "type": "string",
            }
        },
        [],
    ),
    "EndpointIn": (
        {
            "timeoutSeconds": TIMEOUT, "maxConcurrency": MAX_CONCURRENCY,
            "rateLimit": RATE_LIMIT_IN, "signatureSchemes": SCHEMES,
        },
        [],
    ),
    "EndpointUpdate": (
        {
            "timeoutSeconds": TIMEOUT, "maxConcurrency": MAX_CONCURRENCY,
            "rateLimit": RATE_LIMIT_IN, "signatureSchemes": SCHEMES,
        },
        [],
    ),
    "EndpointPatch": (
        {
            "timeoutSeconds": TIMEOUT, "maxConcurrency": MAX_CONCURRENCY,
            "rateLimit": RATE_LIMIT, "signatureSchemes": SCHEMES,
        },
        [],
    ),
    "EndpointOut": (
        {
            "timeoutSeconds": TIMEOUT, "maxConcurrency": MAX_CONCURRENCY, "rateLimit": RATE_LIMIT,
            **DISABLED, "signatureSchemes": SCHEMES, "publicKey": PUBLIC_KEY,
        },
        [],
    ),
    "MessageEndpointOut": (
        {
            "timeoutSeconds": TIMEOUT, "maxConcurrency": MAX_CONCURRENCY, "rateLimit": RATE_LIMIT,
            **DISABLED,
        },
        [],
    ),
    "MessageAttemptOut": (
        {
            "responseHead": {
                "description": "hookd addition: the response's status line and headers, "
                "capped; empty when no response arrived.",
                "type": "string",
            }
        },
        ["responseHead"],
    ),
    "EndpointStats": (
        {
            "since": {
                "description": "hookd addition: the start of the period counted (default: a "
                "day before until).",
                "format": "date-time", "type": "string",
            },
            "until": {
                "description": "hookd addition: the end of the period counted (default: now).",
                "format": "date-time", "type": "string",
            },
            "attempts": {
                "description": "hookd addition: attempts made to the endpoint in the period.",
                "format": "uint64", "type": "integer",
            },
            "successfulAttempts": {
                "description": "hookd addition: how many of those attempts succeeded.",
                "format": "uint64", "type": "integer",
            },
            "successRate": {
                "description": "hookd addition: successfulAttempts / attempts; null without "
                "attempts.",
                "format": "double", "nullable": True, "type": "number",
            },
            "concurrencyLimit": {
                "description": "hookd addition: the attempts this process's engine lets the "
                "endpoint have in flight now (adapted to its answers, within its ceiling); null "
                "when the engine has no work for it or the process runs none.",
                "format": "uint", "nullable": True, "type": "integer",
            },
            "inFlight": {
                "description": "hookd addition: the endpoint's attempts in flight from this "
                "process now; null as for concurrencyLimit.",
                "format": "uint", "nullable": True, "type": "integer",
            },
        },
        ["attempts", "since", "successfulAttempts", "until"],
    ),
    "RecoverOut": (
        {
            "recovered": {
                "description": "hookd addition: how many failed deliveries were queued again.",
                "format": "uint64", "type": "integer",
            }
        },
        [],
    ),
}

# hookd's query parameters beside Svix's: (path, method) -> parameters.
PARAMETER_ADDITIONS = {
    ("/api/v1/app/{app_id}/msg", "get"): [
        {
            "description": "hookd addition: only messages with at least one delivery in this "
            "state (0 success, 1 pending, 2 fail, 3 sending; 1 takes 3 too).",
            "in": "query",
            "name": "status",
            "schema": {"$ref": "#/components/schemas/MessageStatus"},
            "style": "form",
        }
    ],
}


# hookd's operations that Svix does not have: path -> method -> operation.
OPERATION_ADDITIONS = {
    "/api/v1/auth/whoami": {
        "get": {
            "description": "hookd addition: what the calling token may see: every application "
            "(`admin`) or one (`app`, with its id).",
            "operationId": "hookd.auth.whoami",
            "responses": {
                "200": {
                    "content": {"application/json": {"schema": {
                        "properties": {
                            "scope": {"enum": ["admin", "app"], "type": "string"},
                            "appId": {"nullable": True, "type": "string"},
                        },
                        "required": ["scope"],
                        "type": "object",
                    }}},
                    "description": "",
                },
                "401": {"content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/HttpErrorOut"}}}, "description": "Unauthorized"},
            },
            "summary": "Who Am I",
            "tags": ["Authentication"],
        }
    },
}


def add_hookd_parameters(paths):
    for (path, method), parameters in PARAMETER_ADDITIONS.items():
        paths[path][method].setdefault("parameters", []).extend(parameters)


TOKEN_OUT = {
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "appId": {"description": "The application the token is limited to; null for an admin "
                  "token.", "nullable": True, "type": "string"},
        "createdAt": {"format": "date-time", "type": "string"},
        "expiresAt": {"format": "date-time", "nullable": True, "type": "string"},
        "revokedAt": {"format": "date-time", "nullable": True, "type": "string"},
        "rateLimit": {"description": "Requests per second; the server's default when null.",
                      "format": "uint32", "nullable": True, "type": "integer"},
        "readOnly": {"type": "boolean"},
    },
    "required": ["id", "name", "createdAt", "readOnly"],
    "type": "object",
}
TOKEN_IN = {
    "properties": {
        "name": {"maxLength": 256, "type": "string"},
        "appId": {"description": "Limit the token to this application (id or uid); an admin "
                  "token without it.", "nullable": True, "type": "string"},
        "expiresInSeconds": {"format": "uint64", "nullable": True, "type": "integer"},
        "rateLimit": {"format": "uint32", "minimum": 1, "nullable": True, "type": "integer"},
        "readOnly": {"default": False, "type": "boolean"},
    },
    "type": "object",
}
TOKEN_CREATED = {
    "allOf": [
        {"$ref": "#/components/schemas/ApiTokenOut"},
        {"properties": {"token": {"description": "The token itself, shown only here.",
                                  "type": "string"}},
         "required": ["token"], "type": "object"},
    ]
}
TOKEN_LIST = {
    "properties": {
        "data": {"items": {"$ref": "#/components/schemas/ApiTokenOut"}, "type": "array"},
        "done": {"type": "boolean"},
        "iterator": {"nullable": True, "type": "string"},
        "prevIterator": {"nullable": True, "type": "string"},
    },
    "required": ["data", "done"],
    "type": "object",
}
ERRORS = {
    "401": {"description": "Unauthorized"},
    "403": {"description": "Forbidden: not an admin token"},
    "429": {"description": "The token's rate limit: Retry-After says when to retry"},
}
# hookd's own operations (not in Svix's document).
HOOKD_PATHS = {
    "/api/v1/auth/token": {
        "get": {
            "description": "hookd addition: API tokens, never their text (admin only).",
            "operationId": "hookd.token.list", "tags": ["Authentication"],
            "parameters": [{"in": "query", "name": "limit", "schema": {"type": "integer"}},
                           {"in": "query", "name": "iterator", "schema": {"type": "string"}}],
            "responses": {"200": {"content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/ListResponse_ApiTokenOut_"}}}, "description": ""},
                **ERRORS},
        },
        "post": {
            "description": "hookd addition: creates an admin or app-scoped token; its text is "
            "in this answer only (admin only).",
            "operationId": "hookd.token.create", "tags": ["Authentication"],
            "requestBody": {"content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/ApiTokenIn"}}}, "required": True},
            "responses": {"201": {"content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/ApiTokenCreatedOut"}}}, "description": ""},
                **ERRORS},
        },
    },
    "/api/v1/auth/token/{token_id}": {
        "delete": {
            "description": "hookd addition: revokes a token; it stays listed, revoked.",
            "operationId": "hookd.token.revoke", "tags": ["Authentication"],
            "parameters": [{"in": "path", "name": "token_id", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"204": {"description": "no content"}, **ERRORS},
        },
    },
}
HOOKD_SCHEMAS = {
    "ApiTokenOut": TOKEN_OUT,
    "ApiTokenIn": TOKEN_IN,
    "ApiTokenCreatedOut": TOKEN_CREATED,
    "ListResponse_ApiTokenOut_": TOKEN_LIST,
}
NO_CONTENT = {"204": {"description": "no content"}}
# Where hookd answers otherwise than Svix's document, following what the official SDKs expect.
RESPONSES = {
    ("/api/v1/app/{app_id}/msg/{msg_id}/content", "delete"): NO_CONTENT,
    ("/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content", "delete"): NO_CONTENT,
    ("/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate", "post"): {
        "200": {
            "content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/EndpointSecretOut"}}},
            "description": "hookd (as the Svix SDKs read it): the new secret, or for a "
            "v1a-only endpoint the new public key.",
        },
    },
}

# Where hookd's behaviour needs other words than Svix's description.
DESCRIPTIONS = {
    ("/api/v1/app/{app_id}/msg/{msg_id}/content", "delete"):
        "Delete the given message's payload now, whatever its deliveries. Useful in cases when "
        "a message was accidentally sent with sensitive content.\n\nThe message can't be resent "
        "once its payload has been deleted or has expired; it then reads `{\"expired\": true}`.",
    ("/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content", "delete"):
        "Deletes the given attempt's response body (and, in hookd, its response head). Useful "
        "when an endpoint accidentally returned sensitive content. The response then reads "
        "`EXPUNGED`.",
}


# Background tasks, statistics and the OpenAPI import (not in Svix's open-source document):
# Svix's cloud API's shapes.
TEXT = {"type": "string"}
TIME = {"format": "date-time", "type": "string"}
TEXTS = {"items": TEXT, "nullable": True, "type": "array"}


def ref(name):
    return {"$ref": f"#/components/schemas/{name}"}


def path_param(name):
    return {"in": "path", "name": name, "required": True, "schema": TEXT, "style": "simple"}


def query_param(name, schema):
    return {"in": "query", "name": name, "schema": schema}


def answer(code, schema, errors):
    described = {"401": "Unauthorized", "403": "Forbidden", "404": "Not Found",
                 "422": "Validation Error"}
    return {code: {"content": {"application/json": {"schema": ref(schema)}}, "description": ""},
            **{error: {"description": described[error]} for error in errors}}


def operation(description, operation_id, summary, tag, responses, parameters=(), body=None):
    op = {"description": description, "operationId": operation_id, "summary": summary,
          "tags": [tag]}
    if parameters:
        op["parameters"] = list(parameters)
    if body:
        op["requestBody"] = {"content": {"application/json": {"schema": ref(body)}},
                             "required": True}
    op["responses"] = responses
    return op


ALL_ERRORS = ("401", "403", "404", "422")
ENDPOINT_PARAMS = (path_param("app_id"), path_param("endpoint_id"))
TASK_PATHS = {
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/replay-missing": {"post": operation(
        "Replays the messages of the application created since `since` (and before `until`, "
        "when given) that this endpoint's filters take and that were never sent to it, for "
        "example while it was disabled, as a background task.",
        "v1.endpoint.replay-missing", "Replay Missing Webhooks", "Endpoint",
        answer("202", "ReplayOut", ALL_ERRORS), ENDPOINT_PARAMS, "ReplayIn")},
    "/api/v1/app/{app_id}/endpoint/{endpoint_id}/bulk-replay": {"post": operation(
        "Sends again the messages of the application created since `since` (and before "
        "`until`, when given) that were sent to this endpoint before, succeeded or failed, and "
        "that the filters take (event types, channel, tag, the delivery's status, the last "
        "attempt's status class), as a background task.",
        "v1.endpoint.bulk-replay", "Bulk Replay Messages", "Endpoint",
        answer("202", "ReplayOut", ALL_ERRORS), ENDPOINT_PARAMS, "BulkReplayIn")},
    "/api/v1/app/{app_id}/msg/expunge-all-contents": {"post": operation(
        "Deletes the payload of every message of the application, as a background task.",
        "v1.message.expunge-all-contents", "Expunge All Contents", "Message",
        answer("202", "ExpungeAllContentsOut", ALL_ERRORS), [path_param("app_id")])},
    "/api/v1/background-task": {"get": operation(
        "Background tasks, newest first (an application's token sees its application's).",
        "v1.background-task.list", "List Background Tasks", "Background Tasks",
        answer("200", "ListResponse_BackgroundTaskOut_", ALL_ERRORS),
        [query_param("status", ref("BackgroundTaskStatus")),
         query_param("task", ref("BackgroundTaskType")), query_param("order", ref("Ordering")),
         query_param("limit", {"type": "integer"}), query_param("iterator", TEXT)])},
    "/api/v1/background-task/{task_id}": {"get": operation(
        "A background task and its progress.",
        "v1.background-task.get", "Get Background Task", "Background Tasks",
        answer("200", "BackgroundTaskOut", ALL_ERRORS), [path_param("task_id")])},
    "/api/v1/stats/usage/app": {"post": operation(
        "Counts, per application, the deliveries (message destinations) of its messages "
        "created in the period, as a background task; its data's `appStats` holds the counts "
        "(admin only).",
        "v1.statistics.aggregate-app-stats", "Aggregate App Stats", "Statistics",
        answer("202", "AppUsageStatsOut", ("401", "403", "422")), body="AppUsageStatsIn")},
    "/api/v1/stats/usage/event-types": {"put": operation(
        "Lists, per application, the event types its endpoints subscribe to by name and "
        "whether one takes every type, as a background task (its data's `event_types`; admin "
        "only).",
        "v1.statistics.aggregate-event-types", "Aggregate Event Types", "Statistics",
        answer("202", "AggregateEventTypesOut", ("401", "403")))},
    "/api/v1/event-type/import/openapi": {"post": operation(
        "Creates or updates the event types an OpenAPI document's webhooks (`webhooks`, or "
        "`x-webhooks`) describe, each webhook's request body schema (with its `$ref`s "
        "resolved) becoming the event type's schema version 1. `dryRun` says what would "
        "change; `replaceAll` also archives the event types the document does not describe "
        "(admin only).",
        "v1.event-type.import-openapi", "Event Type Import From Openapi", "Event Type",
        answer("200", "EventTypeImportOpenApiOut", ("401", "403", "422")),
        body="EventTypeImportOpenApiIn")},
}


def shape(properties, required=()):
    out = {"properties": properties}
    if required:
        out["required"] = list(required)
    out["type"] = "object"
    return out


STARTED = {"id": TEXT, "status": ref("BackgroundTaskStatus"), "task": ref("BackgroundTaskType"),
           "updatedAt": TIME}
STARTED_REQUIRED = ("id", "status", "task", "updatedAt")
TASK_SCHEMAS = {
    "BackgroundTaskStatus": {"enum": ["running", "finished", "failed"], "type": "string"},
    "BackgroundTaskType": {"enum": ["endpoint.recover", "endpoint.replay", "endpoint.bulk-replay",
                                    "application.purge_content", "application.stats",
                                    "event-type.aggregate"], "type": "string"},
    "ReplayIn": shape({"since": TIME, "until": {**TIME, "nullable": True}}, ["since"]),
    "BulkReplayIn": shape({
        "since": TIME,
        "until": {**TIME, "nullable": True},
        "eventTypes": TEXTS,
        "channel": {"nullable": True, "type": "string"},
        "tag": {"nullable": True, "type": "string"},
        "status": {"description": "The delivery's status: 0 success, 1 pending, 2 fail, "
                   "3 sending.", "nullable": True, "type": "integer"},
        "statusCodeClass": {"description": "The last attempt's status class: 0 (no answer), "
                            "100, 200, 300, 400 or 500.", "nullable": True, "type": "integer"},
    }, ["since"]),
    "ReplayOut": shape(STARTED, STARTED_REQUIRED),
    "ExpungeAllContentsOut": shape(STARTED, STARTED_REQUIRED),
    "AggregateEventTypesOut": shape(STARTED, STARTED_REQUIRED),
    "AppUsageStatsIn": shape({
        "since": TIME,
        "until": TIME,
        "appIds": {**TEXTS, "description": "Application ids or uids; every application "
                   "without it."},
    }, ["since", "until"]),
    "AppUsageStatsOut": shape({**STARTED, "unresolvedAppIds": {"items": TEXT, "type": "array"}},
                              [*STARTED_REQUIRED, "unresolvedAppIds"]),
    "BackgroundTaskOut": shape({
        **STARTED,
        "data": {"description": "What the task works on and how far it got: `messagesSent` (a "
                 "replay) or `messagesPurged` (an expunge), and hookd's additions `appId`, "
                 "`messagesScanned`, a replay's `endpointId`, `since` and `until`, and "
                 "`error` when it failed.", "type": "object"},
    }, ["id", "status", "task", "data", "updatedAt"]),
    "ListResponse_BackgroundTaskOut_": shape({
        "data": {"items": ref("BackgroundTaskOut"), "type": "array"},
        "done": {"type": "boolean"},
        "iterator": {"nullable": True, "type": "string"},
        "prevIterator": {"nullable": True, "type": "string"},
    }, ["data", "done"]),
    "EventTypeImportOpenApiIn": shape({
        "spec": {"nullable": True, "type": "object"},
        "specRaw": {"description": "The document as JSON or YAML text.", "nullable": True,
                    "type": "string"},
        "dryRun": {"default": False, "type": "boolean"},
        "replaceAll": {"default": False, "type": "boolean"},
    }),
    "EventTypeFromOpenApi": shape({
        "name": TEXT,
        "description": TEXT,
        "schemas": {"nullable": True, "type": "object"},
        "deprecated": {"type": "boolean"},
        "groupName": {"nullable": True, "type": "string"},
        "featureFlags": TEXTS,
    }, ["name", "description", "deprecated"]),
    "EventTypeImportOpenApiOutData": shape({
        "modified": {"items": TEXT, "type": "array"},
        "to_modify": {"items": ref("EventTypeFromOpenApi"), "nullable": True, "type": "array"},
    }, ["modified"]),
    "EventTypeImportOpenApiOut": shape({"data": ref("EventTypeImportOpenApiOutData")}, ["data"]),
}


# Destinations (Svix's cloud API's `destination` shapes, as its SDKs send and read them).
DESTINATION_TYPES = ["pollingEndpoint", "fifoEndpoint", "rabbitMq", "sqs", "sns", "amazonS3",
                     "natsJetStream", "kafka"]
DESTINATION_PARAMS = (path_param("app_id"), path_param("destination_id"))
DESTINATION_COMMON = {
    "uid": {"description": "Optional unique identifier for the destination.", "maxLength": 256,
            "minLength": 1, "nullable": True, "pattern": "^[a-zA-Z0-9\\-_.]+$",
            "type": "string"},
    "status": {"enum": ["enabled", "disabled"], "nullable": True, "type": "string"},
    "batchSize": {"description": "Messages per publication for destinations that batch "
                  "(1 to 1000; 1 when not given).", "format": "uint16", "nullable": True,
                  "type": "integer"},
    "maxWaitSecs": {"description": "How long a batch waits to fill, 0 to 300 seconds (0 when "
                    "not given).", "format": "uint16", "nullable": True, "type": "integer"},
    "eventTypes": TEXTS,
    "channels": TEXTS,
    "metadata": {"additionalProperties": TEXT, "nullable": True, "type": "object"},
    "type": {"description": "One of the types hookd serves: " + ", ".join(DESTINATION_TYPES)
             + " (natsJetStream and kafka are hookd additions). Any other is refused with "
             "422.", "enum": DESTINATION_TYPES, "type": "string"},
    "config": {"description": "The type's configuration (see docs/destinations.md). "
               "Credentials (secretAccessKey, a URI's password) are sealed and never shown "
               "back.", "type": "object"},
}
DESTINATION_SCHEMAS = {
    "DestinationIn": shape(DESTINATION_COMMON, ["type"]),
    "DestinationPatch": shape(DESTINATION_COMMON, ["type"]),
    "DestinationOut": shape({
        "id": TEXT,
        "uid": {"nullable": True, "type": "string"},
        "status": {"enum": ["enabled", "disabled"], "type": "string"},
        "failureReason": {"nullable": True, "type": "string"},
        "currentIterator": {"description": "The iterator a poll starting at the destination's "
                            "creation reads from.", "type": "string"},
        "createdAt": TIME,
        "updatedAt": TIME,
        "batchSize": {"format": "uint16", "type": "integer"},
        "maxWaitSecs": {"format": "uint16", "type": "integer"},
        "eventTypes": TEXTS,
        "channels": TEXTS,
        "metadata": {"additionalProperties": TEXT, "type": "object"},
        "type": {"enum": DESTINATION_TYPES, "type": "string"},
        "config": {"description": "The type's configuration without credentials: a URI's "
                   "password masked, no secretAccessKey; a fifoEndpoint's headers as "
                   "`{headers, sensitive}`.", "type": "object"},
    }, ["id", "status", "currentIterator", "createdAt", "updatedAt", "batchSize", "maxWaitSecs",
        "metadata", "type", "config"]),
    "ListResponse_DestinationOut_": shape({
        "data": {"items": ref("DestinationOut"), "type": "array"},
        "done": {"type": "boolean"},
        "iterator": {"nullable": True, "type": "string"},
        "prevIterator": {"nullable": True, "type": "string"},
    }, ["data", "done", "iterator"]),
}
POLLING_SCHEMAS = {
    "PollingEndpointMessageOut": shape({
        "id": TEXT,
        "eventType": TEXT,
        "payload": {"description": "The payload as compact JSON: the bytes the signature "
                    "signs.", "type": "object"},
        "timestamp": TIME,
        "eventId": {"nullable": True, "type": "string"},
        "channels": TEXTS,
        "tags": TEXTS,
        "deliverAt": {**TIME, "nullable": True},
        "headers": {"additionalProperties": TEXT, "description": "`webhook-id`, "
                    "`webhook-timestamp` and `webhook-signature`, signed with the "
                    "destination's key.", "type": "object"},
    }, ["id", "eventType", "payload", "timestamp", "headers"]),
    "PollingEndpointOut": shape({
        "data": {"items": ref("PollingEndpointMessageOut"), "type": "array"},
        "iterator": TEXT,
        "done": {"type": "boolean"},
    }, ["data", "iterator", "done"]),
    "PollingEndpointConsumerSeekIn": shape({"after": TIME}, ["after"]),
    "PollingEndpointConsumerSeekOut": shape({"iterator": TEXT}, ["iterator"]),
    "RotatePollerTokenIn": shape({
        "expiry": {"description": "Seconds the new token works (at most a year); without it, "
                   "until rotated or revoked.", "format": "uint64", "maximum": 31536000,
                   "nullable": True, "type": "integer"},
        "oldTokenExpiry": {"description": "Seconds the destination's older poller tokens keep "
                           "working (0 to 86400).", "default": 300, "format": "uint64",
                           "maximum": 86400, "nullable": True, "type": "integer"},
    }),
    "PollerTokenOut": shape({
        "id": TEXT,
        "token": {"description": "The token itself, shown only here.", "type": "string"},
        "name": TEXT,
        "createdAt": TIME,
        "expiresAt": {**TIME, "nullable": True},
        "scopes": {"items": TEXT, "type": "array"},
    }, ["id", "token", "name", "createdAt", "scopes"]),
}
DESTINATION_PATHS = {
    "/api/v1/app/{app_id}/destination": {
        "get": operation(
            "The application's destinations, oldest first.", "v1.destination.list",
            "List Destinations", "Destination",
            answer("200", "ListResponse_DestinationOut_", ALL_ERRORS),
            [path_param("app_id"), query_param("limit", {"type": "integer"}),
             query_param("iterator", TEXT),
             query_param("extended", {"default": False, "description": "hookd addition: "
                                      "list the natsJetStream and kafka destinations too, "
                                      "types the official SDKs cannot read.",
                                      "type": "boolean"})]),
        "post": operation(
            "Creates a destination; counted with endpoints against --max-endpoints-per-app.",
            "v1.destination.create", "Create Destination", "Destination",
            answer("201", "DestinationOut", ALL_ERRORS), [path_param("app_id")],
            "DestinationIn"),
    },
    "/api/v1/app/{app_id}/destination/{destination_id}": {
        "get": operation("A destination, by id or uid.", "v1.destination.get",
                         "Get Destination", "Destination",
                         answer("200", "DestinationOut", ALL_ERRORS), DESTINATION_PARAMS),
        "put": operation("Replaces a destination, or creates it with the path as its uid.",
                         "v1.destination.upsert", "Upsert Destination", "Destination",
                         answer("200", "DestinationOut", ALL_ERRORS), DESTINATION_PARAMS,
                         "DestinationIn"),
        "patch": operation("Changes the fields given; `config`'s fields are laid over the "
                           "stored ones (`null` clears one). `type` must be the "
                           "destination's.", "v1.destination.patch", "Patch Destination",
                           "Destination", answer("200", "DestinationOut", ALL_ERRORS),
                           DESTINATION_PARAMS, "DestinationPatch"),
        "delete": operation("Deletes a destination.", "v1.destination.delete",
                            "Delete Destination", "Destination",
                            {"204": {"description": "no content"},
                             **{e: {"description": d} for e, d in
                                [("401", "Unauthorized"), ("403", "Forbidden"),
                                 ("404", "Not Found")]}},
                            DESTINATION_PARAMS),
    },
    "/api/v1/app/{app_id}/poller/{sink_id}": {
        "get": operation(
            "Reads a polling destination's messages after `iterator` (or from `after`, or from "
            "the destination's creation), oldest first, that its filters and `event_type` and "
            "`channel` take; each carries Standard Webhooks headers signing its payload. "
            "Messages are read once their ids are 5 seconds old.",
            "v1.message.poller.poll", "Poll", "Message",
            answer("200", "PollingEndpointOut", ALL_ERRORS),
            [path_param("app_id"), path_param("sink_id"),
             query_param("limit", {"type": "integer"}), query_param("iterator", TEXT),
             query_param("event_type", TEXT), query_param("channel", TEXT),
             query_param("after", TIME)]),
    },
    "/api/v1/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}": {
        "get": operation(
            "Reads as `poll` does, from where this consumer last got to (kept by the server), "
            "or from `iterator`; the answer's iterator is kept as the consumer's position.",
            "v1.message.poller.consumer-poll", "Consumer Poll", "Message",
            answer("200", "PollingEndpointOut", ALL_ERRORS),
            [path_param("app_id"), path_param("sink_id"), path_param("consumer_id"),
             query_param("limit", {"type": "integer"}), query_param("iterator", TEXT)]),
    },
    "/api/v1/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}/seek": {
        "post": operation(
            "Moves the consumer to the messages created from `after` on.",
            "v1.message.poller.consumer-seek", "Consumer Seek", "Message",
            answer("200", "PollingEndpointConsumerSeekOut", ALL_ERRORS),
            [path_param("app_id"), path_param("sink_id"), path_param("consumer_id")],
            "PollingEndpointConsumerSeekIn"),
    },
    "/api/v1/auth/app/{app_id}/destination/{sink_id}/poller/token/rotate": {
        "post": operation(
            "hookd addition: issues a poller token for a polling destination, one that may "
            "use that destination's poller routes and nothing else; its older poller tokens "
            "stop working `oldTokenExpiry` seconds later (300 by default).",
            "hookd.destination.rotate-poller-token", "Rotate Poller Token", "Destination",
            answer("200", "PollerTokenOut", ALL_ERRORS),
            [path_param("app_id"), path_param("sink_id")], "RotatePollerTokenIn"),
    },
    "/api/v1/app/{app_id}/destination/{destination_id}/secret": {
        "get": operation("hookd addition: the destination's current signing secret, which "
                         "its messages' `webhook-signature` is verified with.",
                         "hookd.destination.get-secret", "Get Destination Secret",
                         "Destination", answer("200", "EndpointSecretOut", ALL_ERRORS),
                         DESTINATION_PARAMS),
    },
    "/api/v1/app/{app_id}/destination/{destination_id}/secret/rotate": {
        "post": operation("Rotates a destination's signing secret (hookd: every type's, "
                          "Svix: a fifoEndpoint's).",
                          "v1.destination.rotate-secret", "Rotate Destination Secret",
                          "Destination", answer("200", "EndpointSecretOut", ALL_ERRORS),
                          DESTINATION_PARAMS, "EndpointSecretRotateIn"),
    },
}


def add_hookd_operations(document):
    document["paths"].update(HOOKD_PATHS)
    document["components"]["schemas"].update(HOOKD_SCHEMAS)
    document["paths"].update(TASK_PATHS)
    document["components"]["schemas"].update(TASK_SCHEMAS)
    document["paths"].update(DESTINATION_PATHS)
    document["components"]["schemas"].update(DESTINATION_SCHEMAS)
    document["components"]["schemas"].update(POLLING_SCHEMAS)
    for (path, method), responses in RESPONSES.items():
        answers = document["paths"][path][method]["responses"]
        answers.pop("204", None)
        answers.update(responses)
    for (path, method), description in DESCRIPTIONS.items():
        document["paths"][path][method]["description"] = description


def borrow_properties(schemas):
    for (name, prop), (source, source_prop, changes) in BORROWED.items():
        borrowed = json.loads(json.dumps(schemas[source]["properties"][source_prop]))
        schemas[name]["properties"][prop] = {**borrowed, **changes}


def add_hookd_fields(schemas):
    for name, (properties, required) in ADDITIONS.items():
        if name in schemas:
            schemas[name].setdefault("properties", {}).update(properties)
            schemas[name]["required"] = sorted(set(schemas[name].get("required", [])) | set(required))


def declare_path_parameters(paths):
    """Svix's document leaves some path parameters undeclared (e.g. `app_id` of
    `GET /api/v1/app/{app_id}`), which makes the document invalid and stops schema-driven
    fuzzers (schemathesis) from testing those operations. Each missing one is declared as the
    same parameter is declared elsewhere in the document."""
    declared = {}
    for operations in paths.values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path":
                    declared.setdefault(parameter["name"], parameter)
    for path, operations in paths.items():
        names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
        for operation in operations.values():
            parameters = operation.setdefault("parameters", [])
            present = {p.get("name") for p in parameters if p.get("in") == "path"}
            for name in names:
                if name not in present:
                    parameters.append(json.loads(json.dumps(declared[name])))


def refs(node, found):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            refs(value, found)
    elif isinstance(node, list):
        for value in node:
            refs(value, found)


def main(source):
    svix = json.loads(Path(source).read_text())
    paths = {p: {m: svix["paths"][p][m] for m in methods} for p, methods in SERVED.items()}
    add_hookd_parameters(paths)
    paths.update(OPERATION_ADDITIONS)
    declare_path_parameters(paths)
    schemas = svix["components"]["schemas"]
    needed, queue = set(), set()
    refs(paths, queue)
    while queue:
        name = queue.pop()
        if name not in needed:
            needed.add(name)
            refs(schemas[name], queue)
    document = {
        "openapi": svix["openapi"],
        "info": {
            "title": "hookd",
            "version": "1",
            "description": "hookd's v1 API: the Svix v1 operations it serves (same paths, "
            "fields and status codes), authenticated with `Authorization: Bearer <token>`.",
        },
        "paths": paths,
        "components": {
            "schemas": {n: json.loads(json.dumps(schemas[n])) for n in sorted(needed)},
            "securitySchemes": svix["components"].get("securitySchemes", {}),
        },
    }
    borrow_properties(document["components"]["schemas"])
    add_hookd_fields(document["components"]["schemas"])
    add_hookd_operations(document)
    out = Path(__file__).resolve().parent.parent / "crates/hookd-api/openapi.json"
    out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {len(paths)} paths, {len(needed)} schemas")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/svix-oss-openapi.json")
