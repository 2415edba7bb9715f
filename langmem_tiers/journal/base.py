"""The journal protocol: the durable source of truth of every tier.

A backend offers short transactions. ``write(ns)`` serializes writers of one
session (across threads, processes and hosts) and commits before it returns;
``read()`` gives a consistent snapshot. The algorithms that decide what to
write live outside the backends (``langmem_tiers.window``, ``.summary``,
``.recall``), so SQLite and PostgreSQL run the same logic.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from langmem_tiers.errors import InvalidNamespaceError, JournalError, SchemaVersionError
from langmem_tiers.messages import MAX_KEY_CHARS, Message
from langmem_tiers.text import query_words

SCHEMA_VERSION = 14
MAX_ID_CHARS = 512
# A keyword query keeps at most this many distinct words: a pasted document as the query
# (20k distinct words) overflowed PostgreSQL's parser stack and made FTS5 rank every record.
MAX_QUERY_TERMS = 256
# Summary versions a session keeps when the caller does not say (``MemoryConfig.summary_history``).
DEFAULT_SUMMARY_HISTORY = 20


@dataclass(frozen=True, slots=True)
class Namespace:
    """Who a session belongs to. Empty strings stand for "none"."""

    session_id: str
    user_id: str = ""
    agent_id: str = ""

    @property
    def anonymous(self) -> bool:
        """True for a session opened without a user id: its own, private scope."""
        return not self.user_id

    @classmethod
    def of(cls, session_id: Any, user_id: Any = None, agent_id: Any = None) -> Namespace:
        """Validate ids (non-empty text up to 512 characters, no NUL, valid unicode) and normalize them to NFC.

        NFC makes "jos\u00e9" and "jose\u0301" (one name typed two ways) one id, so erasing
        a user reaches everything stored under either spelling.

        Example:
            >>> Namespace.of("s", "jose\u0301") == Namespace.of("s", "jos\u00e9")
            True
        """
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
    normalized = unicodedata.normalize("NFC", value)
    if len(normalized) > MAX_ID_CHARS:
        raise InvalidNamespaceError(
            f"{field_name} has {len(normalized)} characters in NFC form, over the limit of {MAX_ID_CHARS}: "
            "use a shorter id or a hash"
        )
    return normalized


def nfc_merge_plan(
    rows: Iterable[tuple[int, str, str, str]],
) -> tuple[list[tuple[int, int]], list[tuple[int, Namespace]]]:
    """How the v4 migration folds stored ids into NFC (pure; both backends apply it).

    ``rows`` are ``(ns, user_id, agent_id, session_id)``. Namespaces whose ids become equal
    in NFC are merged into the lowest ``ns`` of the group: the plan returns the merges
    ``(from_ns, into_ns)`` (messages, records, outbox rows move to ``into_ns``; its session
    state is kept, the other states are dropped) and the renames ``(ns, nfc_namespace)`` of
    the surviving rows whose stored spelling is not NFC. Merged messages keep their ids, so
    they interleave by time with the surviving session's own messages.

    Example:
        >>> nfc_merge_plan([(1, "jose\u0301", "", "s"), (2, "jos\u00e9", "", "s")])
        ([(2, 1)], [(1, Namespace(session_id='s', user_id='jos\xe9', agent_id=''))])
    """
    groups: dict[tuple[str, str, str], list[tuple[int, tuple[str, str, str]]]] = {}
    for ns, user_id, agent_id, session_id in rows:
        stored = (user_id, agent_id, session_id)
        key = tuple(unicodedata.normalize("NFC", v) for v in stored)
        groups.setdefault(key, []).append((ns, stored))  # type: ignore[arg-type]
    merges: list[tuple[int, int]] = []
    renames: list[tuple[int, Namespace]] = []
    for key, members in groups.items():
        members.sort()
        into, stored = members[0]
        merges += [(ns, into) for ns, _ in members[1:]]
        if stored != key:
            renames.append((into, Namespace(session_id=key[2], user_id=key[0], agent_id=key[1])))
    return sorted(merges), sorted(renames, key=lambda r: r[0])


def search_terms(text: str) -> list[str]:
    """The words a keyword query searches for: :func:`query_words`, at most ``MAX_QUERY_TERMS``.

    Over the cap the longest words are kept (the rarer ones, which weigh most in the ranking),
    in their order of appearance.
    """
    words = query_words(text)
    if len(words) <= MAX_QUERY_TERMS:
        return words
    keep = set(sorted(range(len(words)), key=lambda i: (-len(words[i]), i))[:MAX_QUERY_TERMS])
    return [w for i, w in enumerate(words) if i in keep]


def parse_schema_version(raw: object, where: str) -> int:
    """The stored schema version as an int, or a typed error naming the bad value and the fix."""
    try:
        version = int(str(raw))
    except ValueError:
        raise SchemaVersionError(
            f"journal {where} has schema version {str(raw)!r:.80}, which is not an integer: the meta table was "
            "edited or damaged; restore it from a backup or set meta.schema_version to the version it was written with"
        ) from None
    if version < 0:
        raise SchemaVersionError(f"journal {where} has a negative schema version ({version}): restore it from a backup")
    return version


def erased_message(ns_id: int, known: Namespace | None) -> str:
    """The message of :class:`SessionErasedError`, naming the session when this process knows it."""
    who = (f"session {known.session_id!r} (user {known.user_id!r}, agent {known.agent_id!r}, namespace {ns_id})"
           if known is not None else f"the session with namespace id {ns_id}")
    return (f"{who} was erased (forget or delete through another handle or process) while this handle was open; "
            "its id is never reused: resolve the session again with namespace_id() to start it afresh")


def check_claim(limit: int, owner: str, lease_s: float) -> None:
    """Validate the arguments of ``claim_outbox`` (shared by the backends)."""
    if not isinstance(owner, str) or not owner:
        raise JournalError(f"owner must be a non-empty string naming the claimer; got {owner!r:.80}")
    if not lease_s > 0:
        raise JournalError(f"lease_s ({lease_s!r}) must be positive: the seconds a claim is held before it expires")
    if limit < 0:
        raise JournalError(f"limit ({limit}) must not be negative")


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
class SummaryVersion:
    """One saved rolling summary of a session (schema v7), kept so an inspector can show how
    it grew and an erasure can re-fold from the newest version that never saw the erased turns.

    ``version`` is the session's ``summary_version`` when it was saved (grows, never reused;
    not contiguous: a clear or an erasure also moves it); ``cursor`` is the last message id it
    folded in.
    """

    version: int
    text: str
    tokens: int
    cursor: int
    created_at: float


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
    # The semantic tier (schema v5): a memory with a ``key`` ("home_city") is the user's current
    # value for it until a newer one supersedes it; ``valid_to`` is then set (history is kept).
    # ``created_at`` is when it became valid.
    key: str | None = None
    valid_to: float | None = None

    @property
    def current(self) -> bool:
        """False once a newer memory superseded this one."""
        return self.valid_to is None


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
    key: str | None = None


@dataclass(frozen=True, slots=True)
class KeywordHit:
    """One keyword match: the record, its rank (1 is best) and the engine's relevance score (higher is better)."""

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
    # Who holds the item's lease ("" for an item read by the unclaimed ``outbox()``).
    owner: str = ""


