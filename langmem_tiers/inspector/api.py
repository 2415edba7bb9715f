"""The JSON API: add, context, search, remember, forget, pin, stats, summary history (and sessions), with its
OpenAPI schema.

Every call names its session in the body (POST) or the query (GET): ``session_id`` and, where the
session has them, ``user_id`` and ``agent_id``. Authentication: ``Authorization: Bearer TOKEN``
(or the inspector's cookie plus an ``X-CSRF-Token`` header). Errors are JSON
``{"error": CODE, "message": ...}`` with a 4xx status that names the rule broken.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from langmem_tiers.errors import ConfigError, InvalidMessageError
from langmem_tiers.inspector.deployment import Deployment
from langmem_tiers.inspector.guard import check_csrf
from langmem_tiers.inspector.openapi import SESSION_FIELDS
from langmem_tiers.inspector.settings import InspectorSettings
from langmem_tiers.journal.base import Namespace
from langmem_tiers.memory import TieredMemory
from langmem_tiers.messages import Message
from langmem_tiers.recall.hits import RecallHit

MAX_BODY_BYTES = 8 * 1024 * 1024


class ApiError(Exception):
    """A request the API refuses, with its status and code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Api:
    def __init__(self, settings: InspectorSettings, deployment: Deployment) -> None:
        self.settings = settings
        self.deployment = deployment

    async def _body(self, request: Request, *, mutation: bool) -> dict[str, Any]:
        if mutation and self.settings.read_only:
            raise ApiError(403, "read_only", "this server was started with --read-only: no changes are accepted")
        refusal = check_csrf(request, self.settings, request.headers.get("x-csrf-token"))
        if refusal is not None:
            raise ApiError(403, "csrf", json.loads(bytes(refusal.body))["message"])
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise ApiError(415, "content_type", f"send the body as JSON with 'Content-Type: application/json' "
                           f"(got {kind or 'none'!r})")
        declared = request.headers.get("content-length")
        if declared and declared.isdecimal() and int(declared) > MAX_BODY_BYTES:
            raise ApiError(413, "too_large", f"the body has {declared} bytes, over the limit of {MAX_BODY_BYTES}")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise ApiError(413, "too_large", f"the body has {len(raw)} bytes, over the limit of {MAX_BODY_BYTES}")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, "bad_json", f"the body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "bad_json", f"the body must be a JSON object; got {type(data).__name__}")
        return data

    def _memory(self, data: dict[str, Any], allowed: tuple[str, ...], *, create: bool = False) -> TieredMemory:
        if "session_id" not in data:
            raise ApiError(400, "missing_field", "session_id is required (with user_id and agent_id where the "
                           "session has them)")
        unknown = set(data) - set(allowed)
        if unknown:
            raise ApiError(400, "unknown_field", f"unknown field(s): {', '.join(sorted(unknown))}")
        ns = self.deployment.namespace(data.get("session_id"), data.get("user_id"), data.get("agent_id"))
        return self.deployment.handle(ns, create=create)

    async def add(self, request: Request) -> Response:
        data = await self._body(request, mutation=True)
        allowed = (*SESSION_FIELDS, "messages")
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "bad_field", "messages must be a non-empty list of {role, content, ...} objects")
        if not all(isinstance(m, dict) for m in messages):
            raise ApiError(400, "bad_field", "each message must be an object with role and content")
        memory = self._memory(data, allowed, create=True)
        stored = await run_in_threadpool(memory.add_messages, messages)
        return JSONResponse({"messages": [_message(m) for m in stored]})

    async def context(self, request: Request) -> Response:
        data = await self._body(request, mutation=False)
        allowed = (*SESSION_FIELDS, "query", "budget")
        memory = self._memory(data, allowed)
        ctx = await run_in_threadpool(memory.context, data.get("query"), data.get("budget"))
        return JSONResponse({
            "messages": ctx.to_openai(), "tokens": asdict(ctx.tokens), "explain": ctx.explain(),
            "left_out": [asdict(o) for o in ctx.left_out], "recalled": [_hit(h) for h in ctx.recalled],
            "summary": ctx.summary, "pinned": list(ctx.pinned),
        })

    async def search(self, request: Request) -> Response:
        data = await self._body(request, mutation=False)
        allowed = (*SESSION_FIELDS, "query", "k", "scope", "kinds")
        memory = self._memory(data, allowed)
        query = data.get("query")
        kinds = data.get("kinds")
        if kinds is not None and (not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds)):
            raise ApiError(400, "bad_field", f"kinds must be a list of strings; got {kinds!r:.80}")
        hits = await run_in_threadpool(lambda: memory.search(query, data.get("k", 5),  # type: ignore[arg-type]
                                                             scope=data.get("scope", "session"), kinds=kinds))
        return JSONResponse({"hits": [_hit(h) for h in hits]})

    async def remember(self, request: Request) -> Response:
        data = await self._body(request, mutation=True)
        allowed = (*SESSION_FIELDS, "text", "kind", "importance", "pinned", "tags", "key")
        memory = self._memory(data, allowed)
        tags = data.get("tags", [])
        if not isinstance(tags, list):
            raise ApiError(400, "bad_field", f"tags must be a list of strings; got {tags!r:.80}")
        pinned = data.get("pinned", False)
        if not isinstance(pinned, bool):
            raise ApiError(400, "bad_field", f"pinned must be true or false; got {pinned!r:.40}")
        record_id = await run_in_threadpool(lambda: memory.remember(
            data.get("text"), data.get("kind", "fact"),  # type: ignore[arg-type]
            importance=data.get("importance", 0.5), pinned=pinned, tags=tags, key=data.get("key")))
        return JSONResponse({"record_id": record_id})

    async def forget(self, request: Request) -> Response:
        data = await self._body(request, mutation=True)
        allowed = (*SESSION_FIELDS, "target")
        memory = self._memory(data, allowed)
        target = data.get("target")
        valid = (isinstance(target, int) and not isinstance(target, bool) and target > 0) or \
            target in ("session", "user", "agent")
        if not valid or not isinstance(target, (int, str)):
            raise ApiError(400, "bad_field", f"target ({target!r:.40}) must be a record id (a positive integer), "
                           "'session', 'user' or 'agent'")
        removed = await run_in_threadpool(memory.forget, target)
        self.deployment.forgotten()
        return JSONResponse({"removed": removed})

    async def pin(self, request: Request) -> Response:
        data = await self._body(request, mutation=True)
        allowed = (*SESSION_FIELDS, "record_id", "pinned")
        memory = self._memory(data, allowed)
        record_id = data.get("record_id")
        if isinstance(record_id, bool) or not isinstance(record_id, int) or record_id < 1:
            raise ApiError(400, "bad_field", f"record_id ({record_id!r:.40}) must be a record id (a positive integer)")
        pinned = data.get("pinned", True)
        if not isinstance(pinned, bool):
            raise ApiError(400, "bad_field", f"pinned must be true (pin) or false (unpin); got {pinned!r:.40}")
        # A record of another user (or of another anonymous session) is refused by the core: ConfigError, 400.
        changed = await run_in_threadpool(memory.pin, record_id, pinned)
        return JSONResponse({"record_id": record_id, "pinned": pinned, "changed": changed})

    def stats(self, request: Request) -> Response:
        q = request.query_params
        allowed = SESSION_FIELDS
        memory = self._memory({k: v for k, v in q.items() if k != "token"}, allowed)
        return JSONResponse(_jsonable(asdict(memory.stats())))

    def summary_history(self, request: Request) -> Response:
        params = {k: v for k, v in request.query_params.items() if k != "token"}
        limit_text = params.pop("limit", None)
        limit = None
        if limit_text is not None:
            if not (limit_text.isdecimal() and limit_text.isascii()):
                raise ApiError(400, "bad_field", f"limit ({limit_text!r:.40}) must be an integer >= 0")
            limit = int(limit_text)
        memory = self._memory(params, SESSION_FIELDS)
        return JSONResponse({"versions": [asdict(v) for v in memory.summary_history(limit)]})

    def sessions(self, request: Request) -> Response:
        return JSONResponse({"sessions": [_ns(ns) for ns in self.deployment.sessions()]})


def _ns(ns: Namespace) -> dict[str, str | None]:
    return {"session_id": ns.session_id, "user_id": ns.user_id or None, "agent_id": ns.agent_id or None}


def _message(m: Message) -> dict[str, Any]:
    return {"id": m.id, **m.to_dict()}


def _hit(h: RecallHit) -> dict[str, Any]:
    return {"record_id": h.record_id, "kind": h.kind, "text": h.text, "score": h.score,
            "parts": {k: (None if v is None or v != v else v) for k, v in h.parts.items()},
            "message_ids": list(h.message_ids), "created_at": h.created_at, "importance": h.importance,
            "pinned": h.pinned, "tags": list(h.tags), "session": _ns(h.namespace)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


__all__ = ["Api", "ApiError", "ConfigError", "InvalidMessageError"]
