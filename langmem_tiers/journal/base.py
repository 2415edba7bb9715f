"""The journal protocol: the durable source of truth of every tier.

A backend offers short transactions. ``write(ns)`` serializes writers of one
session (across threads, processes and hosts) and commits before it returns;
``read()`` gives a consistent snapshot. The algorithms that decide what to
write live outside the backends (``langmem_tiers.window``, ``.summary``,
``.recall``), so SQLite and PostgreSQL run the same logic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from langmem_tiers.errors import InvalidNamespaceError
from langmem_tiers.messages import Message

SCHEMA_VERSION = 3
MAX_ID_CHARS = 512


@dataclass(frozen=True, slots=True)
class Namespace:
    """Who a session belongs to. Empty strings stand for "none"."""

    session_id: str
    user_id: str = ""
    agent_id: str = ""

    @classmethod
    def of(cls, session_id: Any, user_id: Any = None, agent_id: Any = None) -> Namespace:
        """Validate ids: non-empty text up to 512 characters, no NUL, valid unicode."""
        return cls(
            session_id=_check_id("session_id", session_id, required=True),
            user_id=_check_id("user_id", user_id),
            agent_id=_check_id("agent_id", agent_id),
        )


def _check_id(field_name: str, value: Any, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value:
        raise InvalidNamespaceError(f"{field_name} must be a non-empty string; got {value!r:.80}")
    if len(value) > MAX_ID_CHARS:
        raise InvalidNamespaceError(
            f"{field_name} has {len(value)} characters, over the limit of {MAX_ID_CHARS}: use a shorter id or a hash"
        )
    if "\x00" in value:
        raise InvalidNamespaceError(f"{field_name} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidNamespaceError(f"{field_name} is not valid unicode (lone surrogate)") from e
    return value


@dataclass(frozen=True, slots=True)
class SessionState:
    """Cursors of one session. Message ids are journal-wide and increase with time.

    Messages with ``id >= window_start`` are in the window; those with
    ``id <= summary_cursor`` are covered by ``summary``; those in between were
    evicted but not summarized yet (pending, retried after a failure).
    """

    window_start: int = 0
    summary: str = ""
    summary_tokens: int = 0
    summary_cursor: int = 0
    summary_version: int = 0
    failures: int = 0
    last_error: str | None = None
    retry_at: float = 0.0
    # Grows with every write to this session (messages, cursors, summary, records, clear):
    # readers compare it to know whether a cached view is still current.
    version: int = 0


@dataclass(frozen=True, slots=True)
class WindowEntry:
    """The fields the window planner needs: no content."""

    id: int
    role: str
    tokens: int


@dataclass(frozen=True)
class Record:
    """A recallable unit: an evicted turn or an explicit memory, with provenance."""

    id: int
    namespace: Namespace
    kind: str
    text: str
    message_ids: tuple[int, ...] = ()
    importance: float = 0.5
    pinned: bool = False
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True)
class NewRecord:
    """A record to insert (its id is assigned by the journal)."""

    kind: str
    text: str
    message_ids: tuple[int, ...] = ()
    importance: float = 0.5
    pinned: bool = False
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class KeywordHit:
    record_id: int
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One pending index change. ``seq`` grows each time the record is queued again,
    so finishing an item never drops a newer change queued meanwhile."""

    record_id: int
    op: str  # "upsert" or "delete"
    attempts: int
    seq: int = 0


@dataclass(frozen=True)
class Scope:
    """Which namespaces a query may see: one session, a user's sessions, or an agent's."""

    kind: str  # "session" | "user" | "agent"
    namespace: Namespace

    def matches(self, ns: Namespace) -> bool:
        own = self.namespace
        if self.kind == "session":
            return ns == own
        if self.kind == "user":
            return ns.user_id == own.user_id
        return ns.agent_id == own.agent_id and ns.user_id == own.user_id


class WriteTxn(Protocol):
    """Operations inside one serialized write transaction of one session."""

    ns_id: int

    def state(self) -> SessionState: ...

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]: ...

    def window_entries(self, start: int) -> list[WindowEntry]: ...

    def messages_between(self, after: int, before: int) -> list[Message]: ...

    def open_tool_calls(self, since: int) -> set[str]: ...

    def set_window_start(self, window_start: int) -> None: ...

    def set_summary(self, summary: str, tokens: int, cursor: int) -> None: ...

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None: ...

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]: ...

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None: ...


class ReadTxn(Protocol):
    """Reads from one consistent snapshot."""

    def state(self, ns_id: int) -> SessionState: ...

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]: ...

    def count_between(self, ns_id: int, after: int, before: int) -> int: ...

    def last_message_id(self, ns_id: int) -> int: ...


class Journal(Protocol):
    """A durable store of sessions, messages, summary state, recall records and the index outbox."""

    url: str

    def namespace_id(self, ns: Namespace, create: bool = True) -> int | None: ...

    def write(self, ns_id: int) -> AbstractContextManager[WriteTxn]: ...

    def read(self) -> AbstractContextManager[ReadTxn]: ...

    def iter_messages(self, ns_id: int, after: int = 0, batch: int = 500) -> Iterator[Message]: ...

    def count_messages(self, ns_id: int | None = None) -> int: ...

    def messages_by_id(self, ids: Sequence[int]) -> list[Message]: ...

    def outbox_error(self) -> str | None: ...

    def integrity_check(self) -> str: ...

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]: ...

    def clear_session(self, ns_id: int) -> list[int]: ...

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]: ...

    # --- recall records, keyword index and outbox ---

    def records(self, ids: Sequence[int]) -> list[Record]: ...

    def count_records(self, ns_id: int) -> int: ...

    def record_stats(self, ns_id: int) -> tuple[int, int]: ...

    def record_ids(self, ns_id: int, after: int = 0) -> list[int]: ...

    def scoped_records(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None,
                       pinned_only: bool = False) -> list[Record]: ...

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int,
                       kinds: Sequence[str] | None = None) -> list[KeywordHit]: ...

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]: ...

    def delete_records(self, ids: Sequence[int]) -> int: ...

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None) -> None: ...

    def outbox(self, limit: int, due_only: bool = True) -> list[OutboxItem]: ...

    def outbox_done(self, items: Sequence[OutboxItem]) -> None: ...

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None: ...

    def outbox_count(self) -> int: ...

    def requeue_all(self) -> int: ...

    def links(self, record_ids: Sequence[int]) -> list[tuple[int, int, str, float]]: ...

    def add_link(self, a: int, b: int, relation: str, strength: float) -> None: ...

    def close(self) -> None: ...
