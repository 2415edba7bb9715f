"""langmem-tiers: durable, token-budgeted, tiered conversational memory.

The core knows no framework: adapters for LangChain and LlamaIndex live in their
own distributions. Importing this package loads no heavy dependency (chromadb,
sentence-transformers, langchain, llama_index): they load where first used
(:class:`ChromaStore` imports chromadb when it opens a store).

This package, with :mod:`langmem_tiers.errors`, :mod:`langmem_tiers.summarizers` and
:mod:`langmem_tiers.embedders`, is the public API: the integrations use nothing else
(``tests/test_public_api.py`` checks it). Besides :class:`TieredMemory` and its results it
exports what adapters build on: :func:`make_message`, the record types (:class:`Record`,
:class:`NewRecord`), the journal protocol (:class:`Journal`, :class:`ReadTxn`, :class:`WriteTxn`,
:class:`SessionState`: the low-level API of ``TieredMemory.journal`` for adapters that keep their own
records, such as the LangGraph store), :class:`ChromaStore`, the memory-message and store-item contract
(:mod:`langmem_tiers.integration`) and the memory tools' spec (:class:`MemoryToolSpec`).
"""

from langmem_tiers.config import MemoryConfig
from langmem_tiers.context import Context, Omission, TierTokens
from langmem_tiers.errors import (
    ConfigError,
    DecryptionError,
    EncryptionError,
    InvalidMessageError,
    InvalidNamespaceError,
    JournalError,
    KeyUnavailableError,
    LangmemTiersError,
    MemoryClosedError,
    MissingDependencyError,
    RecallError,
    SchemaVersionError,
    SessionErasedError,
    SummarizerError,
    TokenizerUnavailableError,
    VectorStoreLockedError,
)
from langmem_tiers.integration import (
    EXPIRES_AT,
    MEMORY_HEADER,
    STORE_ITEM_KIND,
    expires_at,
    is_expired,
    is_memory_message,
    is_memory_text,
    recall_lines,
)
from langmem_tiers.journal.base import (
    Journal,
    Namespace,
    NewRecord,
    ReadTxn,
    Record,
    SessionState,
    SummaryVersion,
    WriteTxn,
)
from langmem_tiers.keyring import FolderKeyRing, KeyRing
from langmem_tiers.memory import Stats, TieredMemory
from langmem_tiers.memory_tools import MEMORY_TOOLS, MemoryToolKind, MemoryToolScope, MemoryToolSpec
from langmem_tiers.memory_types.working import WorkingItem, WorkingMemory
from langmem_tiers.messages import Message, ToolCall, make_message
from langmem_tiers.metrics import MemoryMetrics, MetricsSnapshot, TierFigures
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.recall.vector_store import ChromaStore
from langmem_tiers.semantic import ExtractedMemory, Fact, Triple
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest, SummaryResult
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer
from langmem_tiers.tokens import TiktokenCounter, TokenCounter, WordCounter

__version__ = "0.1.0"

__all__ = [
    "EXPIRES_AT", "MEMORY_HEADER", "MEMORY_TOOLS", "STORE_ITEM_KIND", "ChromaStore", "ConfigError", "Context",
    "DecryptionError", "EncryptionError", "ExtractedMemory", "ExtractiveSummarizer", "Fact", "FolderKeyRing",
    "InvalidMessageError", "InvalidNamespaceError", "Journal", "JournalError", "KeyRing", "KeyUnavailableError",
    "LangmemTiersError", "MemoryClosedError", "MemoryConfig", "MemoryMetrics", "MemoryToolKind", "MemoryToolScope",
    "MemoryToolSpec", "Message", "MetricsSnapshot", "MissingDependencyError", "Namespace", "NewRecord", "Omission",
    "ReadTxn", "RecallError", "RecallHit", "Record", "SchemaVersionError", "SessionErasedError", "SessionState",
    "Stats", "Summarizer", "SummarizerError", "SummaryRequest", "SummaryResult", "SummaryVersion", "TierFigures",
    "TierTokens", "TieredMemory", "TiktokenCounter", "TokenCounter", "TokenizerUnavailableError", "ToolCall",
    "Triple", "VectorStoreLockedError", "WordCounter", "WorkingItem", "WorkingMemory", "WriteTxn", "expires_at",
    "is_expired", "is_memory_message", "is_memory_text", "make_message", "recall_lines",
]

