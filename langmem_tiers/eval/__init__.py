"""Evaluation harness: LoCoMo and LongMemEval_S retrieval metrics for langmem-tiers and baselines.

``python -m langmem_tiers.eval locomo --data PATH`` (or ``langmem-tiers eval ...``).
Heavy dependencies (the embedding model, LangChain, LlamaIndex, Chroma) load only when a
retriever that needs them runs.
"""

from __future__ import annotations

from langmem_tiers.eval.datasets import Haystack, Question, Turn, load_locomo, load_longmemeval
from langmem_tiers.eval.retrievers import RETRIEVERS, Retriever, RetrieverSpec, get_retriever
from langmem_tiers.eval.runner import main_eval, run_benchmark

__all__ = [
    "RETRIEVERS",
    "Haystack",
    "Question",
    "Retriever",
    "RetrieverSpec",
    "Turn",
    "get_retriever",
    "load_locomo",
    "load_longmemeval",
    "main_eval",
    "run_benchmark",
]
