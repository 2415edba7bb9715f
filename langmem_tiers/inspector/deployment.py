"""The memory deployment the server shows: one journal, one handle per session, scoped by ``--user``.

Every session handle comes from one root handle (:meth:`TieredMemory.for_session`), so the
server holds one journal connection and one vector store. The root handle needs a namespace of
its own (``TieredMemory.open`` creates the one it is given): it is :data:`ROOT_SESSION`, never
written to and hidden from every listing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from langmem_tiers.errors import ConfigError, LangmemTiersError
from langmem_tiers.inspector.settings import InspectorSettings
from langmem_tiers.journal.base import Namespace
from langmem_tiers.memory import TieredMemory

ROOT_SESSION = "langmem-tiers-inspector"


class SessionNotFoundError(LangmemTiersError, LookupError):
    """A session the server does not hold (or may not show under ``--user``)."""


class OutOfScopeError(LangmemTiersError, PermissionError):
    """A request for another user's data on a server restricted with ``--user``."""


@dataclass(frozen=True)
class SessionRow:
    """One line of the sessions page."""

    namespace: Namespace
    messages: int
    records: int
    tokens: int
    last_activity: float | None


class Deployment:
    """Session handles over one journal; every lookup applies the server's ``--user`` restriction."""

    def __init__(self, settings: InspectorSettings, root: TieredMemory) -> None:
        self.settings = settings
        self.root = root
        self._handles: dict[Namespace, TieredMemory] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, settings: InspectorSettings, **memory_options: Any) -> Deployment:
        if not settings.vectors:
            memory_options.setdefault("embedder", False)
        if settings.keyring is not None:  # an encrypted journal: without its keys every read fails
            memory_options.setdefault("keyring", settings.keyring)
        root = TieredMemory.open(settings.path, session_id=ROOT_SESSION, user_id=settings.user,
                                 chroma=settings.chroma, **memory_options)
        return cls(settings, root)

    def close(self) -> None:
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()
        self.root.close()

    def namespace(self, session_id: Any, user_id: Any = None, agent_id: Any = None) -> Namespace:
        """Validate ids from a request (``None``: absent; ``""`` is refused as by ``Namespace.of``);
        refuse another user's ids under ``--user``."""
        user = user_id
        if self.settings.user is not None:
            if user is None:
                user = self.settings.user
            elif user != self.settings.user:
                raise OutOfScopeError(f"this server is restricted to user {self.settings.user!r} (--user); "
                                 f"user {user!r} is out of its scope")
        return Namespace.of(session_id, user, agent_id)

    def sessions(self) -> list[Namespace]:
        scope = "user" if self.settings.user is not None else None
        return [ns for ns in self.root.sessions(scope) if ns.session_id != ROOT_SESSION or ns.agent_id]

    def exists(self, ns: Namespace) -> bool:
        return ns in set(self.sessions())

    def handle(self, ns: Namespace, *, create: bool = False) -> TieredMemory:
        """The session's handle; unknown sessions are refused unless ``create`` (the API's ``add``)."""
        if ns.session_id == ROOT_SESSION and not ns.agent_id:
            raise ConfigError(f"session id {ROOT_SESSION!r} is reserved by the inspector")
        if self.settings.user is not None and ns.user_id != self.settings.user:
            raise OutOfScopeError(f"this server is restricted to user {self.settings.user!r} (--user)")
        with self._lock:
            handle = self._handles.get(ns)
        if handle is not None:
            return handle
        if not create and not self.exists(ns):
            raise SessionNotFoundError(f"no session {ns.session_id!r} (user {ns.user_id or '-'!r}, agent "
                           f"{ns.agent_id or '-'!r}) in this memory")
        with self._lock:
            handle = self._handles.get(ns)
            if handle is None:
                handle = self.root.for_session(ns.session_id, user_id=ns.user_id or None,
                                               agent_id=ns.agent_id or None)
                self._handles[ns] = handle
            return handle

    def forgotten(self) -> None:
        """After an erase, drop cached handles: a handle of an erased session would re-create it."""
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            handle.close()

    def rows(self, search: str = "") -> tuple[list[SessionRow], int]:
        """Session rows matching ``search`` (in any id), newest activity first, and how many were empty."""
        needle = search.strip().lower()
        rows: list[SessionRow] = []
        empty = 0
        for ns in self.sessions():
            if needle and not any(needle in part.lower() for part in (ns.session_id, ns.user_id, ns.agent_id)):
                continue
            handle = self.handle(ns, create=True)  # listed, so it exists: skip the lookup
            stats = handle.stats()
            if stats.messages == 0 and stats.records == 0:
                empty += 1  # erased sessions leave an empty row (ids are never reused)
                continue
            window = handle.window()
            last = max((m.created_at or 0.0 for m in window), default=0.0) or None
            rows.append(SessionRow(ns, stats.messages, stats.records, stats.window_tokens + stats.summary_tokens,
                                   last))
        rows.sort(key=lambda r: (-(r.last_activity or 0.0), r.namespace.user_id, r.namespace.session_id))
        return rows, empty
