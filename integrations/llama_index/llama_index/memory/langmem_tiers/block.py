"""``TieredMemoryBlock``: langmem-tiers as a block of LlamaIndex's own ``Memory``.

``Memory`` keeps a short FIFO of recent messages and flushes what overflows into
its blocks. This block stores those flushed messages in the journal and gives
back, as text, what the FIFO no longer shows: the most recent flushed turns
verbatim, older ones folded into the rolling summary, and episodes recalled for
the current question. It respects ``priority`` (0 = never truncated) and
truncates by re-assembling the context under a smaller budget, so recall goes
first, then the oldest turns, then the summary.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any, Dict, List, Optional

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.memory import BaseMemoryBlock

from langmem_tiers import Context, MemoryConfig, Message, Namespace, TieredMemory, is_memory_message, recall_lines
from langmem_tiers.errors import ConfigError, JournalError
from llama_index.memory.langmem_tiers.adapters import embedder_from_model, summarizer_from_llm
from llama_index.memory.langmem_tiers.memory import aadd_chat_messages, no_password_hint, split_password

PINNED_HEADER = "Pinned facts:"
SUMMARY_HEADER = "Summary of earlier conversation:"
RECALL_HEADER = "Recalled from earlier conversation:"
WINDOW_HEADER = "Earlier turns:"


class TieredMemoryBlock(BaseMemoryBlock[str]):
    """Recall, summary and recent flushed turns of one session, for ``llama_index.core.memory.Memory``.

    With ``session_id=None`` the block follows the ``Memory``'s own session id
    (one journal namespace per ``Memory`` session); with a ``TieredMemory``
    (``TieredMemoryBlock(memory=tm)``) it is bound to that memory's session.
    With a ``user_id``, recall also reaches the user's other sessions
    (``MemoryConfig.recall_scope``, default ``"user"``), each hit dated and marked
    "another conversation"; never another user's.
    A PostgreSQL ``path`` is kept and serialised without its password, as by ``TieredChatMemory``.

    Example:
        >>> import tempfile
        >>> from llama_index.core.memory import Memory
        >>> block = TieredMemoryBlock(path=tempfile.mkdtemp(), vectors=False)
        >>> memory = Memory.from_defaults(session_id="s1", memory_blocks=[block], token_limit=2000)
    """

    name: str = "tiered_memory"
    description: Optional[str] = "Summary, recalled episodes and recent turns of earlier conversation."
    priority: int = 1
    path: Optional[str] = Field(default=None, description="Folder of the journal (or a postgresql:// URL).")
    session_id: Optional[str] = Field(default=None, description="None: the Memory's session id.")
    user_id: Optional[str] = None
    agent_id: Optional[str] = None
    config: Optional[Dict[str, Any]] = None
    include_summary: bool = True
    include_recall: bool = True
    include_window: bool = True
    vectors: bool = True

    _memories: Dict[str, TieredMemory] = PrivateAttr(default_factory=dict)
    _summarizer: Any = PrivateAttr(default=None)
    _embedder: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _last: Dict[str, Any] = PrivateAttr(default_factory=dict)
    _dsn: Optional[str] = PrivateAttr(default=None)  # the URL with its password: never serialised

    def __init__(self, *, memory: Optional[TieredMemory] = None, llm: Optional[LLM] = None,
                 embed_model: Any = None, **data: Any) -> None:
        if memory is not None:
            data.setdefault("session_id", memory.namespace.session_id)
            data.setdefault("user_id", memory.namespace.user_id)
            data.setdefault("agent_id", memory.namespace.agent_id)
            data.setdefault("config", dataclasses.asdict(memory.config))
            data.setdefault("path", memory.location)  # never a password: see TieredChatMemory
        if embed_model is False:
            data["vectors"] = False
        dsn = split_password(data)
        super().__init__(**data)
        self._dsn = dsn
        self._summarizer = summarizer_from_llm(llm)
        self._embedder = embedder_from_model(embed_model) if embed_model is not False else None
        if memory is not None:
            self._memories[memory.namespace.session_id] = memory

    @field_validator("config", mode="before")
    @classmethod
    def _config_dict(cls, value: Any) -> Any:
        if isinstance(value, MemoryConfig):
            return dataclasses.asdict(value)
        if isinstance(value, dict):
            MemoryConfig(**value)
        return value

    @field_validator("user_id", "agent_id", mode="before")
    @classmethod
    def _no_empty_id(cls, value: Any) -> Any:
        # The core's Namespace spells "no user" as "": keep it None so a dumped block reopens its session.
        return None if value == "" else value

    def memory_for(self, session_id: Optional[str] = None) -> TieredMemory:
        """The core memory of ``session_id`` (this block's own session when it has one)."""
        sid = self.session_id or session_id
        if not sid:
            raise ConfigError("TieredMemoryBlock needs a session: give session_id= or use it inside a Memory")
        with self._lock:
            memory = self._memories.get(sid)
            if memory is None:
                if self.path is None:
                    raise ConfigError("TieredMemoryBlock needs path= (a folder for the journal) or memory=")
                try:
                    memory = TieredMemory.open(
                        self._dsn or self.path, session_id=sid, user_id=self.user_id, agent_id=self.agent_id,
                        config=MemoryConfig(**self.config) if self.config else None, summarizer=self._summarizer,
                        embedder=self._embedder if self.vectors else False,
                    )
                except JournalError as e:
                    raise no_password_hint(self.path, self._dsn, type(self).__name__, e) from e
                self._memories[sid] = memory
        return memory

    async def _amemory(self, session_id: Optional[str]) -> TieredMemory:
        sid = self.session_id or session_id
        if sid and sid in self._memories:
            return self._memories[sid]
        return await asyncio.to_thread(self.memory_for, session_id)

    async def aput(self, messages: List[ChatMessage], from_short_term_memory: bool = False,
                   session_id: Optional[str] = None) -> None:
        """Journal messages into this block's session (else ``session_id``'s).

        Messages flushed from short-term memory are taken only with ``accept_short_term_memory``.
        """
        # Overridden rather than _aput: the base class drops session_id (and tags every message with it).
        if (from_short_term_memory and not self.accept_short_term_memory) or not messages:
            return
        await aadd_chat_messages(await self._amemory(session_id), messages)

    async def _aput(self, messages: List[ChatMessage]) -> None:
        await self.aput(messages)

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, session_id: Optional[str] = None,
                    **block_kwargs: Any) -> str:
        memory = await self._amemory(session_id)
        query = next((m.content for m in reversed(messages or []) if m.role.value == "user" and m.content), None)
        self._last = {"memory": memory, "query": query}
        return self._render(await memory.acontext(query=query), memory.namespace)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> Optional[str]:
        """This block's content re-rendered to fit ``tokens_to_truncate`` fewer tokens; ``None`` when nothing fits."""
        memory, query = self._last.get("memory"), self._last.get("query")
        if memory is None or not content:
            return None
        target = memory.counter.count_text(content) - tokens_to_truncate
        if target <= 0:
            return None
        try:
            context = await memory.acontext(query=query, budget=target)
        except ConfigError:  # a budget too small for any context: the block gives way entirely
            return None
        text = self._render(context, memory.namespace)
        return text if text and memory.counter.count_text(text) <= target else None

    def _render(self, context: Context, session: Namespace) -> str:
        sections = []
        if context.pinned:
            sections.append(PINNED_HEADER + "\n" + "\n".join(f"- {p}" for p in context.pinned))
        if self.include_summary and context.summary:
            sections.append(SUMMARY_HEADER + "\n" + context.summary)
        if self.include_recall and context.recalled:
            sections.append(RECALL_HEADER + "\n" + "\n".join(recall_lines(context.recalled, session)))
        if self.include_window:
            lines = [_message_line(m) for m in context.messages
                     if not is_memory_message(m) and m.text.strip()]
            if lines:
                sections.append(WINDOW_HEADER + "\n" + "\n".join(lines))
        return "\n\n".join(sections)

    def close(self) -> None:
        """Release every journal this block opened."""
        with self._lock:
            memories, self._memories = list(self._memories.values()), {}
        for m in memories:
            m.close()


def _message_line(m: Message) -> str:
    speaker = f"tool {m.name or m.tool_call_id}" if m.role == "tool" else (m.name or m.role)
    return f"{speaker}: {m.text}"
