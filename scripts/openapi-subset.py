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
# hookd's additions to Svix's schemas: (properties, names added to `required`).
ADDITIONS = {
    "EndpointIn": ({"timeoutSeconds": TIMEOUT, "rateLimit": RATE_LIMIT}, []),
    "EndpointUpdate": ({"timeoutSeconds": TIMEOUT, "rateLimit": RATE_LIMIT}, []),
    "EndpointPatch": ({"timeoutSeconds": TIMEOUT, "rateLimit": RATE_LIMIT}, []),
    "EndpointOut": ({"timeoutSeconds": TIMEOUT, "rateLimit": RATE_LIMIT, **DISABLED}, []),
    "MessageEndpointOut": ({"timeoutSeconds": TIMEOUT, "rateLimit": RATE_LIMIT, **DISABLED}, []),
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


def add_hookd_fields(schemas):
    for name, (properties, required) in ADDITIONS.items():
        if name in schemas:
            schemas[name].setdefault("properties", {}).update(properties)
            schemas[name]["required"] = sorted(set(schemas[name].get("required", [])) | set(required))


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
    add_hookd_fields(document["components"]["schemas"])
    out = Path(__file__).resolve().parent.parent / "crates/hookd-api/openapi.json"
    out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}: {len(paths)} paths, {len(needed)} schemas")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/svix-oss-openapi.json")