Versions = tuple[int, int, int]  # (largest record id ever inserted, records deleted, texts edited)

# What a namespace holds, as a ScopeListing reads it (a bit each, ``ScopeListing.holds``). A read that
# leaves turns out probes only the namespaces holding what it asks for: a user's 10,000 sessions may each
# hold an extracted fact, and still only a handful a keyed memory, a skill or a pinned record.
HOLDS_MEMORY = 1  # a record that is not a turn
HOLDS_PINNED = 2  # a pinned record
HOLDS_KEYED = 4  # a record with a key (the semantic tier's keyed memories)
HOLDS_SKILL = 8  # a skill: context() reads the user's skills on every call
SKILL_KIND = "skill"


def _holding(holds: Mapping[int, int], bits: int) -> tuple[int, ...]:
    """The namespaces of ``holds`` holding any of ``bits``, in id order."""
    return tuple(sorted(n for n, h in holds.items() if h & bits))


@dataclass(frozen=True, eq=False)
class ScopeListing:
    """A scope's namespaces as one read saw them, with their version counters (``Journal.scope_versions``).

    ``ids_by_name`` maps each namespace to its id. ``holds`` maps each namespace holding something beyond
    unpinned turns to what it holds (the ``HOLDS_*`` bits); ``memories`` (a record that is not a turn, or
    a pinned one), ``pinned``, ``keyed`` and ``skills`` are its namespaces by bit, in id order: all that
    a read of the scope's memories (kinds without ``"turn"``), its pinned records, its keyed ones or its
    skills has to probe. ``generation`` names this listing; when it was made from an earlier one by
    reading only the namespaces that gained records, ``base`` is that one's generation and ``changed``
    those namespaces, so an in-process index synced to ``base`` looks at ``changed`` alone (``base`` is 0
    otherwise). A listing is never modified: a newer read makes a new one.
    """

    ids: tuple[int, ...]  # in id order
    versions: Mapping[int, Versions]
    stamp: tuple[int, ...]  # the aggregate read that tells whether the scope changed since
    generation: int
    key: frozenset[int]  # the ids as a set
    ids_by_name: Mapping[Namespace, int]
    holds: Mapping[int, int] = field(default_factory=dict)  # only the namespaces holding something
    memories: tuple[int, ...] = ()
    pinned: tuple[int, ...] = ()
    keyed: tuple[int, ...] = ()
    skills: tuple[int, ...] = ()
    newest: int = 0  # the largest ``last_record_id`` of the versions: where a read of grown namespaces starts
    base: int = 0
    changed: frozenset[int] = frozenset()

    @classmethod
    def read(cls, rows: Sequence[tuple[int, Namespace, Versions, int]], stamp: tuple[int, ...],
             generation: int) -> ScopeListing:
        """A listing of every row read (in id order); a row's last field is what it holds (``HOLDS_*``)."""
        ids = tuple(n for n, _, _, _ in rows)
        return cls(ids, {n: v for n, _, v, _ in rows}, stamp, generation, frozenset(ids),
                   {ns: n for n, ns, _, _ in rows}, newest=max((v[0] for _, _, v, _ in rows), default=0),
                   **_by_bit({n: h for n, _, _, h in rows if h}))

    def grown(self, versions: Mapping[int, Versions], stamp: tuple[int, ...], generation: int,
              changed: Mapping[int, int]) -> ScopeListing:
        """This listing with newer counters for the same namespaces, ``changed`` of them grown (each
        with what it holds now; the others' stand)."""
        newest = max([self.newest, *(versions[n][0] for n in changed)])
        held = {} if all(self.holds.get(n, 0) == h for n, h in changed.items()) else _by_bit(
            {n: h for n, h in {**self.holds, **changed}.items() if h})  # the usual turn changes nothing held
        return replace(self, versions=versions, stamp=stamp, generation=generation, newest=newest,
                       base=self.generation, changed=frozenset(changed), **held)


