"""The OpenAPI 3.1 schema of the JSON API, served at ``/api/openapi.json``."""

from __future__ import annotations

from typing import Any

SESSION_FIELDS = ("session_id", "user_id", "agent_id")

_ID = {"type": "string", "minLength": 1, "maxLength": 512}
_SESSION = {
    "session_id": {**_ID, "description": "the session"},
    "user_id": {**_ID, "description": "the session's user (required where the session has one)"},
    "agent_id": {**_ID, "description": "the session's agent (required where the session has one)"},
}
_ERROR = {"description": "the request breaks a rule; the message names it",
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_ERRORS = dict.fromkeys(("400", "401", "403", "404", "413", "415"), _ERROR)


def _post(summary: str, properties: dict[str, Any], required: list[str], result: dict[str, Any]) -> dict[str, Any]:
    return {"post": {
        "summary": summary, "security": [{"token": []}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": False, "required": ["session_id", *required],
            "properties": {**_SESSION, **properties}}}}},
        "responses": {"200": {"description": "done", "content": {"application/json": {"schema": result}}},
                      **_ERRORS},
    }}


def schema(version: str) -> dict[str, Any]:
    hit = {"$ref": "#/components/schemas/RecallHit"}
    return {
        "openapi": "3.1.0",
        "info": {"title": "langmem-tiers memory API", "version": version,
                 "description": "Share one langmem-tiers memory over HTTP. Every call needs the server's token "
                                "('Authorization: Bearer TOKEN'). Mutations are refused with --read-only; with "
                                "--user every call is restricted to that user's sessions."},
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error", "message"],
                          "properties": {"error": {"type": "string"}, "message": {"type": "string"}}},
                "Message": {"type": "object", "required": ["role"], "properties": {
                    "role": {"enum": ["system", "user", "assistant", "tool"]},
                    "content": {"type": ["string", "array", "null"]}, "name": {"type": "string"},
                    "tool_calls": {"type": "array"}, "tool_call_id": {"type": "string"},
                    "metadata": {"type": "object"}, "created_at": {"type": "number"},
                    "key": {"type": "string", "description": "idempotency key: a retry is not stored twice"}}},
                "SummaryVersion": {"type": "object", "properties": {
                    "version": {"type": "integer", "description": "the session's summary_version when saved"},
                    "text": {"type": "string"}, "tokens": {"type": "integer"},
                    "cursor": {"type": "integer", "description": "the last message id folded into it"},
                    "created_at": {"type": "number"}}},
                "RecallHit": {"type": "object", "properties": {
                    "record_id": {"type": "integer"}, "kind": {"type": "string"}, "text": {"type": "string"},
                    "score": {"type": "number"},
                    "parts": {"type": "object", "description": "keyword_rank, vector_rank, fused, recency, "
                                                               "importance: why it was recalled"},
                    "message_ids": {"type": "array", "items": {"type": "integer"}}}},
            },
        },
        "paths": {
            "/api/add": _post("Append messages to a session (all or none); creates the session",
                              {"messages": {"type": "array", "minItems": 1,
                                            "items": {"$ref": "#/components/schemas/Message"}}},
                              ["messages"], {"type": "object", "properties": {"messages": {"type": "array"}}}),
            "/api/context": _post("The budgeted context the model would receive, with explain() and recall hits",
                                  {"query": {"type": ["string", "null"]}, "budget": {"type": "integer"}}, [],
                                  {"type": "object", "properties": {
                                      "messages": {"type": "array"}, "tokens": {"type": "object"},
                                      "explain": {"type": "string"}, "left_out": {"type": "array"},
                                      "recalled": {"type": "array", "items": hit}}}),
            "/api/search": _post("Hybrid keyword + vector recall",
                                 {"query": {"type": "string"}, "k": {"type": "integer", "minimum": 0},
                                  "scope": {"enum": ["session", "user", "agent"]},
                                  "kinds": {"type": "array", "items": {"type": "string"}}}, ["query"],
                                 {"type": "object", "properties": {"hits": {"type": "array", "items": hit}}}),
            "/api/remember": _post("Store an explicit memory", {
                "text": {"type": "string"}, "kind": {"type": "string"},
                "importance": {"type": "number", "minimum": 0, "maximum": 1}, "pinned": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "key": {"type": "string", "description": "supersedes the user's current memory with this key"}},
                ["text"],
                {"type": "object", "properties": {"record_id": {"type": "integer"}}}),
            "/api/forget": _post("Erase a record, or a session, user or agent scope",
                                 {"target": {"oneOf": [{"type": "integer", "minimum": 1},
                                                       {"enum": ["session", "user", "agent"]}]}}, ["target"],
                                 {"type": "object", "properties": {"removed": {"type": "integer"}}}),
            "/api/pin": _post("Pin a record of the session's user (pinned: false unpins); another user's is refused",
                              {"record_id": {"type": "integer", "minimum": 1},
                               "pinned": {"type": "boolean", "default": True}}, ["record_id"],
                              {"type": "object", "properties": {
                                  "record_id": {"type": "integer"}, "pinned": {"type": "boolean"},
                                  "changed": {"type": "boolean", "description": "false: it already was"}}}),
            "/api/summary_history": {"get": {
                "summary": "The saved versions of the session's rolling summary, newest first",
                "security": [{"token": []}],
                "parameters": [*({"name": name, "in": "query", "required": name == "session_id", "schema": _ID}
                                 for name in SESSION_FIELDS),
                               {"name": "limit", "in": "query", "required": False,
                                "schema": {"type": "integer", "minimum": 0},
                                "description": "at most this many (default: every kept version)"}],
                "responses": {"200": {"description": "the versions", "content": {"application/json": {
                    "schema": {"type": "object", "properties": {"versions": {
                        "type": "array", "items": {"$ref": "#/components/schemas/SummaryVersion"}}}}}}},
                    **_ERRORS}}},
            "/api/stats": {"get": {
                "summary": "A session's tiers (counts, tokens, summary cursor, index backlog)",
                "security": [{"token": []}],
                "parameters": [{"name": name, "in": "query", "required": name == "session_id",
                                "schema": _ID} for name in SESSION_FIELDS],
                "responses": {"200": {"description": "the stats", "content": {"application/json": {
                    "schema": {"type": "object"}}}}, **_ERRORS}}},
            "/api/sessions": {"get": {
                "summary": "The sessions this server may show (one user's under --user)",
                "security": [{"token": []}],
                "responses": {"200": {"description": "the sessions", "content": {"application/json": {
                    "schema": {"type": "object"}}}}, **_ERRORS}}},
        },
    }
