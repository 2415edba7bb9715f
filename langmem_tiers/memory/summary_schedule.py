"""Summary scheduling: evicted turns folded into the rolling summary, in the background or inline,
with exponential backoff after a summarizer failure, and the memories extracted with each fold.

The summary is saved only onto the state it was computed from (cursor and version), so a
summary computed while another handle summarized, cleared or erased the session is dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from langmem_tiers.errors import SessionErasedError, SummarizerError
from langmem_tiers.flow import Blocking, Flow, Summarize, wait_free
from langmem_tiers.journal.base import NewRecord, SessionState
from langmem_tiers.memory.writes import apply_plan, dedupe_matches, indexed_flow
from langmem_tiers.messages import Message
from langmem_tiers.semantic.extract import extract_memories
from langmem_tiers.semantic.supersede import plan_memories
from langmem_tiers.semantic.types import ExtractedMemory
from langmem_tiers.summarizers.fold import Folded, chunk_pending, fold_chunk

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory

log = logging.getLogger(__name__)


class BackgroundSummaries:
    """One worker thread per handle (started on first use) that summarizes off the caller's path;
    at most one summary is queued at a time: a running one covers every turn evicted before it reads."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._future: Future[None] | None = None

    def start(self, run: Callable[[], None]) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="langmem-tiers-summary")
        if self._future is None or self._future.done():
            self._future = self._executor.submit(run)

    def wait_flow(self) -> Flow[None]:
        """Wait until the summary in flight (if any) is done; raises what it raised."""
        future = self._future
        if future is not None:
            yield Blocking(future.result)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)


def after_eviction_flow(m: TieredMemory) -> Flow[None]:
    """Turns left the window: summarize them in the background worker, or now (``background_summary`` off)."""
    if m.config.background_summary:
        m._background.start(lambda: m._drivers.run_sync(summary_flow(m, force=False)))
        return
    yield from summary_flow(m, force=False)


def flush_flow(m: TieredMemory) -> Flow[None]:
    """``flush()``: the background summary first, then every pending turn now, then the index outbox."""
    m._check_open()
    yield from m._background.wait_flow()
    yield from summary_flow(m, force=True)
    if m.recall is not None:
        yield from m.recall.flush_flow()


def summary_flow(m: TieredMemory, force: bool) -> Flow[None]:
    """Fold pending evicted turns into the summary. ``force`` ignores the retry backoff and raises."""
    # The lock is taken here, never in a worker thread: a cancelled task must not leave a
    # thread that acquires it after the task is gone (summaries would stop for good).
    while not m._summary_lock.acquire(blocking=False):
        if not force:
            return  # another thread of this process is summarizing this session right now
        yield wait_free(m._summary_lock)
    try:
        saved_memories = yield from _fold_pending(m, force)
    finally:
        m._summary_lock.release()
    if saved_memories:
        # The memories saved with the summary are embedded now, not at the next add that writes a turn; and
        # after the lock is released: inline (``background_index`` off), embedding them must not hold up
        # another summary of this session. When a later chunk raised, the indexer's drain embeds them.
        yield from indexed_flow(m)


def _fold_pending(m: TieredMemory, force: bool) -> Flow[bool]:
    """The body of :func:`summary_flow`, under the session's summary lock: whether a saved chunk
    brought extracted memories."""
    saved_memories = False
    try:
        state, pending = yield Blocking(lambda: _pending(m))
    except SessionErasedError:
        return False  # erased meanwhile: nothing of it may be summarized
    if not pending or (not force and time.time() < state.retry_at):
        return False
    previous, cursor, version = state.summary, state.summary_cursor, state.summary_version
    counts = [m.counter.count_message(msg) for msg in pending]
    for chunk in chunk_pending(pending, counts, m.config.summary_input_tokens):
        try:
            folded = yield from _fold(m, previous, chunk)
        except Exception as e:
            failures = state.failures + 1
            delay = min(m.config.summary_retry_base_s * 2 ** (failures - 1), m.config.summary_retry_max_s)
            error = f"{type(e).__name__}: {e}"
            log.warning("summarizer failed (%d in a row), %d messages stay pending, retry in %.0fs: %s",
                        failures, len(pending), delay, error)
            m.metrics.observe_summary(ok=False)
            yield Blocking(lambda: _save_failure(m, error, failures, time.time() + delay))
            if force:
                raise SummarizerError(f"summary failed; the evicted turns stay pending: {error}") from e
            return saved_memories
        end = chunk[-1].id or cursor
        text = folded.text
        memories = _extracted(m, folded, chunk)
        try:
            saved = yield Blocking(lambda: _save_summary(m, text, cursor, version, end, memories))
        except Exception as e:
            if force:
                raise
            log.warning("could not save the summary; the turns stay pending: %s", e)
            return saved_memories
        if saved is None:
            # The summary changed under us (another process summarized, or the session was
            # cleared, erased or had turns forgotten): what we computed is stale, drop it.
            return saved_memories
        m.metrics.observe_summary(ok=True)
        previous, cursor, version = text, end, saved
        saved_memories = saved_memories or bool(memories)
    return saved_memories


