"""The Starlette application: routes, error pages, and the guard in front of everything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from langmem_tiers.errors import LangmemTiersError
from langmem_tiers.inspector.api import Api, ApiError
from langmem_tiers.inspector.deployment import Deployment, OutOfScopeError, SessionNotFoundError
from langmem_tiers.inspector.guard import Guard
from langmem_tiers.inspector.openapi import schema
from langmem_tiers.inspector.pages import Pages
from langmem_tiers.inspector.settings import InspectorSettings


def create_app(settings: InspectorSettings, deployment: Deployment) -> Starlette:
    """The inspector for ``deployment``; the caller owns (and closes) the deployment."""
    from langmem_tiers import __version__

    pages = Pages(settings, deployment)
    api = Api(settings, deployment)

    def openapi(request: Request) -> Response:
        return JSONResponse(schema(__version__))

    def read_only_refusal(endpoint: Any) -> Any:
        async def refuse(request: Request) -> Response:
            return _error(request, 403, "read_only", "this server was started with --read-only: no changes are "
                          "accepted")
        return refuse if settings.read_only else endpoint

    routes = [
        Route("/", pages.index),
        Route("/session", pages.session),
        Route("/session/plot.svg", pages.plot),
        Route("/session/export.jsonl", pages.export),
        Route("/session/forget", pages.confirm_forget, methods=["GET"]),
        Route("/session/forget", read_only_refusal(pages.forget), methods=["POST"]),
        Route("/session/remember", read_only_refusal(pages.remember), methods=["POST"]),
        Route("/session/pin", read_only_refusal(pages.pin), methods=["POST"]),
        Route("/api/openapi.json", openapi),
        Route("/api/sessions", api.sessions),
        Route("/api/stats", api.stats),
        Route("/api/summary_history", api.summary_history),
        Route("/api/add", api.add, methods=["POST"]),
        Route("/api/context", api.context, methods=["POST"]),
        Route("/api/search", api.search, methods=["POST"]),
        Route("/api/remember", api.remember, methods=["POST"]),
        Route("/api/forget", api.forget, methods=["POST"]),
        Route("/api/pin", api.pin, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(Path(__file__).with_name("static"))), name="static"),
    ]

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return _error(request, exc.status, exc.code, str(exc))

    async def memory_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, SessionNotFoundError):
            return _error(request, 404, "not_found", str(exc))
        if isinstance(exc, OutOfScopeError):
            return _error(request, 403, "out_of_scope", str(exc))
        if isinstance(exc, ValueError):  # ConfigError, InvalidMessageError, InvalidNamespaceError
            return _error(request, 400, type(exc).__name__, str(exc))
        return _error(request, 500, type(exc).__name__, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(request, exc.status_code, "http", str(exc.detail))

    app = Starlette(routes=routes, exception_handlers={
        ApiError: api_error, LangmemTiersError: memory_error, HTTPException: http_error})
    app.add_middleware(Guard, settings=settings)
    return app


def _error(request: Request, status: int, code: str, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": code, "message": message}, status_code=status)
    return PlainTextResponse(f"{status} {code}: {message}", status_code=status)
