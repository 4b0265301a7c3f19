"""The OpenAPI document: drf-spectacular describes the DRF views (staff, auditors); the hot
endpoints, plain Django views, are described here by hand and merged in.

Over 350 lines on purpose: the schema of every hand-described endpoint, side by side, as
docs/api.md lists them."""

from __future__ import annotations

from typing import Any

from events.models import MESSAGE_MAX_LENGTH, EventMode, QueueOrder

ERROR = {
    "type": "object",
    "required": ["error", "detail"],
    "properties": {
        "error": {"type": "string"},
        "detail": {"type": "string"},
        "fields": {"type": "object"},
    },
}
ETA = {
    "type": ["object", "null"],
    "required": ["p10", "p50", "p90"],
    "properties": {k: {"type": "number"} for k in ("p10", "p50", "p90")},
}
STATUS = [
    "prequeue",
    "waiting",
    "admitted",
    "expired",
    "left",
    "completed",
    "abandoned",
    "revoked",
]
# Set only while the ticket is admitted: on a join, when the on-sale's mode let the fan in
# at once (safety net, passthrough) or the fan's live ticket is already admitted.
PASS_FIELDS = {
    "pass": {"type": ["string", "null"]},
    "pass_expires_at": {"type": ["string", "null"], "format": "date-time"},
    "redirect_url": {"type": ["string", "null"]},
}
TICKET_JOIN = {
    "type": "object",
    "required": [
        "ticket",
        "event",
        "status",
        "position",
        "eta",
        "queue_length",
        "approximate",
        *PASS_FIELDS,
    ],
    "properties": {
        "ticket": {"type": "string"},
        "event": {"type": "string"},
        "status": {"type": "string", "enum": ["prequeue", "waiting", "admitted"]},
        "position": {"type": ["integer", "null"], "minimum": 1},
        "eta": ETA,
        "queue_length": {"type": "integer", "minimum": 0},
        # True while the hot index cannot answer and the position was placed between two
        # checkpoints of the line's snapshot rather than counted.
        "approximate": {"type": "boolean"},
        **PASS_FIELDS,
    },
}
# When the on-sale sold out (null while it has not) and the word that came with it.
SOLD_OUT_FIELDS = {
    "sold_out_at": {"type": ["string", "null"], "format": "date-time"},
    "sold_out_message": {"type": ["string", "null"]},
}
TICKET_STATUS = {
    "type": "object",
    "required": [
        *TICKET_JOIN["required"],
        "reentry_until",
        "message",
        "sold_out_at",
        "sold_out_message",
    ],
    "properties": {
        **TICKET_JOIN["properties"],
        "status": {"type": "string", "enum": STATUS},
        "reentry_until": {"type": ["string", "null"], "format": "date-time"},
        # Staff's word to the line (plain text), or null.
        "message": {"type": ["string", "null"]},
        **SOLD_OUT_FIELDS,
    },
}
EVENT_PUBLIC = {
    "type": "object",
    "required": [
        "slug",
        "name",
        "state",
        "queue_length",
        "active",
        "capacity",
        "rate_per_minute",
        "eta_new",
        "starts_at",
        "ends_at",
        "sold_out_at",
        "sold_out_message",
    ],
    "properties": {
        "slug": {"type": "string"},
        "name": {"type": "string"},
        "state": {"type": "string", "enum": ["scheduled", "prequeue", "open", "paused", "closed"]},
        "mode": {"type": "string", "enum": EventMode.values},
        "message": {"type": ["string", "null"]},
        "queue_length": {"type": "integer"},
        "active": {"type": "integer"},
        "capacity": {"type": "integer"},
        "rate_per_minute": {"type": "integer"},
        "eta_new": ETA,
        "prequeue_opens_at": {"type": ["string", "null"], "format": "date-time"},
        "starts_at": {"type": ["string", "null"], "format": "date-time"},
        "ends_at": {"type": ["string", "null"], "format": "date-time"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "queue_order": {"type": "string", "enum": QueueOrder.values},
        "shuffle_seed_sha256": {"type": "string"},
        "shuffle_seed": {"type": ["string", "null"]},
        "draw_seed_sha256": {"type": "string"},
        **SOLD_OUT_FIELDS,
    },
}
VERDICT = {
    "type": "object",
    "required": ["valid"],
    "properties": {
        "valid": {"type": "boolean"},
        "reason": {
            "type": "string",
            "enum": [
                "expired",
                "revoked",
                "completed",
                "bad_signature",
                "malformed",
                "wrong_event",
            ],
        },
        "event": {"type": "string"},
        "ticket_id": {"type": "string", "format": "uuid"},
        "expires_at": {"type": "string", "format": "date-time"},
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(status): _json(ERROR, "An error.") for status in statuses}


CHALLENGE = {
    "type": "object",
    "required": ["challenge", "difficulty", "expires_in", "algorithm"],
    "properties": {
        "challenge": {"type": "string"},
        # The on-sale's pow_difficulty: leading zero bits asked of sha256(challenge:nonce).
        "difficulty": {"type": "integer", "minimum": 0, "maximum": 20},
        "expires_in": {"type": "integer", "minimum": 1},
        "algorithm": {"type": "string"},
    },
}
NO_STORE = {
    "Cache-Control": {"description": "no-store: never cache it.", "schema": {"type": "string"}}
}
SLUG = {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}}
TICKET = {"name": "ticket", "in": "path", "required": True, "schema": {"type": "string"}}
POLL = {
    "X-Poll-After-Seconds": {
        "description": "Ask again at the latest after this many seconds (longer while the "
        "room answers without its hot index).",
        "schema": {"type": "number"},
    }
}
PASS_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["pass"],
                "properties": {
                    "pass": {"type": "string"},
                    "event": {"type": "string"},
                    "outcome": {"type": "string", "enum": ["completed", "abandoned"]},
                },
            }
        }
    },
}