def _by_bit(holds: Mapping[int, int]) -> dict[str, Any]:
    """``ScopeListing``'s fields that ``holds`` determines."""
    return {"holds": holds, "memories": _holding(holds, HOLDS_MEMORY | HOLDS_PINNED),
            "pinned": _holding(holds, HOLDS_PINNED), "keyed": _holding(holds, HOLDS_KEYED),
            "skills": _holding(holds, HOLDS_SKILL)}


@dataclass(frozen=True)
class Scope:
    """Which namespaces a query may see: one session, a user's sessions, or an agent's.

    A session without a user id is private: its "user" and "agent" scopes narrow to the
    session itself (anonymous sessions share the user ``""`` but never each other's data).
    """

    kind: str  # "session" | "user" | "agent"
    namespace: Namespace

    @property
    def effective_kind(self) -> str:
        """The kind actually applied: "session" for every scope of an anonymous session."""
        return "session" if self.namespace.anonymous else self.kind

    def matches(self, ns: Namespace) -> bool:
        """Whether this scope may see ``ns``."""
        own = self.namespace
        kind = self.effective_kind
        if kind == "session":
            return ns == own
        if kind == "user":
            return ns.user_id == own.user_id
        return ns.agent_id == own.agent_id and ns.user_id == own.user_id


