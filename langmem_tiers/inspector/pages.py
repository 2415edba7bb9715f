"""The HTML pages: sessions, one session (timeline, summary, plot, query, memories), confirmations."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.templating import Jinja2Templates

from langmem_tiers.errors import ConfigError
from langmem_tiers.inspector import views
from langmem_tiers.inspector.deployment import Deployment
from langmem_tiers.inspector.guard import check_csrf
from langmem_tiers.inspector.settings import InspectorSettings
from langmem_tiers.journal.base import Namespace

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
TEMPLATES.env.filters["when"] = views.when
TEMPLATES.env.filters["part"] = views.score_part
SESSIONS_PER_PAGE = 50
SUMMARY_VERSIONS_SHOWN = 50  # the journal keeps MemoryConfig.summary_history versions (20 by default)


def session_query(ns: Namespace, **extra: Any) -> str:
    """The query string naming a session (ids may hold any character, so they are not path parts)."""
    params = {"session": ns.session_id, "user": ns.user_id, "agent": ns.agent_id}
    params.update({k: v for k, v in extra.items() if v is not None and v != ""})
    return urlencode({k: v for k, v in params.items() if v != ""})


TEMPLATES.env.globals["session_query"] = session_query


class Pages:
    def __init__(self, settings: InspectorSettings, deployment: Deployment) -> None:
        self.settings = settings
        self.deployment = deployment

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.update(settings=self.settings, csrf=self.settings.csrf_token, read_only=self.settings.read_only,
                       notice=request.query_params.get("notice", ""))
        return TEMPLATES.TemplateResponse(request, name, context, status_code=status)

    def _ns(self, request: Request) -> Namespace:
        q = request.query_params
        if not q.get("session"):
            raise ConfigError("the page needs ?session=ID (and &user=ID, &agent=ID where the session has them)")
        return self.deployment.namespace(q.get("session"), q.get("user"), q.get("agent"))

    # --- GET ------------------------------------------------------------------------------

    def index(self, request: Request) -> Response:
        search = request.query_params.get("q", "")
        page = _int(request.query_params.get("page", "1"), "page", minimum=1)
        rows, empty = self.deployment.rows(search)
        shown = rows[(page - 1) * SESSIONS_PER_PAGE: page * SESSIONS_PER_PAGE]
        users: dict[str, int] = {}
        for r in rows:
            users[r.namespace.user_id] = users.get(r.namespace.user_id, 0) + 1
        more = len(rows) > page * SESSIONS_PER_PAGE
        return self.render(request, "index.html", rows=shown, users=sorted(users.items()), search=search,
                           empty=empty, page=page, more=more, total=len(rows))

    def session(self, request: Request) -> Response:
        ns = self._ns(request)
        memory = self.deployment.handle(ns)
        q = request.query_params
        after_text = q.get("after")
        after = None if after_text in (None, "") else _int(after_text, "after", minimum=0)
        query = q.get("q", "")
        result = None
        if query.strip():
            budget_text = q.get("budget")
            budget = None if not budget_text else _int(budget_text, "budget", minimum=1)
            result = views.run_query(memory, query, budget)
        recalled = result.recalled_message_ids if result else frozenset()
        page = views.timeline(memory, after, self.settings.page_size, recalled)
        return self.render(request, "session.html", ns=ns, page=page, result=result, query=query,
                           memories=views.memories(memory), tier_labels=views.TIER_LABELS,
                           history=memory.summary_history(SUMMARY_VERSIONS_SHOWN),
                           plot_query=session_query(ns, v=page.version),
                           stats_fields=[(k, v) for k, v in vars(page.stats).items()
                                         if k not in ("session", "metrics")],
                           metrics=page.stats.metrics)

    def plot(self, request: Request) -> Response:
        memory = self.deployment.handle(self._ns(request))
        return Response(views.tier_plot(memory), media_type="image/svg+xml",
                        headers={"Cache-Control": "private, max-age=3600"})

    def confirm_forget(self, request: Request) -> Response:
        ns = self._ns(request)
        memory = self.deployment.handle(ns)
        target = _target(request.query_params.get("target", ""))
        what: dict[str, Any] = {"target": target}
        if isinstance(target, int):
            texts = [r.text for r in views.memories(memory) if r.record_id == target]
            back = request.query_params.get("back", "")
            if not texts and back.strip():  # a recalled turn: find its text again through the query that showed it
                texts = [h.text for h in memory.search(back, k=50, scope="user") if h.record_id == target]
            what["text"] = texts[0] if texts else None
        else:
            scoped = [s for s in self.deployment.sessions()
                      if s == ns or (target == "user" and s.user_id == ns.user_id and ns.user_id)]
            what["sessions"] = scoped
        return self.render(request, "confirm.html", ns=ns, what=what, back=request.query_params.get("back", ""))

    def export(self, request: Request) -> Response:
        from langmem_tiers.cli.transfer import export_lines

        ns = self._ns(request)
        memory = self.deployment.handle(ns)
        lines = export_lines(memory.iter_messages(), ns.user_id, ns.agent_id, ns.session_id)
        filename = "".join(c if c.isalnum() or c in "-_." else "_" for c in ns.session_id)[:80] or "session"
        return StreamingResponse(iter(lines), media_type="application/x-ndjson",
                                 headers={"Content-Disposition": f'attachment; filename="{filename}.jsonl"'})

    # --- POST -----------------------------------------------------------------------------

    async def _form(self, request: Request) -> tuple[FormData, Response | None]:
        """The posted form, and the refusal to send instead when its CSRF token does not check out."""
        form = await request.form()
        return form, check_csrf(request, self.settings, _text(form.get("csrf")))

    async def remember(self, request: Request) -> Response:
        form, refusal = await self._form(request)
        if refusal is not None:
            return refusal
        ns = self._ns(request)
        memory = self.deployment.handle(ns)
        text = _text(form.get("text")) or ""
        kind = _text(form.get("kind")) or "fact"
        importance = _float(_text(form.get("importance")) or "0.5", "importance")
        pinned = form.get("pinned") is not None
        key = (_text(form.get("key")) or "").strip() or None
        record_id = await run_in_threadpool(lambda: memory.remember(text, kind, importance=importance, pinned=pinned,
                                                                    key=key))
        return RedirectResponse(f"/session?{session_query(ns, notice=f'remembered record {record_id}')}",
                                status_code=303)

    async def pin(self, request: Request) -> Response:
        form, refusal = await self._form(request)
        if refusal is not None:
            return refusal
        ns = self._ns(request)
        memory = self.deployment.handle(ns)
        target = _target(_text(form.get("target")) or "")
        if not isinstance(target, int):
            raise ConfigError(f"target ({target!r}) must be the id of a memory to pin or unpin")
        wanted = _text(form.get("pinned"))
        if wanted not in ("yes", "no"):
            raise ConfigError(f"pinned ({wanted!r:.20}) must be 'yes' (pin) or 'no' (unpin)")
        await run_in_threadpool(memory.pin, target, wanted == "yes")
        notice = f"{'pinned' if wanted == 'yes' else 'unpinned'} record {target}"
        return RedirectResponse(f"/session?{session_query(ns, notice=notice)}#panel-memories", status_code=303)

    async def forget(self, request: Request) -> Response:
        form, refusal = await self._form(request)
        if refusal is not None:
            return refusal
        if form.get("confirm") != "yes":
            raise ConfigError("forget needs the confirmation (confirm=yes) from the confirmation page")
        ns = self._ns(request)
        memory = self.deployment.handle(ns)
        target = _target(_text(form.get("target")) or "")
        removed = await run_in_threadpool(memory.forget, target)
        self.deployment.forgotten()
        if isinstance(target, int):
            back = _text(form.get("back")) or ""
            notice = f"forgot record {target} ({removed} removed)"
            return RedirectResponse(f"/session?{session_query(ns, q=back, notice=notice)}", status_code=303)
        return RedirectResponse("/?" + urlencode({"notice": f"forgot the {target} {ns.session_id!r} ({removed} "
                                                  "records removed)"}), status_code=303)


def _target(text: str) -> int | str:
    value = text.strip()
    if value in ("session", "user"):
        return value
    if value.isdecimal() and value.isascii() and int(value) > 0:
        return int(value)
    raise ConfigError(f"target ({text!r:.40}) must be a record id (a positive integer), 'session' or 'user'")


def _int(text: str, name: str, minimum: int) -> int:
    value = text.strip()
    if not (value.isdecimal() and value.isascii()) or int(value) < minimum:
        raise ConfigError(f"{name} ({text!r:.40}) must be an integer >= {minimum}")
    return int(value)


def _float(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{name} ({text!r:.40}) must be a number") from None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