HOT_PATHS: dict[str, Any] = {
    "/api/v1/events/{slug}/join": {
        "post": {
            "operationId": "join",
            "tags": ["fans"],
            "summary": "Join the line (idempotent per identity).",
            "parameters": [
                SLUG,
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "pattern": "^[\\x21-\\x7e]{1,255}$"},
                },
            ],
            "requestBody": {
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "access_code": {"type": "string", "maxLength": 64},
                                "return": {
                                    "type": "string",
                                    "maxLength": 2000,
                                    "description": "The shop page the fan first asked for; "
                                    "admitted fans go back to it when its host is the "
                                    "target's or an allowed one. Anything else is ignored.",
                                },
                            },
                        }
                    }
                },
            },
            "responses": {
                "201": {**_json(TICKET_JOIN, "A new ticket."), "headers": POLL},
                "200": {**_json(TICKET_JOIN, "This identity's live ticket."), "headers": POLL},
                **_errors(400, 404, 409, 410, 429, 503),
            },
        }
    },
    "/api/v1/events/{slug}/challenge": {
        "get": {
            "operationId": "challenge",
            "tags": ["fans"],
            "summary": "A proof-of-work puzzle for the next join (signed, bound to the on-sale, "
            "spent once).",
            "parameters": [SLUG],
            "responses": {
                "200": {
                    **_json(
                        CHALLENGE,
                        "Solve it when `difficulty` is above 0, then join with "
                        '`{"pow": {"challenge", "nonce"}}`.',
                    ),
                    "headers": NO_STORE,
                },
                **_errors(404, 503),
            },
        }
    },
    "/api/v1/events/{slug}": {
        "get": {
            "operationId": "event",
            "tags": ["fans"],
            "parameters": [SLUG],
            "responses": {"200": _json(EVENT_PUBLIC, "The on-sale."), **_errors(404, 503)},
        }
    },
    "/api/v1/events/{slug}/sold-out": {
        "post": {
            "operationId": "event_sold_out",
            "tags": ["shops"],
            "summary": "The shop's stock is gone: the line closes at once, every waiting page "
            'says "Sold out" (idempotent).',
            "security": [{"integrationKey": []}],
            "parameters": [SLUG],
            "requestBody": {
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "message": {
                                    "type": ["string", "null"],
                                    "maxLength": MESSAGE_MAX_LENGTH,
                                    "description": 'Shown to the fans under "Sold out".',
                                }
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": _json(EVENT_PUBLIC, "The on-sale, sold out."),
                **_errors(400, 401, 404, 409, 503),
            },
        }
    },
    "/api/v1/tickets/{ticket}": {
        "get": {
            "operationId": "ticket_status",
            "tags": ["fans"],
            "summary": "Where the fan stands; also keeps a waiting ticket alive.",
            "parameters": [TICKET],
            "responses": {
                "200": {**_json(TICKET_STATUS, "The ticket."), "headers": POLL},
                **_errors(400, 404, 410, 503),
            },
        },
        "delete": {
            "operationId": "ticket_leave",
            "tags": ["fans"],
            "parameters": [TICKET],
            "responses": {
                "204": {"description": "Left (or already gone)."},
                **_errors(400, 409, 410, 503),
            },
        },
    },
    "/api/v1/tickets/{ticket}/reenter": {
        "post": {
            "operationId": "ticket_reenter",
            "tags": ["fans"],
            "summary": "Back to the front of the line after a shop session that ended "
            "without completing (once, within the on-sale's re-entry window).",
            "parameters": [TICKET],
            "responses": {
                "200": {**_json(TICKET_STATUS, "The ticket, waiting again."), "headers": POLL},
                **_errors(400, 404, 409, 410, 503),
            },
        }
    },
    "/api/v1/passes/verify": {
        "post": {
            "operationId": "pass_verify",
            "tags": ["shops"],
            "requestBody": PASS_BODY,
            "responses": {"200": _json(VERDICT, "The verdict."), **_errors(400, 503)},
        }
    },
    "/api/v1/passes/complete": {
        "post": {
            "operationId": "pass_complete",
            "tags": ["shops"],
            "security": [{"integrationKey": []}],
            "requestBody": PASS_BODY,
            "responses": {
                "204": {"description": "Recorded (idempotent)."},
                **_errors(400, 401, 503),
            },
        }
    },
    "/api/v1/events/{slug}/traffic-rules": {
        "get": {
            "operationId": "traffic_rules",
            "tags": ["shops"],
            "summary": "The on-sale's traffic rules, for a gate outside the room.",
            "security": [{"integrationKey": []}],
            "parameters": [
                SLUG,
                {
                    "name": "If-None-Match",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                },
            ],
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["traffic_rules", "version"],
                        "properties": {
                            "traffic_rules": {"type": "array", "items": {"type": "object"}},
                            "version": {"type": "string"},
                        },
                    },
                    "The rules in their canonical form, and their version (also the ETag).",
                ),
                "304": {"description": "Unchanged since the version sent in If-None-Match."},
                **_errors(401, 404, 503),
            },
        }
    },
    "/gate/{slug}/check": {
        "get": {
            "operationId": "gate_check",
            "tags": ["shops"],
            "summary": "A web server's sub-request (nginx auth_request): may this request in?",
            "parameters": [
                {
                    "name": "slug",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
                },
                *(
                    {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
                    for name in ("X-Original-URI", "X-Original-Host", "X-Original-Proto")
                ),
            ],
            "responses": {
                "204": {
                    "description": "A valid pass: let the request in.",
                    "headers": {
                        "Set-Cookie": {
                            "description": "The pass from the URL, as wr_pass_{slug}.",
                            "schema": {"type": "string"},
                        },
                        "X-Waiting-Room-Redirect": {
                            "description": "The original URL without wr_pass: send the fan "
                            "there instead.",
                            "schema": {"type": "string"},
                        },
                    },
                },
                "401": {
                    **_json(ERROR, "No valid pass: send the fan to the room."),
                    "headers": {
                        "X-Waiting-Room-Location": {
                            "description": "The waiting page, with ?return=<original URL>.",
                            "schema": {"type": "string"},
                        }
                    },
                },
                **_errors(503),
            },
        }
    },
    "/.well-known/jwks.json": {
        "get": {
            "operationId": "jwks",
            "tags": ["shops"],
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["keys"],
                        "properties": {"keys": {"type": "array", "items": {"type": "object"}}},
                    },
                    "The keys that verify passes.",
                )
            },
        }
    },
    "/metrics": {
        "get": {
            "operationId": "metrics",
            "tags": ["operations"],
            "summary": "Prometheus text: with the bearer token when WR_METRICS_TOKEN is set, "
            "otherwise from loopback and private addresses only.",
            "security": [{"metricsToken": []}, {}],
            "responses": {
                "200": {
                    "description": "The room's figures in the Prometheus text format.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                "403": {
                    "description": "Neither the token nor an address allowed to scrape.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
            },
        }
    },
    "/healthz": {
        "get": {
            "operationId": "healthz",
            "tags": ["operations"],
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["status", "version"],
                        "properties": {
                            "status": {"type": "string", "enum": ["ok"]},
                            "version": {"type": "string", "examples": ["1.0.0"]},
                        },
                    },
                    "Up, with the release this process runs (pyproject.toml's version).",
                ),
            },
        }
    },
    "/readyz": {
        "get": {
            "operationId": "readyz",
            "tags": ["operations"],
            "responses": {
                "200": {
                    "description": "Ready.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                **_errors(503),
            },
        }
    },
}


def add_hot_paths(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    result.setdefault("paths", {}).update(HOT_PATHS)
    schemes = result.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes["integrationKey"] = {"type": "http", "scheme": "bearer"}
    schemes["metricsToken"] = {"type": "http", "scheme": "bearer"}
    return result