class WriteTxn(Protocol):
    """Operations inside one serialized write transaction of one session."""

    ns_id: int

    def state(self) -> SessionState:
        """The session's cursors, summary and failure state."""
        ...

    def insert_messages(self, messages: Sequence[Message], tokens: Sequence[int], tokens_key: str) -> list[Message]:
        """Append messages (with their ``key``, unique per session when set); returns them with ids."""
        ...

    def messages_by_key(self, keys: Sequence[str]) -> dict[str, Message]:
        """The messages of this session stored under these idempotency keys (absent keys are left out)."""
        ...

    def window_entries(self, start: int) -> list[WindowEntry]:
        """Id, role and token count of the session's messages from id ``start`` on, in id order."""
        ...

    def messages_between(self, after: int, before: int) -> list[Message]:
        """The session's messages with ``after`` < id < ``before``, in id order."""
        ...

    def open_tool_calls(self, since: int) -> set[str]:
        """Ids of the tool calls that the session's messages from id ``since`` on asked for."""
        ...

    def set_window_start(self, window_start: int) -> None:
        """Move the start of the window: messages before it wait for the summary."""
        ...

    def set_summary(self, summary: str, tokens: int, cursor: int, history: int = DEFAULT_SUMMARY_HISTORY) -> None:
        """Save the current summary and, when ``history`` > 0, keep it as a version: the newest
        ``history`` versions of the session are kept, older ones deleted (0 keeps none)."""
        ...

    def set_failure(self, error: str | None, failures: int, retry_at: float) -> None:
        """Record the summarizer's last error (``None`` clears it), its failure count and when to retry."""
        ...

    def insert_records(self, records: Sequence[NewRecord]) -> list[int]:
        """Insert recall records of this session and queue their upserts; their ids."""
        ...

    def update_tokens(self, ids_tokens: Sequence[tuple[int, int]], tokens_key: str) -> None:
        """Store recounted token counts ``(message id, tokens)`` made by the counter ``tokens_key``."""
        ...

    def current_memories(self, ns_ids: Sequence[int], unkeyed: Sequence[int] | None = None) -> list[Record]:
        """Memories (every kind but "turn") of these namespaces that nothing superseded, by id.

        ``unkeyed`` narrows the read to what planning new memories needs
        (:func:`~langmem_tiers.semantic.supersede.plan_memories`): every keyed memory (a user holds one
        current memory per key, so they stay few however long the history grows) and, of the unkeyed
        ones, only those with these record ids (the candidates' keyword matches, found by a search of
        these namespaces: the ids are not checked against them again). ``None``: all of them.
        """
        ...

    def supersede(self, record_ids: Sequence[int], valid_to: float) -> None:
        """Mark records as superseded at ``valid_to`` (kept, never deleted: history)."""
        ...

    def merge_memory(self, record_id: int, importance: float, message_ids: tuple[int, ...]) -> None:
        """A memory said again: raise its importance and extend its provenance (no duplicate)."""
        ...


class ReadTxn(Protocol):
    """Reads from one consistent snapshot."""

    def state(self, ns_id: int) -> SessionState:
        """The session's cursors and ``version`` (one indexed read); ``SessionState()`` for an erased id."""
        ...

    def window_messages(self, ns_id: int, start: int) -> list[tuple[Message, int, str]]:
        """The session's messages from id ``start`` on, each with its cached token count and counter key."""
        ...

    def count_between(self, ns_id: int, after: int, before: int) -> int:
        """How many messages of the session have ``after`` < id < ``before``."""
        ...


