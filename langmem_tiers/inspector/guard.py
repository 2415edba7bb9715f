"""Jupyter-style request checks, in front of every route: Host header, access token, cross-site posts.

Order: a wrong Host is refused first (DNS rebinding: an attacker's page on ``evil.example``
resolving to 127.0.0.1 must not reach us), then the token (query ``?token=``, an
``Authorization: Bearer`` header, or the cookie a first visit with the token sets), then
for every method other than GET/HEAD the request must not come from another site
(``Sec-Fetch-Site`` / ``Origin``). CSRF tokens on forms and cookie-authenticated API calls are
checked by the endpoints (:func:`check_csrf`), which read the bodies.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from langmem_tiers.inspector.settings import InspectorSettings

SAFE_METHODS = frozenset({"GET", "HEAD"})
PUBLIC_PREFIXES = ("/static/",)
SAME_SITE_FETCH = frozenset({"same-origin", "none"})


class Guard:
    """ASGI middleware: refuses what the rules forbid before any route runs."""

    def __init__(self, app: ASGIApp, settings: InspectorSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self.check(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, request: Request) -> Response | None:
        settings = self.settings
        host = request.headers.get("host", "")
        if not settings.host_allowed(host):
            return _refuse(request, 403, "host_not_allowed",
                           f"Host header {host!r} is not allowed (DNS rebinding protection): open "
                           f"{settings.url(with_token=False)}, or start the server with --allow-host NAME")
        if request.url.path.startswith(PUBLIC_PREFIXES):
            return None
        query_token = request.query_params.get("token")
        via = self.authenticated_via(request)
        if via is None:
            return _refuse(request, 401, "token_required",
                           "missing or wrong access token: open the URL with ?token=... that "
                           "`langmem-tiers serve` printed, or send 'Authorization: Bearer TOKEN'")
        request.scope.setdefault("state", {})["auth"] = via
        if request.method not in SAFE_METHODS:
            cross = _cross_site(request)
            if cross:
                return _refuse(request, 403, "cross_site", f"cross-site request refused ({cross}): mutations "
                               "are accepted only from this server's own pages or from API clients")
        elif via == "query" and query_token and not request.url.path.startswith("/api/"):
            # First visit with the token: keep it in a cookie and take it out of the address bar.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(settings.cookie_name, settings.token, httponly=True, samesite="strict",
                                path="/")
            return response
        return None

    def authenticated_via(self, request: Request) -> str | None:
        token = self.settings.token
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() in ("bearer", "token") and _same(value.strip(), token):
            return "header"
        if _same(request.query_params.get("token", ""), token):
            return "query"
        if _same(request.cookies.get(self.settings.cookie_name, ""), token):
            return "cookie"
        return None


def check_csrf(request: Request, settings: InspectorSettings, submitted: str | None) -> Response | None:
    """Cookie-authenticated mutations must echo the CSRF token (forms: field ``csrf``; API: header
    ``X-CSRF-Token``). A request carrying the token itself (header) cannot be forged by another site."""
    if request.scope.get("state", {}).get("auth") == "header":
        return None
    if submitted and _same(submitted, settings.csrf_token):
        return None
    return _refuse(request, 403, "csrf", "missing or wrong CSRF token: submit the form from the inspector's own "
                   "page (reload it), or call the API with 'Authorization: Bearer TOKEN'")


def _cross_site(request: Request) -> str | None:
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site and fetch_site not in SAME_SITE_FETCH:
        return f"Sec-Fetch-Site: {fetch_site}"
    origin = request.headers.get("origin")
    if origin and origin != "null":
        if urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
            return f"Origin {origin} is not this server"
    elif origin == "null":
        return "Origin: null"
    return None


def _same(given: str, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def _refuse(request: Request, status: int, code: str, message: str) -> Response:
    if request.url.path.startswith("/api/") or "text/html" not in request.headers.get("accept", ""):
        return JSONResponse({"error": code, "message": message}, status_code=status)
    return PlainTextResponse(f"{status}: {message}", status_code=status)
