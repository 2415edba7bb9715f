"""``langmem-tiers serve``: open the deployment, print the URL with its token, run uvicorn."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from langmem_tiers.errors import MissingDependencyError
from langmem_tiers.inspector.settings import InspectorSettings


def _require_stack() -> None:
    try:
        import jinja2  # noqa: F401
        import python_multipart  # noqa: F401  (form parsing for the pages' POSTs)
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(f"the inspector needs {e.name}: pip install 'langmem-tiers[inspector]'") from e


def serve(settings: InspectorSettings, *, out: IO[str] | None = None, **memory_options: Any) -> None:
    """Serve until interrupted (Ctrl-C)."""
    _require_stack()
    import uvicorn

    from langmem_tiers.inspector.app import create_app
    from langmem_tiers.inspector.deployment import Deployment

    deployment = Deployment.open(settings, **memory_options)
    try:
        app = create_app(settings, deployment)
        _announce(settings, out or sys.stderr)
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
    finally:
        deployment.close()


@contextmanager
def running(settings: InspectorSettings, **memory_options: Any) -> Iterator[str]:
    """Serve on a background thread (tests, benchmarks, notebooks); yields the URL with the token."""
    _require_stack()
    import uvicorn

    from langmem_tiers.inspector.app import create_app
    from langmem_tiers.inspector.deployment import Deployment

    deployment = Deployment.open(settings, **memory_options)
    server = uvicorn.Server(uvicorn.Config(create_app(settings, deployment), host=settings.host,
                                           port=settings.port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="langmem-tiers-inspector", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"the inspector could not start on {settings.host}:{settings.port}")
            threading.Event().wait(0.02)
        yield settings.url()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        deployment.close()


def _announce(settings: InspectorSettings, out: IO[str]) -> None:
    mode = " (read-only)" if settings.read_only else ""
    scope = f" restricted to user {settings.user!r}" if settings.user else ""
    print(f"langmem-tiers inspector{mode}{scope} on {settings.path}", file=out)
    print(f"open {settings.url()}", file=out)
    print("the token in that URL is the key to this memory: do not share it", file=out)
    out.flush()
