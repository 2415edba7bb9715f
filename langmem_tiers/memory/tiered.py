"""TieredMemory: the public face of the tier core.

Each public operation is written once as a flow (see :mod:`langmem_tiers.flow`) in the module of its
concern (:mod:`.writes`, :mod:`.summary_schedule`, :mod:`.context_flow`, :mod:`.reads`, :mod:`.typed`,
:mod:`.management`); the sync methods run it inline and the ``a``-prefixed methods run it under
asyncio. State lives in the journal, so several ``TieredMemory`` objects (in threads, processes or
hosts) on one journal see the same session.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langmem_tiers.config import MemoryConfig
from langmem_tiers.context import Context, WindowMessage
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.erasure import EraseReport
from langmem_tiers.errors import ConfigError, MemoryClosedError
from langmem_tiers.flow import Drivers, Flow
from langmem_tiers.journal.base import Journal, Namespace, SessionState, SummaryVersion
from langmem_tiers.keyring import KeyRing
from langmem_tiers.memory import context_flow, management, reads, summary_schedule, typed, writes
from langmem_tiers.memory.opening import describe_recall, open_backends
from langmem_tiers.memory.stats import Stats, session_stats
from langmem_tiers.memory.writes import MEMORY_KINDS
from langmem_tiers.memory_types import expiry
from langmem_tiers.memory_types.working import WorkingMemory
from langmem_tiers.messages import Message
from langmem_tiers.metrics import MemoryMetrics
from langmem_tiers.recall.engine import RecallIndex
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.redact import Redactor
from langmem_tiers.semantic.types import Fact
from langmem_tiers.summarizers.base import Summarizer
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer
from langmem_tiers.tokens import TiktokenCounter, TokenCounter

log = logging.getLogger(__name__)


class TieredMemory:
    """Durable, token-budgeted memory of one session.

    Example:
        >>> import tempfile
        >>> from langmem_tiers import TieredMemory, MemoryConfig
        >>> with TieredMemory.open(tempfile.mkdtemp(), session_id="s1", embedder=False) as memory:
        ...     _ = memory.add("user", "My name is Ada.")
        ...     [m.role for m in memory.context().messages]
        ['user']
    """

    def __init__(self, journal: Journal, namespace: Namespace, *, config: MemoryConfig | None = None,
                 counter: TokenCounter | None = None, summarizer: Summarizer | None = None,
                 recall: RecallIndex | None = None, redactor: Redactor | None = None,
                 owns_journal: bool = True, clock: Callable[[], float] | None = None,
                 metrics: MemoryMetrics | None = None, sweep: expiry.ExpirySweep | None = None) -> None:
        self.config = config or MemoryConfig()
        # When memories expire (unix seconds; tests inject a fake one): langmem_tiers.memory_types.expiry.
        self.clock: Callable[[], float] = clock or time.time
        self.metrics = metrics or MemoryMetrics(self.clock)
        self.working = WorkingMemory(self)
        self._sweep = sweep or expiry.ExpirySweep()
        self._outcome_lock = threading.Lock()
        self.journal = journal
        self.namespace = namespace
        self.counter = counter or TiktokenCounter.for_model(self.config.model, encoding=self.config.encoding)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.recall = recall
        self.redactor = redactor
        self._owns_journal = owns_journal
        self._drivers = Drivers(self.summarizer, recall.embedder if recall else None)
        self._summary_lock = threading.Lock()
        self._background = summary_schedule.BackgroundSummaries()
        self._recall_mode = describe_recall(recall)  # open() says why (stats().recall_mode)
        self._closed = False
        ns_id = journal.namespace_id(namespace)
        assert ns_id is not None
        self._ns_id = ns_id
        reads.recount_window(self)

    @classmethod
    def open(cls, path: str | Path, *, session_id: str, user_id: str | None = None, agent_id: str | None = None,
             config: MemoryConfig | None = None, summarizer: Summarizer | None = None,
             embedder: Embedder | bool | None = None, chroma: Any = None,
             counter: TokenCounter | None = None, redactor: Redactor | None = None,
             keyring: KeyRing | str | Path | bool | None = None) -> TieredMemory:
        """Open (or create) the memory of one session.

        Args:
            path: a folder for the embedded default (SQLite journal + Chroma, or vectors in SQLite
                with ``MemoryConfig(embedded_vectors="sqlite")``), or a ``postgresql://`` URL for a
                shared journal.
            session_id / user_id / agent_id: the namespace; recall never crosses it.
            summarizer: defaults to the offline :class:`ExtractiveSummarizer`.
            embedder: defaults to the local MiniLM model when installed; ``False``
                turns vector recall off (keyword recall still works). Which one a memory
                got is logged at open (INFO) and reported as ``stats().recall_mode``.
            chroma: a Chroma server URL (``"http://127.0.0.1:8000"``), a chromadb
                client, or a :class:`ChromaStore`; default: embedded under ``path``.
            redactor: applied to every text before it is persisted or indexed, e.g.
                :class:`langmem_tiers.redact.PIIRedactor` (e-mails, phones, card numbers).
            keyring: encrypt stored text with per-user keys that ``forget`` destroys: a
                :class:`~langmem_tiers.keyring.KeyRing`, a key folder, or ``True`` for a ``keys``
                folder under ``path`` (embedded default only). See ``docs/core/erasure.md``.
        """
        namespace = Namespace.of(session_id, user_id, agent_id)
        config = config or MemoryConfig()
        backends = open_backends(path, config=config, embedder=embedder, chroma=chroma, keyring=keyring)
        try:
            memory = cls(backends.journal, namespace, config=config, counter=counter, summarizer=summarizer,
                         recall=backends.recall, redactor=redactor)
        except BaseException:
            backends.journal.close()
            raise
        memory._recall_mode = backends.recall_mode
        return memory

    def for_session(self, session_id: str, *, user_id: str | None = None,
                    agent_id: str | None = None) -> TieredMemory:
        """Another session on the same journal, vector store and collaborators.

        No new connection is opened, so one process can serve many sessions (an app
        server, an agent with one session per thread). ``user_id`` and ``agent_id``
        default to this memory's. Closing the returned memory leaves the shared
        journal open; close the memory that opened it last.
        """
        namespace = Namespace.of(session_id, user_id if user_id is not None else self.namespace.user_id or None,
                                 agent_id if agent_id is not None else self.namespace.agent_id or None)
        other = TieredMemory(self.journal, namespace, config=self.config, counter=self.counter,
                             summarizer=self.summarizer, recall=self.recall, redactor=self.redactor,
                             owns_journal=False, clock=self.clock, metrics=self.metrics, sweep=self._sweep)
        other._recall_mode = self._recall_mode
        return other

    def for_namespace(self, namespace: Namespace) -> TieredMemory:
        """The session ``namespace`` on the same journal, vector store and collaborators.

        As :meth:`for_session`, but the namespace is taken whole: nothing defaults to this memory's
        user or agent, so a session without a user (``Namespace.of("s")``) can be reached from a
        memory that has one (an adapter that keeps its own sessions, e.g. LangGraph's ``TieredStore``).
        The new memory shares this one's journal, recall index, embedder, summarizer, redactor,
        token counter, config and metrics, and follows its :attr:`clock` (a clock set on this
        memory later is seen too). Closing it leaves the shared journal open.

        Raises:
            ConfigError: ``namespace`` is not a :class:`Namespace`.
        """
        if not isinstance(namespace, Namespace):
            raise ConfigError(f"namespace must be a Namespace, e.g. Namespace.of('s1', 'ada'); got "
                              f"{type(namespace).__name__}")
        other = TieredMemory(self.journal, namespace, config=self.config, counter=self.counter,
                             summarizer=self.summarizer, recall=self.recall, redactor=self.redactor,
                             owns_journal=False, clock=lambda: self.clock(), metrics=self.metrics,
                             sweep=self._sweep)
        other._recall_mode = self._recall_mode
        return other

    @property
    def location(self) -> str:
        """Where this memory's journal is, as :meth:`open` takes it: the folder of the embedded default,
        or the ``postgresql://`` URL **without its password**.

        The password is left out on purpose: ``location`` is what adapters serialise (LlamaIndex's
        ``TieredChatMemory.to_dict``), and those dicts are persisted. To reopen, libpq reads the
        password from ``PGPASSWORD`` or ``~/.pgpass``; or pass the full URL yourself. A memory built on
        a journal object whose location ``open`` cannot take (a non-default PostgreSQL schema, a custom
        journal) reports that journal's own ``url``.
        """
        return journal_location(self.journal.url)

    # --- writing --------------------------------------------------------------

    def add(self, role: str, content: Any = "", **fields: Any) -> Message:
        """Append one message durably (committed before this returns) and return it with its id.

        Keyword fields: ``name``, ``tool_calls``, ``tool_call_id``, ``metadata``, ``created_at``, and
        ``key``: an idempotency key (e.g. the framework's message id); a message whose key this session
        already holds is not stored again, and the stored one is returned.
        """
        return self.add_messages([writes.build(self, role, content, fields)])[0]

    async def aadd(self, role: str, content: Any = "", **fields: Any) -> Message:
        """Async :meth:`add`."""
        return (await self.aadd_messages([writes.build(self, role, content, fields)]))[0]

    def add_messages(self, messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
        """Append messages atomically: all are stored, or none."""
        return self._drivers.run_sync(self._add_flow(writes.validate(self, messages)))

    async def aadd_messages(self, messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
        """Async :meth:`add_messages`."""
        return await self._drivers.run_async(self._add_flow(writes.validate(self, messages)))

    def _add_flow(self, messages: list[Message]) -> Flow[list[Message]]:
        """Append, then index, sweep and summarize what the append evicted. The messages are committed
        once the append returns: nothing after it may report them as failed (those steps log instead)."""
        appended = yield from writes.append_flow(self, messages)
        if appended.recallable:
            # Only then: a user's message that opens a turn writes nothing to embed, and an indexer woken
            # for nothing would claim the outbox beside the context() that usually follows it.
            yield from writes.indexed_flow(self)
        yield from writes.sweep_flow(self)
        if appended.evicted:
            try:
                yield from summary_schedule.after_eviction_flow(self)
            except Exception:
                log.exception("summary after eviction failed; the evicted turns stay pending")
        return appended.stored

    def flush(self) -> None:
        """Wait for background summaries, then summarize and index everything pending now.

        An indexing failure (embedder or Chroma down) does not raise: the rows stay in
        the outbox, ``stats()`` shows ``index_pending`` and ``last_index_error``, and the
        next search or flush retries them.

        Raises:
            SummarizerError: the summarizer failed; the turns stay pending and are retried later.
        """
        self._drivers.run_sync(summary_schedule.flush_flow(self))

    async def aflush(self) -> None:
        """Async :meth:`flush`."""
        await self._drivers.run_async(summary_schedule.flush_flow(self))

    def index_soon(self) -> None:
        """Index records written straight to :attr:`journal` (e.g. by ``TieredStore``) as :meth:`add`
        indexes its own: the background indexer embeds them when ``background_index`` is on, otherwise
        (or keyword-only recall) they are indexed now. Unlike :meth:`flush`, never waits for vectors."""
        self._check_open()
        self._drivers.run_sync(writes.indexed_flow(self))

    # --- reading --------------------------------------------------------------

    def context(self, query: str | None = None, budget: int | None = None) -> Context:
        """The budgeted context: memory message (pinned, profile, summary, recall) + window turns.

        Recall is keyed on ``query``; without one, on the newest user message in the window.
        It reaches the user's other sessions by ``config.recall_scope``; ``budget`` overrides
        ``config.context_tokens`` for this call.
        """
        self._check_open()
        return self._drivers.run_sync(context_flow.context_flow(self, query, budget))

    async def acontext(self, query: str | None = None, budget: int | None = None) -> Context:
        """Async :meth:`context`."""
        self._check_open()
        return await self._drivers.run_async(context_flow.context_flow(self, query, budget))

    def messages(self) -> list[Message]:
        """Every message of this session, oldest first (the whole journal, not the window)."""
        self._check_open()
        return list(self.journal.iter_messages(self._ns_id))

    def iter_messages(self) -> Iterator[Message]:
        """Every message of this session, oldest first, read lazily in batches (:meth:`messages` as a stream)."""
        self._check_open()
        return self.journal.iter_messages(self._ns_id)

    def window(self) -> list[Message]:
        """The messages currently in the window."""
        return [w.message for w in self._snapshot()[1]]

    def version(self) -> int:
        """A stamp that changes with every write to this session (by any handle or process).

        One indexed read: adapters compare it to decide whether a cached view is still current.
        """
        self._check_open()
        with self.journal.read() as rx:
            return rx.state(self._ns_id).version

    @property
    def summary(self) -> str:
        """The session's current rolling summary ("" before the first fold)."""
        with self.journal.read() as rx:
            return rx.state(self._ns_id).summary

    def summary_history(self, limit: int | None = None) -> list[SummaryVersion]:
        """The saved versions of this session's rolling summary, newest first (the current one
        first while it is kept); at most ``limit``, every kept one by default.

        The journal keeps the newest ``config.summary_history`` versions. Erasing turns
        (``forget(turn_id)``) deletes every version that folded them; ``clear()`` and
        ``forget("session" | "user" | "agent")`` delete the history with the session.
        """
        return self._drivers.run_sync(reads.summary_history_flow(self, limit))

    async def asummary_history(self, limit: int | None = None) -> list[SummaryVersion]:
        """Async :meth:`summary_history`."""
        return await self._drivers.run_async(reads.summary_history_flow(self, limit))

    def stats(self) -> Stats:
        """A snapshot of this session's tiers (see :class:`Stats`)."""
        return session_stats(self)

    def messages_page(self, after: int = 0, limit: int = 100) -> list[Message]:
        """Up to ``limit`` messages of this session with ids greater than ``after``, oldest first.

        One indexed read whatever the session's size: a viewer pages a 100k-message session
        with the last id of one page as the ``after`` of the next. Read-only.
        """
        self._check_open()
        reads.check_page(after, limit)
        return list(itertools.islice(self.journal.iter_messages(self._ns_id, after, batch=limit), limit))

    def sessions(self, scope: str | None = "user") -> list[Namespace]:
        """The sessions stored in ``scope`` ("session", "user" or "agent", as in :meth:`search`),
        or in the whole deployment with ``None`` (an operator's view, e.g. the inspector). Read-only."""
        self._check_open()
        return reads.sessions(self, scope)

    # --- recall ---------------------------------------------------------------

    def search(self, query: str, k: int = 5, *, scope: str = "session", kinds: Sequence[str] | None = None,
               where: Mapping[str, Any] | None = None, since: float | None = None,
               until: float | None = None, expand: bool = False) -> list[RecallHit]:
        """Hybrid keyword + vector recall over evicted turns and memories, filtered by namespace.

        Args:
            scope: ``"session"`` (this session), ``"user"`` (all sessions of this user) or
                ``"agent"`` (this user's sessions with this agent).
            kinds: only these record kinds (``"turn"``, ``"fact"``, ...).
            where: metadata equality filters (``tags`` matches one tag).
            since / until: unix-seconds bounds on the record's time.
            expand: also return records linked to the hits (one hop).
        """
        return self._drivers.run_sync(reads.search_flow(self, query, k, scope, kinds, where, since, until, expand))

    async def asearch(self, query: str, k: int = 5, *, scope: str = "session", kinds: Sequence[str] | None = None,
                      where: Mapping[str, Any] | None = None, since: float | None = None,
                      until: float | None = None, expand: bool = False) -> list[RecallHit]:
        """Async :meth:`search`."""
        return await self._drivers.run_async(
            reads.search_flow(self, query, k, scope, kinds, where, since, until, expand))

    def remember(self, text: str, kind: str = "fact", *, importance: float = 0.5, pinned: bool = False,
                 tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None, key: str | None = None,
                 ttl: float | None = None, triggers: Sequence[str] | None = None,
                 category: str | None = None) -> int:
        """Store an explicit memory (fact, preference, event, skill, ...) and return its record id.

        With a ``key`` (lowercase snake_case, e.g. ``"home_city"``; scoped to the user, or to this
        session without a user id) the memory supersedes the user's current memory with that key,
        in the same transaction: the old one gets ``valid_to`` and stays in :meth:`facts` history.

        Typed fields (:mod:`langmem_tiers.memory_types`): ``ttl`` seconds until the memory expires;
        ``triggers`` (skills only) the phrases that say when it applies (:meth:`skills_for`);
        ``category`` (e.g. of a preference: ``facts(kinds=["preference"], where={"category": "food"})``).
        """
        record = typed.remembered(self, text, kind, importance, pinned, tags, metadata, key, ttl, triggers, category)
        return self._drivers.run_sync(writes.remember_flow(self, record))

    async def aremember(self, text: str, kind: str = "fact", **options: Any) -> int:
        """Async :meth:`remember`."""
        # remember()'s own signature checks the options and fills their defaults (one source of both).
        call = inspect.signature(TieredMemory.remember).bind(self, text, kind, **options)
        call.apply_defaults()
        record = typed.remembered(self, **{k: v for k, v in call.arguments.items() if k != "self"})
        return await self._drivers.run_async(writes.remember_flow(self, record))

    def facts(self, include_superseded: bool = False, kinds: Sequence[str] | None = None, *,
              where: Mapping[str, Any] | None = None, since: float | None = None,
              until: float | None = None) -> list[Fact]:
        """The user's memories (every session of the user; this session alone without a user id),
        oldest first: ``remember()``ed and extracted ones, not the conversation turns, the working
        state (:attr:`working`) or expired memories.

        Args:
            include_superseded: also the memories a newer one with the same key replaced
                (``valid_to`` set): the history.
            kinds: only these kinds (``"fact"``, ``"preference"``, ...).
            where: metadata equality filters, as in :meth:`search` (``{"category": "food"}``,
                ``{"event_type": "deploy"}``).
            since / until: unix-seconds bounds on the memory's time (an event's: when it happened).
        """
        return self._drivers.run_sync(reads.facts_flow(self, include_superseded, kinds, where, since, until))

    async def afacts(self, include_superseded: bool = False, kinds: Sequence[str] | None = None, *,
                     where: Mapping[str, Any] | None = None, since: float | None = None,
                     until: float | None = None) -> list[Fact]:
        """Async :meth:`facts`."""
        return await self._drivers.run_async(reads.facts_flow(self, include_superseded, kinds, where, since, until))

    # --- typed memories (langmem_tiers.memory_types) ----------------------------

    def expire(self, record_id: int, ttl: float | None) -> bool:
        """Give a memory of this user an expiry ``ttl`` seconds from now (by :attr:`clock`), or
        none with ``ttl=None``; returns False when no such live memory exists. Turns do not expire:
        erase one with :meth:`forget`."""
        return self._drivers.run_sync(typed.expire_flow(self, record_id, ttl))

    async def aexpire(self, record_id: int, ttl: float | None) -> bool:
        """Async :meth:`expire`."""
        return await self._drivers.run_async(typed.expire_flow(self, record_id, ttl))

    def skills_for(self, situation: str, k: int = 3) -> list[RecallHit]:
        """The user's skills that apply to ``situation``, best first, as recall hits (``parts`` holds
        ``trigger``, ``relevance``, ``success`` and ``total``: the formula is in
        :mod:`langmem_tiers.memory_types.skills`)."""
        return self._drivers.run_sync(typed.skills_flow(self, situation, k))

    async def askills_for(self, situation: str, k: int = 3) -> list[RecallHit]:
        """Async :meth:`skills_for`."""
        return await self._drivers.run_async(typed.skills_flow(self, situation, k))

    def record_outcome(self, record_id: int, success: bool) -> None:
        """Count one use of a skill of this user, and whether it worked (feeds :meth:`skills_for`).

        Raises:
            ConfigError: no such skill of this user, or ``success`` is not a bool.
        """
        self._drivers.run_sync(typed.outcome_flow(self, record_id, success))

    async def arecord_outcome(self, record_id: int, success: bool) -> None:
        """Async :meth:`record_outcome`."""
        await self._drivers.run_async(typed.outcome_flow(self, record_id, success))

    def record_event(self, event_type: str, description: str, outcome: str | None = None,
                     at: float | None = None, *, importance: float = 0.5, ttl: float | None = None) -> int:
        """Store an event (kind ``"event"``) that happened ``at`` (unix seconds, default now); returns its id.

        Find events with ``search(q, kinds=["event"], where={"event_type": ...}, since=..., until=...)``
        or list them with ``facts(kinds=["event"], since=...)`` (:mod:`langmem_tiers.memory_types.events`).
        """
        record = typed.event(self, event_type, description, outcome, at, importance, ttl)
        return self._drivers.run_sync(writes.remember_flow(self, record))

    async def arecord_event(self, event_type: str, description: str, outcome: str | None = None,
                            at: float | None = None, *, importance: float = 0.5, ttl: float | None = None) -> int:
        """Async :meth:`record_event`."""
        record = typed.event(self, event_type, description, outcome, at, importance, ttl)
        return await self._drivers.run_async(writes.remember_flow(self, record))

    def pin(self, record_id: int, pinned: bool = True) -> bool:
        """Pin a record of this user (``pinned=False`` unpins it); returns whether the flag changed.

        A pinned memory is sent in every ``context()`` of the user's sessions (first to go when
        the budget is short, after recall, turns and the summary), never decays in recall ranking
        and is never removed by ``cleanup()`` for age or weakness. The vector store's copy is
        queued for update like any other change.

        Raises:
            ConfigError: ``record_id`` is not a live record of this user (another user's or
                another anonymous session's records are refused alike), or ``pinned`` is not a bool.
        """
        return self._drivers.run_sync(management.pin_flow(self, record_id, pinned))

    async def apin(self, record_id: int, pinned: bool = True) -> bool:
        """Async :meth:`pin`."""
        return await self._drivers.run_async(management.pin_flow(self, record_id, pinned))

    # --- management -----------------------------------------------------------

    def reindex(self) -> int:
        """Rebuild the keyword index and every vector from the journal; returns records queued."""
        return self._drivers.run_sync(management.reindex_flow(self))

    async def areindex(self) -> int:
        """Async :meth:`reindex`."""
        return await self._drivers.run_async(management.reindex_flow(self))

    def forget(self, target: int | str, *, physical: bool = False) -> int:
        """Erase a record by id, or every record and message of a scope.

        ``forget(record_id)`` erases one memory, or a turn with its messages: they leave
        ``messages()``, the window, recall, and the summary: every summary version that folded
        them is deleted, and the summary falls back to the newest version saved before them
        (see ``config.summary_history``) or to none; the summarizer then re-folds only the
        turns after that version, not the whole evicted conversation. ``forget("session")``
        erases this session, ``forget("user")`` every session of this user and
        ``forget("agent")`` this user's sessions with this agent, across journal, keyword
        index and vectors. ``physical=True`` also makes the
        engines rewrite their files so the deleted bytes are gone (see
        :mod:`langmem_tiers.erasure`; check with :meth:`erase_report`). Returns how many
        records were removed.
        """
        return self._drivers.run_sync(management.forget_flow(self, target, physical))

    async def aforget(self, target: int | str, *, physical: bool = False) -> int:
        """Async :meth:`forget`."""
        return await self._drivers.run_async(management.forget_flow(self, target, physical))

    def compact(self) -> None:
        """Make deleted data physically gone from the journal and vector store files, where the engine
        allows (see :mod:`langmem_tiers.erasure`). Costly on large stores: run it after erasures."""
        self._drivers.run_sync(management.compact_flow(self))

    async def acompact(self) -> None:
        """Async :meth:`compact`."""
        await self._drivers.run_async(management.compact_flow(self))

    def erase_report(self, texts: Sequence[str]) -> EraseReport:
        """Scan each store's files for raw copies of ``texts`` (what you erased) and report per store,
        with whether this user's key is destroyed (encrypted journals: see :mod:`langmem_tiers.erasure`)."""
        return management.erase_report_of(self, texts)

    def cleanup(self, *, max_age: float | None = None, min_importance: float | None = None,
                kinds: Sequence[str] | None = None, dry_run: bool = True, expired: bool = True) -> list[RecallHit]:
        """Find (and unless ``dry_run``, erase) this user's records older than ``max_age`` seconds
        or whose decayed importance is below ``min_importance``, and (``expired``) the memories whose
        expiry passed by :attr:`clock` (pinned ones too: an expiry is explicit) with working rows a
        newer value superseded. Otherwise pinned records are never removed."""
        return self._drivers.run_sync(
            management.cleanup_flow(self, max_age, min_importance, kinds, dry_run, expired))

    async def acleanup(self, *, max_age: float | None = None, min_importance: float | None = None,
                       kinds: Sequence[str] | None = None, dry_run: bool = True,
                       expired: bool = True) -> list[RecallHit]:
        """Async :meth:`cleanup`."""
        return await self._drivers.run_async(
            management.cleanup_flow(self, max_age, min_importance, kinds, dry_run, expired))

    def consolidate(self, threshold: float = 0.8, kinds: Sequence[str] = MEMORY_KINDS) -> int:
        """Merge near-duplicate explicit memories of this user (word overlap >= ``threshold``).

        The kept record takes the highest importance, the union of tags and the merged
        records' provenance (``metadata['merged_from']``). Returns how many were merged away.
        """
        return self._drivers.run_sync(management.consolidate_flow(self, threshold, kinds))

    async def aconsolidate(self, threshold: float = 0.8, kinds: Sequence[str] = MEMORY_KINDS) -> int:
        """Async :meth:`consolidate`."""
        return await self._drivers.run_async(management.consolidate_flow(self, threshold, kinds))

    def link(self, a: int, b: int, relation: str = "related", strength: float = 1.0) -> None:
        """Associate two records; ``search(..., expand=True)`` then also returns linked records."""
        self._drivers.run_sync(management.link_flow(self, a, b, relation, strength))

    async def alink(self, a: int, b: int, relation: str = "related", strength: float = 1.0) -> None:
        """Async :meth:`link`."""
        await self._drivers.run_async(management.link_flow(self, a, b, relation, strength))

    # --- lifecycle ------------------------------------------------------------

    def clear(self, *, keep_memories: bool = False) -> None:
        """Erase this session: messages, summary, records (and their vectors).

        ``keep_memories=True`` keeps the explicit memories stored with ``remember()`` (for
        adapters that replace a chat history, such as ``history.messages = [...]``).
        """
        self._drivers.run_sync(management.clear_flow(self, keep_memories))

    async def aclear(self, *, keep_memories: bool = False) -> None:
        """Async :meth:`clear`."""
        await self._drivers.run_async(management.clear_flow(self, keep_memories))

    def close(self) -> None:
        """Wait for background work, then release the journal. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._background.close()
        if self._owns_journal:
            if self.recall is not None:
                self.recall.close()
            self.journal.close()

    def __enter__(self) -> TieredMemory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> TieredMemory:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    # --- for the flows of this package and memory_types (not public API) ------------

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryClosedError("this TieredMemory is closed; open it again")

    def _require_recall(self) -> RecallIndex:
        if self.recall is None:
            raise ConfigError("this memory was built without recall: open it with TieredMemory.open(...)")
        return self.recall

    def _snapshot(self) -> tuple[SessionState, list[WindowMessage], int]:
        return reads.snapshot(self)

    def _user_ns_ids(self, kinds: Sequence[str] | None = None) -> Sequence[int]:
        return reads.user_ns_ids(self, kinds=kinds)

    def _reopen_session(self) -> None:
        """This session was erased through another handle: start it afresh under a new id."""
        self._ns_id = self.journal.namespace_id(self.namespace) or 0

    def _indexed_flow(self) -> Flow[None]:
        return writes.indexed_flow(self)

    def _sweep_flow(self) -> Flow[int]:
        return writes.sweep_flow(self)


def journal_location(url: str) -> str:
    """What :meth:`TieredMemory.open` takes for a journal ``url``: the SQLite file's folder, or the
    PostgreSQL URL with no password (a redacted ``***`` one included)."""
    if url.startswith("sqlite:///"):
        return str(Path(url.removeprefix("sqlite:///")).parent)
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    credentials, host = parts.netloc.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}" if user else host))