class Journal(Protocol):
    """A durable store of sessions, messages, summary state, recall records and the index outbox.

    What the core calls and nothing more. The SQL backends offer a few more methods for tools
    and tests (``messages_by_id``, ``outbox`` without a claim, ``integrity_check``,
    ``ReadTxn.last_message_id``); code that needs one holds the concrete journal.
    """

    url: str

    def namespace_id(self, ns: Namespace, create: bool = True) -> int | None:
        """The namespace's id; created (with its session state) when missing unless ``create`` is False."""
        ...

    def write(self, ns_id: int) -> AbstractContextManager[WriteTxn]:
        """A serialized write transaction of one session.

        Raises:
            SessionErasedError: the namespace was erased (ids are never reused).
        """
        ...

    def read(self) -> AbstractContextManager[ReadTxn]:
        """Reads from one consistent snapshot."""
        ...

    def iter_messages(self, ns_id: int, after: int = 0, batch: int = 500) -> Iterator[Message]:
        """The session's messages after ``after``, in id order, read ``batch`` at a time."""
        ...

    def count_messages(self, ns_id: int | None = None) -> int:
        """How many messages the session holds (the whole journal when ``ns_id`` is None)."""
        ...

    def outbox_error(self, ns_ids: Sequence[int] | None = None) -> str | None:
        """One last indexing error still pending, of these namespaces only when given."""
        ...

    def namespaces(self, scope: Scope | None = None) -> list[tuple[int, Namespace]]:
        """Namespaces a scope may see (every one without a scope), with their ids."""
        ...

    def scope_listing(self, scope: Scope) -> ScopeListing:
        """A scope's namespaces with their :meth:`scope_versions` counters (see :class:`ScopeListing`).

        A journal may return the listing it gave before, the same object, when one aggregate read
        shows nothing in the scope changed since: a request that recalls over a user's 10,000
        sessions then neither reads nor builds 10,000 rows (nor makes the garbage collector walk them).
        """
        ...

    def clear_session(self, ns_id: int, keep_memories: bool = False) -> list[int]:
        """Delete a session's messages, summary and records (memories kept when asked); the record ids removed."""
        ...

    def erase_messages(self, ns_id: int, message_ids: Sequence[int]) -> list[int]:
        """Erase messages of a session, the records made from them, and every summary that covered them.

        Summary versions whose cursor reaches the first erased id are deleted; the current summary,
        when it covered them, falls back to the newest remaining version (or to none), so the
        summarizer re-folds only the turns after that version's cursor.
        """
        ...

    def summary_history(self, ns_id: int, limit: int = DEFAULT_SUMMARY_HISTORY) -> list[SummaryVersion]:
        """The session's saved summary versions, newest first (at most ``limit``)."""
        ...

    def delete_namespaces(self, ns_ids: Sequence[int]) -> list[int]:
        """Delete namespaces with everything they hold; the record ids removed."""
        ...

    # --- recall records, keyword index and outbox ---

    def records(self, ids: Sequence[int]) -> list[Record]:
        """Records by id, in id order (ids that do not exist are left out)."""
        ...

    def beside(self, record_ids: Sequence[int], kind: str, per_side: int
               ) -> dict[int, tuple[list[Record], list[Record]]]:
        """For each of ``record_ids``: up to ``per_side`` records of ``kind`` of the same session just
        before it and just after it, nearest first (the turns around a recalled turn). One statement;
        an id that does not exist maps to two empty lists."""
        ...

    def newest_citations(self, ns_id: int, limit: int) -> list[tuple[int, tuple[int, ...]]]:
        """``(record id, ids of the messages it was made from)`` of the session's ``limit`` newest
        records, newest first. A turn becomes a record when it completes, so the records of the
        window's messages are among these (recall leaves them out before reading any record)."""
        ...

    def count_records(self, ns_id: int) -> int:
        """How many recall records the session has."""
        ...

    def record_stats(self, ns_id: int) -> tuple[int, int]:
        """How many records a session has, and its largest record id (0 when none)."""
        ...

    def record_ids(self, ns_id: int, after: int = 0) -> list[int]:
        """Ids of the session's records after ``after``, in id order."""
        ...

    def record_ids_many(self, ns_ids: Sequence[int], after: Mapping[int, int] | None = None) -> dict[int, list[int]]:
        """Per namespace id: ids of its records above its floor ``after[ns_id]`` (0 when absent), in id order.

        One query for every namespace; a namespace without such records maps to an empty list.
        """
        ...

    def scope_versions(self, ns_ids: Sequence[int]) -> dict[int, tuple[int, int, int]]:
        """Per namespace id: (largest record id ever inserted there, records deleted so far,
        record texts edited so far).

        Kept by triggers in the namespaces row, so the read costs one indexed lookup per namespace whatever the
        history. Namespaces that do not exist are absent from the result.
        """
        ...

    def scoped_records(self, ns_ids: Sequence[int], kinds: Sequence[str] | None = None,
                       pinned_only: bool = False, unkeyed: Sequence[int] | None = None) -> list[Record]:
        """Records of these namespaces (of these kinds, pinned ones only when asked), in id order.

        ``unkeyed`` (as :meth:`WriteTxn.current_memories`'s): the keyed records (of these kinds; current
        and superseded: a user holds few keys) and, of the unkeyed ones, only those with these ids, which
        a search of the caller's scope found (so ``ns_ids`` may name only the sessions holding a keyed
        record: ``ScopeListing.keyed``); ``pinned_only`` does not apply then. ``None``: all of them.
        """
        ...

    def keyword_search(self, query: str, ns_ids: Sequence[int], k: int, kinds: Sequence[str] | None = None,
                       versions: Mapping[int, Versions] | None = None) -> list[KeywordHit]:
        """The ``k`` best keyword matches for any word of ``query`` among these namespaces' records, best first.

        ``versions``: the namespaces' versions as the caller's listing read them in this request
        (``ScopeListing.versions``); an index this process holds for the scope is brought up to them
        instead of reading them again (PostgreSQL's held postings). Hits are ids: records are read from
        the journal, so one deleted since the listing read is never returned by a caller that loads them."""
        ...

    def add_records(self, ns_id: int, records: Sequence[NewRecord]) -> list[int]:
        """Insert records of one session; their ids. Raises SessionErasedError when it was erased."""
        ...

    def delete_records(self, ids: Sequence[int]) -> int:
        """Delete records (their links too) and queue their deletes from the vector store; how many existed."""
        ...

    def update_record(self, record_id: int, *, text: str | None = None, importance: float | None = None,
                      message_ids: tuple[int, ...] | None = None,
                      metadata: Mapping[str, Any] | None = None, pinned: bool | None = None) -> None:
        """Change the given fields of a record (``None`` leaves one as is), bump its session's
        version and queue its upsert (the vector store's metadata follows)."""
        ...

    def claim_outbox(self, limit: int, *, owner: str, lease_s: float, due_only: bool = True) -> list[OutboxItem]:
        """Claim up to ``limit`` pending items for ``lease_s`` seconds; no other claimer gets them meanwhile.

        A record queued again while claimed keeps the lease (with a new ``seq``), so its newer
        change waits for the holder to finish: a delete never overtakes an upsert in flight.
        """
        ...

    def outbox_done(self, items: Sequence[OutboxItem]) -> None:
        """Drop items whose ``seq`` still matches; release the lease of the others (queued again meanwhile)."""
        ...

    def outbox_failed(self, items: Sequence[OutboxItem], error: str) -> None:
        """Per item: attempts + 1, retry after a growing delay, lease released (stale items: lease released only)."""
        ...

    def outbox_count(self, ns_ids: Sequence[int] | None = None) -> int:
        """Pending items, of these namespaces only when given."""
        ...

    def mark_vectors(self) -> bool:
        """Record, once, that this journal's records are indexed in a vector store: handles opened without
        one then leave the outbox to handles with one (``RecallIndex.index_flow``). True when this call
        recorded it (the first handle with vectors); False on a read-only journal."""
        ...

    def has_vectors(self) -> bool:
        """Whether a handle with a vector store ever opened this journal (:meth:`mark_vectors`)."""
        ...

    def pending_records(self, ns_ids: Sequence[int], limit: int) -> list[Record]:
        """Records of these namespaces whose upsert is still in the outbox (the newest ``limit``, by id)."""
        ...

    def requeue_all(self, *, keywords: bool = True) -> int:
        """Queue every record for upsert afresh (``reindex``), and rebuild the keyword index unless
        ``keywords=False``; the number of pending items."""
        ...

    def links(self, record_ids: Sequence[int]) -> list[tuple[int, int, str, float]]:
        """Links ``(a, b, relation, strength)`` that touch any of these records."""
        ...

    def add_link(self, a: int, b: int, relation: str, strength: float) -> None:
        """Link two records (a link already there takes the new strength)."""
        ...

    def compact(self) -> bool:
        """Make deleted data physically go where the engine allows; True when nothing blocked it.

        Called after ``forget``/``clear``. SQLite: FTS5 optimize and a truncating WAL checkpoint
        (``secure_delete`` is always on). PostgreSQL: VACUUM of the tables.
        """
        ...

    def residue(self, needles: Sequence[str]) -> dict[str, int]:
        """How many copies of each needle the journal still holds (see each backend for what is scanned)."""
        ...

    def close(self) -> None:
        """Release the connections; the journal is unusable after."""
        ...


