"""Retrievers under evaluation: the :class:`Retriever` protocol, ours and the baselines.

Every retriever is built fresh per haystack (a LoCoMo conversation, a LongMemEval
question), ingests it turn by turn (or in batches, where only speed differs), and
answers ``query(text, k)`` with at most ``k`` ranked units, each the tuple of turn
keys it covers. The embedding baselines share one embedder with ours (the local
MiniLM), so that only the retrieval method differs.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from langmem_tiers.config import RecallUnit
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.errors import ConfigError, MissingDependencyError
from langmem_tiers.eval.datasets import Turn
from langmem_tiers.eval.metrics import Unit

# "ours": a window this small evicts almost everything, so answers must come from recall.
OURS_WINDOW_TOKENS = 256
OURS_SUMMARY_TOKENS = 128
OURS_RECALL_TOKENS = 1024
OURS_CONTEXT_TOKENS = 2048
# A recall record is a whole turn (user message + replies), so a hit covers ~2 LoCoMo turns;
# "message" makes hits single messages, the unit of the bm25/dense/langchain baselines.
OURS_RECALL_UNIT: Final = "turn"
OURS_BUDGETS = {
    "window_tokens": OURS_WINDOW_TOKENS,
    "summary_tokens": OURS_SUMMARY_TOKENS,
    "recall_tokens": OURS_RECALL_TOKENS,
    "context_tokens": OURS_CONTEXT_TOKENS,
    "recall_unit": OURS_RECALL_UNIT,
}


class Retriever(Protocol):
    """One fresh store: ``ingest`` a haystack once, then ``query`` it."""

    def ingest(self, sessions: Sequence[Sequence[Turn]]) -> None: ...

    def query(self, text: str, k: int) -> list[Unit]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RetrieverSpec:
    """A named retriever: what unit it returns and how to build a fresh one."""

    name: str
    unit: str
    factory: Callable[[], Retriever]
    model: Callable[[], str | None]
    warmup: Callable[[], None] = lambda: None


def make_embedder() -> Embedder:
    """The shared local MiniLM embedder (loaded once, reused by every fresh store)."""
    from langmem_tiers.embedders.local import LocalEmbedder

    return LocalEmbedder()


# --- BM25 --------------------------------------------------------------------------------------


class BM25Retriever:
    """BM25 (bm25s, Lucene scoring, English stopwords) over single turns.

    Turns sharing no term with the query score 0 and are not returned.
    """

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._bm25: Any = None

    def ingest(self, sessions: Sequence[Sequence[Turn]]) -> None:
        import bm25s

        turns = [t for s in sessions for t in s]
        self._keys = [t.key for t in turns]
        self._bm25 = bm25s.BM25()
        tokens = bm25s.tokenize([t.text for t in turns], stopwords="en", show_progress=False)
        self._bm25.index(tokens, show_progress=False)

    def query(self, text: str, k: int) -> list[Unit]:
        import bm25s

        if self._bm25 is None or not self._keys:
            return []
        q = bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)
        if not q[0]:
            return []
        docs, scores = self._bm25.retrieve(q, k=min(k, len(self._keys)), show_progress=False)
        return [(self._keys[int(d)],) for d, s in zip(docs[0], scores[0]) if float(s) > 0.0]

    def close(self) -> None:
        self._bm25 = None


# --- dense -------------------------------------------------------------------------------------


class DenseRetriever:
    """Exact cosine search over single-turn embeddings (numpy, no ANN index)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._keys: list[str] = []
        self._matrix: Any = None

    def ingest(self, sessions: Sequence[Sequence[Turn]]) -> None:
        import numpy as np

        turns = [t for s in sessions for t in s]
        self._keys = [t.key for t in turns]
        m = np.asarray(self._embedder.embed([t.text for t in turns]), dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        self._matrix = m / np.where(norms == 0, 1.0, norms)

    def query(self, text: str, k: int) -> list[Unit]:
        import numpy as np

        if self._matrix is None or not self._keys:
            return []
        q = np.asarray(self._embedder.embed([text])[0], dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        scores = self._matrix @ q
        top = np.argsort(-scores, kind="stable")[:k]
        return [(self._keys[int(i)],) for i in top]

    def close(self) -> None:
        self._matrix = None


# --- ours --------------------------------------------------------------------------------------


class OursRetriever:
    """langmem-tiers through its public API: ``TieredMemory.add`` per turn, ``search`` to recall.

    Each fresh store lives in its own temporary folder. Units are recall hits; a hit
    covers the journal messages in its ``message_ids``.
    """

    def __init__(self, embedder: Embedder, window_tokens: int = OURS_WINDOW_TOKENS,
                 recall_unit: RecallUnit = OURS_RECALL_UNIT) -> None:
        self._embedder = embedder
        self._window_tokens = window_tokens
        self._recall_unit = recall_unit
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._mem: Any = None
        self._ids: dict[int, str] = {}

    def ingest(self, sessions: Sequence[Sequence[Turn]]) -> None:
        from langmem_tiers import MemoryConfig, TieredMemory

        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="langmem-eval-")
        config = MemoryConfig(
            context_tokens=OURS_CONTEXT_TOKENS,
            window_tokens=self._window_tokens,
            summary_tokens=OURS_SUMMARY_TOKENS,
            recall_tokens=OURS_RECALL_TOKENS,
            recall_unit=self._recall_unit,
        )
        # One folder per store, so one fixed session id: the whole haystack is one conversation.
        self._mem = TieredMemory.open(Path(self._tmp.name), session_id="eval", config=config, embedder=self._embedder)
        self._ids = {}
        for session in sessions:
            for t in session:
                msg = self._mem.add(
                    t.role,
                    t.text,
                    name=t.name,
                    created_at=t.created_at,
                    metadata={"turn_key": t.key, "session": t.session_id},
                )
                self._ids[int(msg.id)] = t.key
        self._mem.flush()

    def query(self, text: str, k: int) -> list[Unit]:
        if self._mem is None:
            return []
        hits = self._mem.search(text, k=k, scope="session")
        units: list[Unit] = []
        for hit in hits[:k]:
            keys = tuple(self._ids[i] for i in hit.message_ids if i in self._ids)
            units.append(keys)
        return units

    def close(self) -> None:
        if self._mem is not None:
            self._mem.close()
            self._mem = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def ours_available() -> str | None:
    """``None`` when the core API the "ours" retriever needs is importable, else why not."""
    try:
        import langmem_tiers

        mem_cls = getattr(langmem_tiers, "TieredMemory", None)
    except Exception as e:  # the core is being written; report any import failure
        return f"langmem_tiers does not import: {e}"
    if mem_cls is None:
        return "langmem_tiers.TieredMemory is not available yet"
    if not hasattr(mem_cls, "search"):
        return "TieredMemory has no search() yet"
    return None


# --- registry ----------------------------------------------------------------------------------

RETRIEVERS = ("ours", "ours-message", "bm25", "dense", "langchain", "llamaindex")

UNITS = {
    "ours": "recall hit (TieredMemory.search result; covers the journal messages in message_ids)",
    "ours-message": "recall hit with recall_unit='message' (one journal message per hit, like bm25/dense)",
    "bm25": "turn",
    "dense": "turn",
    "langchain": "turn (one save_context document per turn)",
    "llamaindex": "round (VectorMemory node: a user message and the replies after it)",
}


def get_retriever(name: str, embedder: Callable[[], Embedder] = make_embedder) -> RetrieverSpec:
    """Resolve a retriever name; embedding retrievers share one embedder built on first use."""
    if name not in RETRIEVERS:
        raise ConfigError(f"retriever {name!r} is unknown: choose one of {', '.join(RETRIEVERS)}")
    if name == "bm25":
        return RetrieverSpec(name, UNITS[name], BM25Retriever, lambda: None)
    shared: list[Embedder] = []

    def emb() -> Embedder:
        if not shared:
            shared.append(embedder())
        return shared[0]

    factory: Callable[[], Retriever]
    if name == "dense":
        factory = lambda: DenseRetriever(emb())  # noqa: E731
    elif name in ("ours", "ours-message"):
        reason = ours_available()
        if reason is not None:
            raise ConfigError(f"retriever {name!r} cannot run: {reason}")
        unit: RecallUnit = "message" if name == "ours-message" else OURS_RECALL_UNIT
        factory = lambda: OursRetriever(emb(), recall_unit=unit)  # noqa: E731
    else:
        # Imported by name so that mypy (strict on the harness) does not follow into the
        # framework code, and so that the frameworks load only when asked for.
        module, cls_name = {
            "langchain": ("langmem_tiers.eval.baselines.langchain", "LangChainRetriever"),
            "llamaindex": ("langmem_tiers.eval.baselines.llamaindex", "LlamaIndexRetriever"),
        }[name]
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except ImportError as e:
            raise MissingDependencyError(
                f"retriever {name!r} needs its framework: pip install "
                + ("langchain-classic langchain-chroma chromadb" if name == "langchain" else "llama-index-core")
            ) from e
        factory = lambda: cls(emb())  # noqa: E731

    def warmup() -> None:
        # Load the model before the clock starts, so ingest_per_s measures ingestion only.
        emb().embed(["warm up"])

    return RetrieverSpec(name, UNITS[name], factory, lambda: emb().key, warmup)