def _fold(m: TieredMemory, previous: str, chunk: list[Message]) -> Flow[Folded]:
    steps = fold_chunk(previous, chunk, m.config.summary_tokens, m.counter.count_text,
                       extract=m.config.extract_memories)
    request = next(steps)
    while True:
        reply = yield Summarize(request)
        try:
            request = steps.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _extracted(m: TieredMemory, folded: Folded, chunk: list[Message]) -> list[NewRecord]:
    """The memories to store with a folded chunk: the summarizer's, or the offline extractor's
    when it gave none (text only, or its extraction failed: a failed extraction loses nothing)."""
    if not m.config.extract_memories:
        return []
    found = folded.extracted
    if found is None:
        if folded.extraction_error:
            log.info("extraction in the summary call failed (%s); extracting offline", folded.extraction_error)
        found = tuple(extract_memories(chunk))
    said = {msg.id: msg.created_at for msg in chunk if msg.id is not None}
    return [_extracted_record(m, e, said) for e in found if set(e.message_ids) <= set(said) and e.message_ids]


def _extracted_record(m: TieredMemory, memory: ExtractedMemory, said: Mapping[int, float | None]) -> NewRecord:
    # Valid from when it was said (an old turn summarized late must not supersede a newer value).
    when = max((said[i] or 0.0 for i in memory.message_ids), default=0.0) or time.time()
    metadata: dict[str, Any] = {"confidence": memory.confidence}
    if memory.triple is not None:
        metadata["triple"] = [memory.triple.subject, memory.triple.relation, memory.triple.object]
    text = m.redactor(memory.text) if m.redactor is not None else memory.text
    return NewRecord(kind=memory.kind, text=text, message_ids=tuple(sorted(set(memory.message_ids))),
                     importance=round(0.4 + 0.3 * memory.confidence, 3), metadata=metadata, created_at=when,
                     key=memory.key)


def _pending(m: TieredMemory) -> tuple[SessionState, list[Message]]:
    with m.journal.write(m._ns_id) as tx:
        state = tx.state()
        return state, tx.messages_between(state.summary_cursor, state.window_start)


def _save_summary(m: TieredMemory, text: str, expected_cursor: int, expected_version: int, new_cursor: int,
                  memories: Sequence[NewRecord] = ()) -> int | None:
    """Save a summary, and the memories extracted with it, in one transaction, only onto the
    state it was computed from; return its new version, or None."""
    ns_ids = m._user_ns_ids() if memories else []
    # Read before the transaction (a keyword search is not part of it): a near duplicate written by
    # another session meanwhile is missed, and the memory is stored beside it.
    matches = dedupe_matches(m, memories, ns_ids) if memories else []
    try:
        with m.journal.write(m._ns_id) as tx:
            state = tx.state()
            if (state.summary_cursor, state.summary_version) != (expected_cursor, expected_version):
                return None
            tx.set_summary(text, m.counter.count_text(text), new_cursor, history=m.config.summary_history)
            if memories:
                apply_plan(tx, plan_memories(memories, tx.current_memories(ns_ids, unkeyed=matches), m.namespace))
            return tx.state().summary_version
    except SessionErasedError:
        return None


def _save_failure(m: TieredMemory, error: str, failures: int, retry_at: float) -> None:
    try:
        with m.journal.write(m._ns_id) as tx:
            tx.set_failure(error, failures, retry_at)
    except SessionErasedError:
        pass  # erased meanwhile: nothing is pending any more
