"""Evaluation harness: LoCoMo and LongMemEval_S metrics for langmem-tiers and baselines.

``python -m langmem_tiers.eval locomo --data PATH`` (or ``langmem-tiers eval ...``).
Heavy dependencies (the embedding model, LangChain, LlamaIndex, Chroma) load only when a
retriever that needs them runs.
"""

from __future__ import annotations

from langmem_tiers.eval.datasets import DatasetMessage, Haystack, Question, load_locomo, load_longmemeval, turns_of
from langmem_tiers.eval.metrics import Delivered
from langmem_tiers.eval.retrievers import RETRIEVERS, Retriever, RetrieverSpec, get_retriever
from langmem_tiers.eval.runner import main_eval, run_benchmark

__all__ = [
    "RETRIEVERS",
    "DatasetMessage",
    "Delivered",
    "Haystack",
    "Question",
    "Retriever",
    "RetrieverSpec",
    "get_retriever",
    "load_locomo",
    "load_longmemeval",
    "main_eval",
    "run_benchmark",
    "turns_of",
]
