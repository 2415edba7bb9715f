"""langmem-tiers under evaluation, through its public API, ingested as applications do.

Layouts:

- ``sessions`` (default): one user; each dataset session becomes its own session of that
  user (``TieredMemory.for_session``), messages added with the dataset's dates; every
  question is asked from one fresh session of the same user, so ``search(scope="user")``
  and ``context()`` with ``recall_scope="user"`` are what is measured.
- ``single``: the whole haystack is one session, questions asked from it (the old mode).

An odd message never stops the run: what ``add()`` refuses is counted by reason (see
:func:`skip_reason`) and the run goes on.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

from langmem_tiers.config import MemoryConfig
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.errors import ConfigError
from langmem_tiers.eval.datasets import DatasetMessage
from langmem_tiers.eval.metrics import Delivered, Unit
from langmem_tiers.recall.fusion import FusionParams
from langmem_tiers.recall.options import RecallOptions

Layout = Literal["sessions", "single"]
LAYOUTS: Final = ("sessions", "single")

EVAL_USER: Final = "eval-user"
SINGLE_SESSION: Final = "eval"
# The session questions are asked from; no dataset session has this id (checked at ingest).
QUESTION_SESSION: Final = "eval-questions"

# "ours": a window this small evicts almost everything, so answers must come from recall.
OURS_WINDOW_TOKENS = 256
OURS_SUMMARY_TOKENS = 128
OURS_RECALL_TOKENS = 1024
OURS_CONTEXT_TOKENS = 2048


def ours_config(**overrides: Any) -> MemoryConfig:
    """The configuration "ours" runs with; ``overrides`` change fields (validated by MemoryConfig)."""
    base = MemoryConfig(
        context_tokens=OURS_CONTEXT_TOKENS,
        window_tokens=OURS_WINDOW_TOKENS,
        summary_tokens=OURS_SUMMARY_TOKENS,
        recall_tokens=OURS_RECALL_TOKENS,
        recall_unit="turn",
        recall_scope="user",
    )
    return base.with_changes(**overrides) if overrides else base


def skip_reason(error: BaseException) -> str:
    """A stable reason key for a refused message: the error class and its rule, without the values.

    ``"InvalidMessageError: a user message needs non-empty content"``; digits become ``N``
    and the ``"; got ..."`` tail (the bad value) is dropped, so one rule is one key.
    """
    rule = str(error).split("; got", 1)[0].split("\n", 1)[0]
    rule = re.sub(r"\d+", "N", rule).strip()
    return f"{type(error).__name__}: {rule[:120]}"


class OursRetriever:
    """``TieredMemory.add`` per message; ``search()`` ranks, ``context()`` delivers.

    Each fresh store lives in its own temporary folder. A unit is a recall hit; it covers
    the journal messages in its ``message_ids``. ``journal_url`` (a ``postgresql://`` URL of an empty
    database, the caller's to throw away) puts the journal there instead, the vectors staying in an
    embedded Chroma of the temporary folder: the keyword side of the scale-out deployment, the same
    vectors as the default's.
    """

    def __init__(self, embedder: Embedder, config: MemoryConfig | None = None,
                 layout: Layout = "sessions", journal_url: str | None = None) -> None:
        if layout not in LAYOUTS:
            raise ConfigError(f"layout {layout!r} is unknown: choose one of {', '.join(LAYOUTS)}")
        self._embedder = embedder
        self.config = config or ours_config()
        self.layout: Layout = layout
        self.journal_url = journal_url
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._mem: Any = None  # the memory questions are asked from (it opened the journal)
        self._keys: dict[int, str] = {}
        self._store: Any = None  # with journal_url: the vector store this opened, closed with the memory

    @property
    def memory(self) -> Any:
        """The memory questions are asked from (``None`` before ``ingest``)."""
        return self._mem

    @property
    def scope(self) -> str:
        return "user" if self.layout == "sessions" else "session"

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> dict[str, int]:
        from langmem_tiers import TieredMemory

        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="langmem-eval-")
        first = QUESTION_SESSION if self.layout == "sessions" else SINGLE_SESSION
        if self.journal_url is None:
            self._mem = TieredMemory.open(Path(self._tmp.name), session_id=first, user_id=EVAL_USER,
                                          config=self.config, embedder=self._embedder)
        else:
            from langmem_tiers.memory.opening import CHROMA_DIR, collection_name
            from langmem_tiers.recall.vector_store import ChromaStore

            # The store the default opens in its folder, handed over (open() keeps chroma= stores open).
            self._store = ChromaStore.persistent(Path(self._tmp.name) / CHROMA_DIR,
                                                 collection=collection_name(self._embedder))
            self._mem = TieredMemory.open(self.journal_url, session_id=first, user_id=EVAL_USER,
                                          config=self.config, embedder=self._embedder, chroma=self._store)
        self._apply_recall_options()
        self._keys = {}
        skipped: Counter[str] = Counter()
        if self.layout == "single":
            for session in sessions:
                self._add_all(self._mem, session, skipped)
            self._mem.flush()
            return dict(skipped)
        for session in sessions:
            if not session:
                continue
            sid = session[0].session_id
            if sid == QUESTION_SESSION:
                skipped["dataset session id collides with the question session"] += len(session)
                continue
            try:
                memory = self._mem.for_session(sid, user_id=EVAL_USER)
            except (ValueError, TypeError) as e:  # a session id the core refuses: count its messages
                skipped[skip_reason(e)] += len(session)
                continue
            try:
                self._add_all(memory, session, skipped)
                memory.flush()
            finally:
                memory.close()
        return dict(skipped)

    def use(self, config: MemoryConfig) -> None:
        """Ask the next questions under ``config`` without ingesting again (query-time fields only:
        :data:`langmem_tiers.eval.ablate.QUERY_TIME_FIELDS`; the ablations use this)."""
        self.config = config
        if self._mem is not None:
            self._mem.config = config
            self._apply_recall_options()

    def ask_at(self, when: float) -> None:
        """Ask the next questions as of ``when`` (epoch seconds): the memory's clock, which relative
        time expressions in a question ("last week") are judged against. The dataset's question date
        where it has one, else just after the haystack's last message."""
        if self._mem is not None:
            self._mem.clock = lambda: when

    def _apply_recall_options(self) -> None:
        # The recall engine's query-time switches follow this config (TieredMemory.open builds the
        # engine with the defaults).
        recall = getattr(self._mem, "recall", None)
        if recall is not None:
            recall.options = RecallOptions.from_config(self.config)
            recall.params = FusionParams.from_config(self.config)

    def _add_all(self, memory: Any, session: Sequence[DatasetMessage], skipped: Counter[str]) -> None:
        for m in session:
            try:
                stored = memory.add(m.role, m.text, name=m.name, created_at=m.created_at,
                                    metadata={"message_key": m.key, "dataset_session": m.session_id})
            except (ValueError, TypeError) as e:  # one odd message: count it, keep going
                skipped[skip_reason(e)] += 1
                continue
            if stored.id is not None:
                self._keys[int(stored.id)] = m.key

    def _unit(self, message_ids: Sequence[int]) -> Unit:
        return tuple(self._keys[i] for i in message_ids if i in self._keys)

    def query(self, text: str, k: int) -> list[Unit]:
        if self._mem is None or k < 1:
            return []
        hits = self._mem.search(text, k=k, scope=self.scope)
        return [self._unit(hit.message_ids) for hit in hits[:k]]

    def context(self, text: str) -> Delivered:
        """What ``context(query=text)`` of the asking session delivers."""
        if self._mem is None:
            return Delivered("", frozenset(), 0, 0)
        ctx = self._mem.context(query=text)
        keys = {key for m in ctx.messages if m.id is not None and (key := self._keys.get(int(m.id)))}
        for hit in ctx.recalled:
            keys.update(self._unit(hit.message_ids))
        return Delivered(text="\n".join(m.text for m in ctx.messages), keys=frozenset(keys),
                         tokens=int(ctx.tokens.total), units=len(ctx.recalled))

    def close(self) -> None:
        if self._mem is not None:
            self._mem.close()
            self._mem = None
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def ours_available() -> str | None:
    """``None`` when the core API the "ours" retriever needs is importable, else why not."""
    try:
        import langmem_tiers

        mem_cls = getattr(langmem_tiers, "TieredMemory", None)
    except Exception as e:  # a broken install or a missing dependency: say why instead of crashing
        return f"langmem_tiers does not import: {e}"
    if mem_cls is None:
        return "langmem_tiers.TieredMemory is not available yet"
    if not hasattr(mem_cls, "search"):
        return "TieredMemory has no search() yet"
    return None
