"""Retrievers under evaluation: the :class:`Retriever` protocol and the registry.

Every retriever is built fresh per haystack (a LoCoMo conversation, a LongMemEval
question), ingests it message by message (or in batches, where only speed differs), and
answers ``query(text, k)`` with at most ``k`` ranked units, each the tuple of message
keys it covers. A retriever that assembles its own context (ours) also has
``context(text)``; the others deliver their ranking at equal tokens
(:mod:`langmem_tiers.eval.delivery`). The embedding baselines share one embedder with
ours (the local MiniLM), so that only the retrieval method differs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langmem_tiers.config import MemoryConfig
from langmem_tiers.embedders.base import Embedder
from langmem_tiers.errors import ConfigError, MissingDependencyError
from langmem_tiers.eval.datasets import DatasetMessage
from langmem_tiers.eval.metrics import Unit
from langmem_tiers.eval.ours import (
    OURS_CONTEXT_TOKENS,
    OURS_RECALL_TOKENS,
    OURS_SUMMARY_TOKENS,
    OURS_WINDOW_TOKENS,
    Layout,
    OursRetriever,
    ours_available,
    ours_config,
)
from langmem_tiers.eval.ranking import RRF_K, BM25Retriever, DenseRetriever, HybridRetriever, UnitKind

__all__ = [
    "OURS_CONTEXT_TOKENS",
    "OURS_RECALL_TOKENS",
    "OURS_SUMMARY_TOKENS",
    "OURS_WINDOW_TOKENS",
    "RETRIEVERS",
    "UNITS",
    "BM25Retriever",
    "DenseRetriever",
    "HybridRetriever",
    "OursRetriever",
    "Retriever",
    "RetrieverSpec",
    "get_retriever",
    "make_embedder",
    "ours_available",
]


class Retriever(Protocol):
    """One fresh store: ``ingest`` a haystack once (returning what it skipped, by reason), then ``query`` it."""

    def ingest(self, sessions: Sequence[Sequence[DatasetMessage]]) -> Mapping[str, int] | None: ...

    def query(self, text: str, k: int) -> list[Unit]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RetrieverSpec:
    """A named retriever: what unit it returns and how to build a fresh one.

    ``unit_kind`` is the short label tables group by (``turn`` units are twins of each
    other, ``message`` units likewise); ``unit`` says it in words.
    """

    name: str
    unit: str
    factory: Callable[[], Retriever]
    model: Callable[[], str | None]
    warmup: Callable[[], None] = lambda: None
    unit_kind: str = "message"
    config: MemoryConfig | None = None  # ours only
    layout: str | None = None  # ours only


def make_embedder() -> Embedder:
    """The shared local MiniLM embedder (loaded once, reused by every fresh store)."""
    from langmem_tiers.embedders.local import LocalEmbedder

    return LocalEmbedder()


RETRIEVERS = (
    "ours",
    "ours-message",
    "bm25",
    "dense",
    "bm25-turns",
    "dense-turns",
    "hybrid-turns",
    "langchain",
    "llamaindex",
)

UNITS = {
    "ours": "recall record: a whole turn (a user message with its replies), one hit per turn",
    "ours-message": "recall record with recall_unit='message' (one message per hit)",
    "bm25": "message",
    "dense": "message",
    "bm25-turns": "whole turn (a user message with its replies), as ours",
    "dense-turns": "whole turn, as ours (embedded in ours' word chunks, best chunk scores)",
    "hybrid-turns": "whole turn, as ours (RRF k={rrf_k} of bm25-turns and dense-turns)",  # the k it runs with
    "langchain": "message (one save_context document per message)",
    "llamaindex": "round (VectorMemory node: a user message and the replies after it)",
}

UNIT_KINDS = {
    "ours": "turn",
    "ours-message": "message",
    "bm25": "message",
    "dense": "message",
    "bm25-turns": "turn",
    "dense-turns": "turn",
    "hybrid-turns": "turn",
    "langchain": "message",
    "llamaindex": "turn",
}


def get_retriever(name: str, embedder: Callable[[], Embedder] = make_embedder, *,
                  layout: Layout = "sessions", config: MemoryConfig | None = None,
                  baseline_rrf_k: int = RRF_K) -> RetrieverSpec:
    """Resolve a retriever name; embedding retrievers share one embedder built on first use.

    ``layout`` and ``config`` apply to ours (``ours-message`` forces ``recall_unit='message'``);
    ``baseline_rrf_k`` is ``hybrid-turns``' RRF constant (chosen for it as ours' is, on half A).
    """
    if name not in RETRIEVERS:
        raise ConfigError(f"retriever {name!r} is unknown: choose one of {', '.join(RETRIEVERS)}")
    if layout not in ("sessions", "single"):
        raise ConfigError(f"layout {layout!r} is unknown: choose sessions or single")
    kind = UNIT_KINDS[name]
    if name in ("bm25", "bm25-turns"):
        unit: UnitKind = "turn" if name == "bm25-turns" else "message"
        return RetrieverSpec(name, UNITS[name], lambda: BM25Retriever(unit), lambda: None, unit_kind=kind)
    shared: list[Embedder] = []

    def emb() -> Embedder:
        if not shared:
            shared.append(embedder())
        return shared[0]

    def warmup() -> None:
        # Load the model before the clock starts, so ingest_per_s measures ingestion only.
        emb().embed(["warm up"])

    factory: Callable[[], Retriever]
    ours_cfg: MemoryConfig | None = None
    if name in ("dense", "dense-turns"):
        dense_unit: UnitKind = "turn" if name == "dense-turns" else "message"
        factory = lambda: DenseRetriever(emb(), dense_unit)  # noqa: E731
    elif name == "hybrid-turns":
        factory = lambda: HybridRetriever(emb(), "turn", baseline_rrf_k)  # noqa: E731
    elif name in ("ours", "ours-message"):
        reason = ours_available()
        if reason is not None:
            raise ConfigError(f"retriever {name!r} cannot run: {reason}")
        base = config or ours_config()
        ours_cfg = base.with_changes(recall_unit="message") if name == "ours-message" else base
        cfg = ours_cfg
        factory = lambda: OursRetriever(emb(), cfg, layout)  # noqa: E731
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

    return RetrieverSpec(name, UNITS[name].format(rrf_k=baseline_rrf_k), factory, lambda: emb().key, warmup,
                         unit_kind=kind, config=ours_cfg,
                         layout=layout if ours_cfg is not None else None)


def describe_config(config: MemoryConfig) -> dict[str, Any]:
    """The budgets of ours, for the result JSON."""
    return {
        "window_tokens": config.window_tokens,
        "summary_tokens": config.summary_tokens,
        "recall_tokens": config.recall_tokens,
        "recall_k": config.recall_k,
        "context_tokens": config.context_tokens,
        "recall_unit": config.recall_unit,
        "recall_scope": config.recall_scope,
        # The semantic tier: off for "before", on (the defaults) for "after".
        "profile_tokens": config.profile_tokens,
        "extract_memories": config.extract_memories,
    }
