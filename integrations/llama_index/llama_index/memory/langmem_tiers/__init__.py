"""LlamaIndex memory backed by langmem-tiers: durable, token-budgeted, tiered.

- :class:`TieredChatMemory` (``BaseMemory``): ``memory=`` for every chat engine and agent.
- :class:`TieredMemoryBlock` (``BaseMemoryBlock``): a block of LlamaIndex's own ``Memory``.
- :class:`LlamaIndexSummarizer` / :class:`LlamaIndexEmbedder`: any ``LLM`` / ``BaseEmbedding``
  as a langmem-tiers summarizer / embedder.
- :func:`create_memory_tools`: ``remember`` / ``recall`` / ``forget`` ``FunctionTool`` objects acting on the
  run's memory (its user), for ``FunctionAgent`` and ``ReActAgent``.
- :func:`from_chat_message` / :func:`to_chat_message`: lossless message conversion.

``TieredChatMemory.from_defaults`` takes the budget arguments of ``ChatMemoryBuffer`` and
``Memory`` (``token_limit``, ``chat_history_token_ratio``, ``token_flush_size``,
``chat_store_key``) and refuses the others by name (see ``migration``).
"""

from llama_index.memory.langmem_tiers.adapters import LlamaIndexEmbedder, LlamaIndexSummarizer
from llama_index.memory.langmem_tiers.block import TieredMemoryBlock
from llama_index.memory.langmem_tiers.memory import TieredChatMemory
from llama_index.memory.langmem_tiers.messages import from_chat_message, to_chat_message
from llama_index.memory.langmem_tiers.tools import create_memory_tools

__version__ = "0.1.0"

__all__ = [
    "LlamaIndexEmbedder",
    "LlamaIndexSummarizer",
    "TieredChatMemory",
    "TieredMemoryBlock",
    "create_memory_tools",
    "from_chat_message",
    "to_chat_message",
]
