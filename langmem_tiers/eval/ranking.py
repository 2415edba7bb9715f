"""Plain baselines: BM25, dense and their reciprocal-rank fusion, over messages or whole turns.

The message baselines (``bm25``, ``dense``) index one unit per message; the turn
baselines (``bm25-turns``, ``dense-turns``, ``hybrid-turns``) index the same whole-turn
units as ours (a user message with the replies after it, :func:`turns_of`), so every
comparison has a like-for-like twin. Every unit's text is its messages' lines
(``"speaker: text"``), as our recall records read. Dense turn units are embedded in the
same word chunks as our records (the embedder reads ~256 word pieces) and score by their
best chunk, as our recall returns one hit per turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from langmem_tiers.embedders.base import Embedder
from langmem_tiers.eval.datasets import DatasetMessage, turns_of
from langmem_tiers.eval.metrics import Unit
from langmem_tiers.recall.units import MAX_CHUNK_WORDS, chunk_words

UnitKind = Literal["message", "turn"]

# hybrid-turns' constant of reciprocal rank fusion (Cormack et al. 2009 use 60). 20, chosen for the baseline
# as ours' recall_rrf_k was, on half A of LoCoMo dev by the same rule (BENCHMARKS.md, issue 19): context_recall
# 0.798 -> 0.834, answer_recall 0.385 -> 0.392, R@10 0.664 -> 0.711; half B 0.799 -> 0.803. A baseline keeps
# the better of the two values it was offered, so the comparison with ours stays like for like.
RRF_K: Final = 20


def build_units(sessions: Sequence[Sequence[DatasetMessage]], unit: UnitKind) -> list[tuple[DatasetMessage, ...]]:
    if unit == "message":
        return [(m,) for s in sessions for m in s]
    return [t for s in sessions for t in turns_of(s)]


def unit_text(unit: Sequence[DatasetMessage]) -> str:
    return "\n".join(m.line for m in unit)


class BM25Retriever:
    """BM25 (bm25s, Lucene scoring, English stopwords) over messages or whole turns.

    Units sharing no term with the query score 0 and are not returned.
    """

    def __init__(self, unit: UnitKind = "message") -> None:
        self.unit: UnitKind = unit
        self._keys: list[Unit] = []
        self._bm25: Any = None

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> dict[str, int]:
        import bm25s

        units = build_units(sessions, self.unit)
        self._keys = [tuple(m.key for m in u) for u in units]
        self._bm25 = bm25s.BM25()
        tokens = bm25s.tokenize([unit_text(u) for u in units], stopwords="en", show_progress=False)
        self._bm25.index(tokens, show_progress=False)
        return {}

    def query(self, text: str, k: int) -> list[Unit]:
        import bm25s

        if self._bm25 is None or not self._keys or k < 1:
            return []
        q = bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)
        if not q[0]:
            return []
        docs, scores = self._bm25.retrieve(q, k=min(k, len(self._keys)), show_progress=False)
        return [self._keys[int(d)] for d, s in zip(docs[0], scores[0]) if float(s) > 0.0]

    def close(self) -> None:
        self._bm25 = None


class DenseRetriever:
    """Exact cosine search (numpy, no ANN index) over messages or whole turns."""

    def __init__(self, embedder: Embedder, unit: UnitKind = "message") -> None:
        self._embedder = embedder
        self.unit: UnitKind = unit
        self._keys: list[Unit] = []
        self._owner: Any = None  # chunk row -> unit index
        self._matrix: Any = None
        self._last: tuple[str, Any] | None = None  # the runner asks each question twice (rank, then deliver)

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> dict[str, int]:
        import numpy as np

        units = build_units(sessions, self.unit)
        self._keys = [tuple(m.key for m in u) for u in units]
        texts: list[str] = []
        owner: list[int] = []
        for i, u in enumerate(units):
            pieces = [unit_text(u)] if self.unit == "message" else chunk_words(unit_text(u), MAX_CHUNK_WORDS)
            texts.extend(pieces)
            owner.extend([i] * len(pieces))
        if not texts:
            self._matrix = None
            return {}
        m = np.asarray(self._embedder.embed(texts), dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        self._matrix = m / np.where(norms == 0, 1.0, norms)
        self._owner = np.asarray(owner, dtype=np.int64)
        return {}

    def query(self, text: str, k: int) -> list[Unit]:
        import numpy as np

        if self._matrix is None or not self._keys or k < 1:
            return []
        if self._last is not None and self._last[0] == text:
            q = self._last[1]
        else:
            q = np.asarray(self._embedder.embed([text])[0], dtype=np.float32)
            q /= max(float(np.linalg.norm(q)), 1e-12)
            self._last = (text, q)
        chunk_scores = self._matrix @ q
        best = np.full(len(self._keys), -np.inf, dtype=np.float32)
        np.maximum.at(best, self._owner, chunk_scores)
        top = np.argsort(-best, kind="stable")[:k]
        return [self._keys[int(i)] for i in top]

    def close(self) -> None:
        self._matrix = None


class HybridRetriever:
    """Reciprocal rank fusion (``rrf_k``, :data:`RRF_K` by default) of BM25 and dense over the same units.

    Each side ranks every unit it finds; a unit scores ``sum(1 / (rrf_k + rank))`` over the
    sides that found it (ranks from 1); ties keep BM25's order, then dense's.
    """

    def __init__(self, embedder: Embedder, unit: UnitKind = "turn", rrf_k: int = RRF_K) -> None:
        self.unit: UnitKind = unit
        self.rrf_k = rrf_k
        self._bm25 = BM25Retriever(unit)
        self._dense = DenseRetriever(embedder, unit)
        self._n = 0

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> dict[str, int]:
        self._bm25.ingest(sessions)
        self._dense.ingest(sessions)
        self._n = len(build_units(sessions, self.unit))
        return {}

    def query(self, text: str, k: int) -> list[Unit]:
        if k < 1 or not self._n:
            return []
        return rrf([self._bm25.query(text, self._n), self._dense.query(text, self._n)], self.rrf_k)[:k]

    def close(self) -> None:
        self._bm25.close()
        self._dense.close()


def rrf(rankings: Sequence[Sequence[Unit]], k: int = RRF_K) -> list[Unit]:
    """Fuse rankings by reciprocal rank; stable: ties keep first-seen order."""
    scores: dict[Unit, float] = {}
    for ranking in rankings:
        for rank, unit in enumerate(ranking, start=1):
            scores[unit] = scores.get(unit, 0.0) + 1.0 / (k + rank)
    order = list(scores)  # first-seen order: the first ranking's, then the others' new units
    return sorted(order, key=lambda u: -scores[u])
