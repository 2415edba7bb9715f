"""What the core promises framework integrations beyond :class:`~langmem_tiers.TieredMemory`'s methods.

Three small contracts, kept here so an integration never reaches into a core module:

* **The memory message.** ``context()`` puts pinned facts, the profile, the summary and recall into one
  synthetic message (marked in its metadata, its text opening with :data:`MEMORY_HEADER`). An adapter that
  hands it to a framework, or folds its text into a framework message (LlamaIndex puts it in the first
  user or system message), recognizes it with :func:`is_memory_message` / :func:`is_memory_text`, so it
  never journals the memory back as conversation.
* **Recalled hits as text.** An adapter that renders :attr:`Context.recalled <langmem_tiers.Context>` in a
  framework's own block writes them with :func:`recall_lines`, as the memory message does (dated, another
  conversation marked, turns of one conversation and day under one label), so no adapter shows the model
  recall in another form or spends more tokens on it.
* **LangGraph store items.** ``langchain_langmem_tiers.TieredStore`` keeps each item as a
  :class:`~langmem_tiers.Record` of kind :data:`STORE_ITEM_KIND`; an item put with a TTL carries its expiry
  in ``metadata[EXPIRES_AT]`` (unix seconds, by the memory's ``clock``). The core's expiry sweep and
  ``cleanup`` read the same two fields (see :mod:`langmem_tiers.memory_types.expiry`), so the store and
  the core agree on what has expired: :func:`expires_at` and :func:`is_expired` judge it.

Example:
    >>> from langmem_tiers import Message, is_memory_text
    >>> is_memory_text(MEMORY_HEADER + "\\n\\nPinned facts:\\n- Ada is vegetarian"), is_memory_text("hello")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from langmem_tiers import context as _context
from langmem_tiers.context import recall_lines
from langmem_tiers.memory_types import fields as _fields
from langmem_tiers.memory_types.expiry import STORE_ITEM_KIND, expires_at, is_expired
from langmem_tiers.messages import Message

__all__ = ["EXPIRES_AT", "MEMORY_HEADER", "STORE_ITEM_KIND", "expires_at", "is_expired", "is_memory_message",
           "is_memory_text", "recall_lines"]

MEMORY_HEADER: Final[str] = _context.MEMORY_HEADER
"""The first line of the memory message's text (``"Memory of this conversation (from langmem-tiers):"``)."""

EXPIRES_AT: Final[str] = _fields.EXPIRES_AT
"""The record metadata key holding a memory's expiry: absolute unix seconds, judged by the memory's clock."""

_MEMORY_MARK = _context.MEMORY_MARK  # the metadata entry context() puts on its memory message (one definition)


def is_memory_message(message: Message | Mapping[str, Any]) -> bool:
    """True for the synthetic message ``context()`` builds (pinned facts, profile, summary, recall).

    Takes the message, or its metadata as an adapter carried it into a framework message (LangChain:
    ``additional_kwargs``), so the adapter recognizes the memory message after a round trip.
    """
    metadata = message.metadata if isinstance(message, Message) else message
    key, value = _MEMORY_MARK
    return isinstance(metadata, Mapping) and metadata.get(key) == value


def is_memory_text(text: str) -> bool:
    """True for text that is the memory message's text, as an adapter placed it in a framework message
    (leading whitespace ignored)."""
    return text.lstrip().startswith(MEMORY_HEADER)
