"""Many sessions of one journal, keyed by user and session, with a bounded set kept open.

The history factory and the agent middleware serve one session per ``(user_id,
session_id)`` pair from one journal and vector store. :class:`SessionPool` opens the
journal once, hands out per-session handles, and keeps at most ``max_sessions`` of
them (least recently used first out), so a server that sees millions of threads does
not grow without bound.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from langmem_tiers import ConfigError, InvalidNamespaceError, MemoryConfig, TieredMemory

DEFAULT_MAX_SESSIONS = 1024
"""Sessions a pool keeps open. A handle holds no connection of its own (the journal and
Chroma are shared); what the bound caps is the per-session state adapters keep beside it."""

T = TypeVar("T")
SessionKey = tuple[str | None, str]
"""``(user_id, session_id)``; ``None`` is a session without a user (its own private scope)."""


def as_id(value: Any, what: str) -> str:
    """A thread, session or user id as the text the journal stores.

    Ids are compared as text: the thread ``7`` and the thread ``"7"`` are one session.
    Ids reach an app from JSON bodies, URL paths and headers, where the two spellings
    cannot be told apart; a journal keyed by type would split one conversation in two.
    Integers and UUIDs are accepted and converted; anything else is refused.

    Raises:
        InvalidNamespaceError: ``value`` is neither text, an integer nor a UUID.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (int, uuid.UUID)) and not isinstance(value, bool):
        return str(value)
    raise InvalidNamespaceError(
        f"{what} must be a string (an integer or UUID is compared as its text); "
        f"got {type(value).__name__} {value!r:.80}"
    )


class SessionPool(Generic[T]):
    """Sessions of one journal, opened lazily, at most ``max_sessions`` kept (LRU).

    ``build`` turns a session's :class:`TieredMemory` into what the adapter keeps per
    session (a history, a thread's journaling state). Thread-safe.

    A handle pushed out of the pool is not closed there and then: a request may still be
    using it. It closes when the pool closes (waiting for its background summaries), or
    is reclaimed by the garbage collector once nothing uses it; the next request for that
    session opens a fresh handle on the same journal rows, so nothing is lost.
    """

    def __init__(
        self,
        path: str | Path,
        build: Callable[[TieredMemory], T],
        memory_of: Callable[[T], TieredMemory],
        *,
        user_id: str | None,
        agent_id: str | None,
        config: MemoryConfig | None,
        max_sessions: int,
        memory_kwargs: dict[str, Any],
    ) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigError(f"max_sessions ({max_sessions!r}) must be a positive integer: the number of "
                              f"sessions kept open, default {DEFAULT_MAX_SESSIONS}")
        self.path = path
        self.user_id = None if user_id is None or user_id == "" else as_id(user_id, "user_id")
        self.agent_id = agent_id
        self.config = config
        self.max_sessions = max_sessions
        self.memory_kwargs = memory_kwargs
        self._build = build
        self._memory_of = memory_of
        self._open: OrderedDict[SessionKey, T] = OrderedDict()
        self._retired: weakref.WeakSet[TieredMemory] = weakref.WeakSet()
        self._root: TieredMemory | None = None
        self._lock = threading.Lock()

    def key(self, session_id: Any, user_id: Any = None) -> SessionKey:
        """The pool key of a session; ``user_id`` ``None`` (or ``""``) means the pool's own ``user_id``."""
        session = as_id(session_id, "session_id")
        user = self.user_id if user_id is None or user_id == "" else as_id(user_id, "user_id")
        return (user or None, session)

    def get(self, session_id: Any, user_id: Any = None) -> T:
        """The session's entry, opened on first use; refreshes its place in the LRU order."""
        key = self.key(session_id, user_id)
        with self._lock:
            entry = self._open.get(key)
            if entry is not None:
                self._open.move_to_end(key)
                return entry
            entry = self._build(self._memory(key))
            self._open[key] = entry
            while len(self._open) > self.max_sessions:
                _, old = self._open.popitem(last=False)
                memory = self._memory_of(old)
                if memory is not self._root:
                    self._retired.add(memory)
            return entry

    def __len__(self) -> int:
        return len(self._open)

    def _memory(self, key: SessionKey) -> TieredMemory:
        user, session = key
        if self._root is None:
            # The first session opens the journal and Chroma; the others share them. The root
            # carries the pool's own user: for_session() inherits it when given no user, so a pool
            # without a user reaches sessions without one, and never another user's by default.
            self._root = TieredMemory.open(
                self.path, session_id=session, user_id=self.user_id, agent_id=self.agent_id,
                config=self.config, **self.memory_kwargs,
            )
            if user == self.user_id:
                return self._root
        return self._root.for_session(session, user_id=user)

    def close(self) -> None:
        """Close every handle (waiting for background summaries), the shared journal last."""
        with self._lock:
            handles = [self._memory_of(e) for e in self._open.values()] + list(self._retired)
            for memory in handles:
                if memory is not self._root:
                    memory.close()
            if self._root is not None:
                self._root.close()
                self._root = None
            self._open.clear()
            self._retired = weakref.WeakSet()