def provenance_after_erasure(
    rows: Iterable[tuple[int, str, Sequence[int]]], erased: Iterable[int],
) -> tuple[list[int], list[tuple[int, tuple[int, ...]]]]:
    """What erasing messages does to the records made from them (pure; both backends apply it).

    ``rows`` are ``(record id, kind, message ids)`` of records sharing a message with
    ``erased``. A turn goes with its messages. A memory goes when it came *only* from erased
    messages; one also said in messages that remain keeps those as its provenance. Returns
    the ids to delete and the ``(id, remaining message ids)`` to update.

    Example:
        >>> provenance_after_erasure([(1, "turn", [5, 6]), (2, "fact", [5]), (3, "fact", [5, 9])], [5, 6])
        ([1, 2], [(3, (9,))])
    """
    gone = set(erased)
    delete: list[int] = []
    keep: list[tuple[int, tuple[int, ...]]] = []
    for record_id, kind, message_ids in rows:
        remaining = tuple(m for m in message_ids if m not in gone)
        if kind == "turn" or not remaining:
            delete.append(record_id)
        else:
            keep.append((record_id, remaining))
    return delete, keep


def legacy_message_keys(rows: Iterable[tuple[int, int, str | None]]) -> list[tuple[str, int]]:
    """Idempotency keys for messages stored before keys existed: ``(key, message id)`` pairs.

    The LangChain adapter kept each message's LangChain id in ``metadata["langchain"]["id"]``
    and de-duplicated by scanning; it now passes the id as the key. Without this backfill, an
    agent thread restored from a checkpointer after the upgrade would be journaled a second
    time. The key is the id, or ``"sha256:" + hex`` of an id longer than the key limit (as the
    adapter computes it); the first message of a namespace with a given key keeps it.

    Args:
        rows: ``(message id, namespace id, metadata JSON or None)``, in message id order.
    """
    import hashlib
    import json

    seen: set[tuple[int, str]] = set()
    out: list[tuple[str, int]] = []
    for message_id, ns_id, raw in rows:
        if not raw or '"langchain"' not in raw:
            continue
        try:
            lc = json.loads(raw).get("langchain")
        except ValueError:
            continue
        original = lc.get("id") if isinstance(lc, dict) else None
        if not isinstance(original, str) or not original:
            continue
        key = original if len(original) <= MAX_KEY_CHARS else \
            "sha256:" + hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()
        if (ns_id, key) not in seen:
            seen.add((ns_id, key))
            out.append((key, message_id))
    return out
