"""LangChain integration of langmem-tiers.

* :class:`TieredChatMessageHistory`: ``BaseChatMessageHistory`` for ``RunnableWithMessageHistory``.
* :class:`TieredRunnableWithMessageHistory`: ``RunnableWithMessageHistory`` with recall keyed on
  the input being answered.
* :class:`TieredMemoryMiddleware`: ``AgentMiddleware`` for ``langchain.agents.create_agent``
  (needs the ``agents`` extra; imported on first use).
* :func:`create_memory_tools`: ``remember`` / ``recall`` / ``forget`` tools acting on the run's user
  (``agents`` extra; lazy).
* :class:`TieredStore`: a LangGraph ``BaseStore`` (``create_agent(store=...)``, LangMem's memory tools)
  on the journal and hybrid recall (``langgraph`` extra; lazy).
* :class:`TieredMemoryRetriever`: recall as ``Document``s.
* :class:`ChatModelSummarizer`, :class:`LangChainEmbedder`, :func:`chroma_store_from_langchain`.
* :class:`TieredConversationMemory`: langchain-classic ``BaseMemory`` (``classic`` extra; lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_langmem_tiers.adapters import (
    ChatModelSummarizer,
    LangChainEmbedder,
    chroma_store_from_langchain,
)
from langchain_langmem_tiers.history import SessionHistoryFactory, TieredChatMessageHistory
from langchain_langmem_tiers.messages import from_langchain, to_langchain
from langchain_langmem_tiers.retriever import TieredMemoryRetriever
from langchain_langmem_tiers.runnable import TieredRunnableWithMessageHistory
from langchain_langmem_tiers.sessions import DEFAULT_MAX_SESSIONS

if TYPE_CHECKING:
    from langchain_langmem_tiers.classic import TieredConversationMemory
    from langchain_langmem_tiers.middleware import TieredMemoryMiddleware
    from langchain_langmem_tiers.store import TieredStore
    from langchain_langmem_tiers.tools import create_memory_tools

_LAZY = {
    "TieredMemoryMiddleware": "langchain_langmem_tiers.middleware",
    "TieredConversationMemory": "langchain_langmem_tiers.classic",
    "create_memory_tools": "langchain_langmem_tiers.tools",
    "TieredStore": "langchain_langmem_tiers.store",
}


def __getattr__(name: str) -> Any:
    # langchain (agents), langgraph and langchain-classic are optional extras: import them on first use.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "ChatModelSummarizer",
    "LangChainEmbedder",
    "SessionHistoryFactory",
    "TieredChatMessageHistory",
    "TieredConversationMemory",
    "TieredMemoryMiddleware",
    "TieredMemoryRetriever",
    "TieredRunnableWithMessageHistory",
    "TieredStore",
    "chroma_store_from_langchain",
    "create_memory_tools",
    "from_langchain",
    "to_langchain",
]
