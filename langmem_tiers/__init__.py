"""langmem-tiers: durable, token-budgeted, tiered conversational memory.

The core knows no framework: adapters for LangChain and LlamaIndex live in their
own distributions. Importing this package loads no heavy dependency (chromadb,
sentence-transformers, langchain, llama_index): they load where first used.
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
from langmem_tiers.journal.base import Namespace, SummaryVersion
from langmem_tiers.keyring import FolderKeyRing, KeyRing
from langmem_tiers.memory import Stats, TieredMemory
from langmem_tiers.memory_types.working import WorkingItem, WorkingMemory
from langmem_tiers.messages import Message, ToolCall
from langmem_tiers.metrics import MemoryMetrics, MetricsSnapshot, TierFigures
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.semantic import ExtractedMemory, Fact, Triple
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest, SummaryResult
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer
from langmem_tiers.tokens import TiktokenCounter, TokenCounter, WordCounter

__version__ = "0.1.0"

__all__ = [
    "ConfigError", "Context", "DecryptionError", "EncryptionError", "ExtractedMemory", "ExtractiveSummarizer",
    "Fact", "FolderKeyRing", "InvalidMessageError", "InvalidNamespaceError", "JournalError", "KeyRing",
    "KeyUnavailableError", "LangmemTiersError", "MemoryClosedError", "MemoryConfig",
    "MemoryMetrics", "Message", "MetricsSnapshot", "MissingDependencyError", "Namespace", "Omission", "RecallError",
    "RecallHit", "SchemaVersionError", "SessionErasedError", "Stats", "Summarizer", "SummarizerError",
    "SummaryRequest", "SummaryResult", "SummaryVersion", "TierFigures", "TierTokens", "TieredMemory", "TiktokenCounter",
    "TokenCounter", "TokenizerUnavailableError", "ToolCall", "Triple", "VectorStoreLockedError", "WordCounter",
    "WorkingItem", "WorkingMemory",
]
