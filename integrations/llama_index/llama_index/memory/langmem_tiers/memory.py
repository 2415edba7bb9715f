"""``TieredChatMemory``: a LlamaIndex ``BaseMemory`` backed by langmem-tiers.

Every chat engine and agent takes it as ``memory=``. ``get()`` returns the
budgeted context (window turns, with the rolling summary and recalled episodes
merged into the first user message by default), ``put()`` appends durably.

Calling orders (llama-index-core 0.14): SimpleChatEngine ``put`` s the user
message and then calls ``get(initial_token_count=...)`` without ``input``;
FunctionAgent and ReActAgent ``put`` it and call ``get()`` (``get(input=...)``
after tool calls); the Context / CondensePlusContext / CondenseQuestion engines
call ``get(input=message)`` first and ``put`` afterwards. Recall searches for
``input`` when given, else for the newest user message the session holds (the
current turn is never evicted), so every order recalls for the current question.

Where the memory text goes (``insert_method``):
    ``"user"`` (default): prepended as a text block to the first user message
        returned, so no engine ever sees a second system message: the Context
        engines and SimpleChatEngine put their own system message first, and
        ``ReActAgent`` drops a leading system message of the history.
    ``"system"``: merged into a stored leading system message, or a new one first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional
from urllib.parse import urlsplit, urlunsplit

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import BaseMemory

from langmem_tiers import Context, MemoryConfig, Message, TieredMemory, is_memory_message, is_memory_text
from langmem_tiers.errors import ConfigError, InvalidMessageError, JournalError
from llama_index.memory.langmem_tiers.adapters import embedder_from_model, summarizer_from_llm
from llama_index.memory.langmem_tiers.messages import META_KEY, from_chat_message, to_chat_message
from llama_index.memory.langmem_tiers.migration import budget_config, refuse_unknown, session_key, status_of

InsertMethod = Literal["user", "system"]


class TieredChatMemory(BaseMemory):
    """Durable, token-budgeted chat memory for LlamaIndex chat engines and agents.

    Serializes to its path and namespace only (``to_dict`` / ``from_dict``), so an
    agent ``Context`` that holds it survives ``ctx.to_dict()`` and a process
    restart; the journal on disk holds the conversation. A restored instance
    uses the offline summarizer and the local embedder unless given ``llm=`` /
    ``embed_model=`` again (``TieredChatMemory.from_dict(data, llm=llm)``).

    A PostgreSQL ``path`` is serialised **without its password** (``TieredMemory.location``): these
    dicts are persisted, and a database password does not belong in them. The instance that was given
    the full URL keeps it in memory only; a restored one reopens with the password libpq finds in
    ``PGPASSWORD`` or ``~/.pgpass``, or with the full URL passed again
    (``TieredChatMemory.from_dict(data, path=url)``). When neither gives one, the first use raises
    :class:`langmem_tiers.errors.JournalError` saying so.

    Example:
        >>> import tempfile
        >>> from llama_index.core.llms import ChatMessage
        >>> memory = TieredChatMemory.from_defaults(path=tempfile.mkdtemp(), session_id="s1",
        ...                                         embed_model=False)
        >>> memory.put(ChatMessage(role="user", content="My name is Ada."))
        >>> [m.content for m in memory.get()]
        ['My name is Ada.']
        >>> memory.close()
    """

    path: Optional[str] = Field(default=None, description="Folder of the journal (or a postgresql:// URL).")
    session_id: str = Field(description="The conversation; recall never crosses namespaces.")
    user_id: Optional[str] = None
    agent_id: Optional[str] = None
    config: Optional[Dict[str, Any]] = Field(default=None, description="MemoryConfig fields.")
    insert_method: InsertMethod = "user"
    vectors: bool = Field(default=True, description="False: keyword recall only (no embedder).")

    _memory: Optional[TieredMemory] = PrivateAttr(default=None)
    _summarizer: Any = PrivateAttr(default=None)
    _embedder: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _last_context: Optional[Context] = PrivateAttr(default=None)
    _dsn: Optional[str] = PrivateAttr(default=None)  # the URL with its password: never serialised

    def __init__(self, *, memory: Optional[TieredMemory] = None, llm: Optional[LLM] = None,
                 embed_model: Any = None, **data: Any) -> None:
        if memory is not None:
            data.setdefault("session_id", memory.namespace.session_id)
            data.setdefault("user_id", memory.namespace.user_id)
            data.setdefault("agent_id", memory.namespace.agent_id)
            data.setdefault("path", memory.location)
            data.setdefault("config", dataclasses.asdict(memory.config))
            data.setdefault("vectors", memory.recall is not None and memory.recall.vectors)
        if embed_model is False:
            data["vectors"] = False
        dsn = split_password(data)
        super().__init__(**data)
        self._dsn = dsn
        self._memory = memory
        self._summarizer = summarizer_from_llm(llm)
        self._embedder = embedder_from_model(embed_model) if embed_model is not False else None

    @field_validator("config", mode="before")
    @classmethod
    def _config_dict(cls, value: Any) -> Any:
        if isinstance(value, MemoryConfig):
            return dataclasses.asdict(value)
        if isinstance(value, dict):
            MemoryConfig(**value)  # refuse a bad config now, not at the first get()
        return value

    @field_validator("user_id", "agent_id", mode="before")
    @classmethod
    def _no_empty_id(cls, value: Any) -> Any:
        # The core's Namespace spells "no user" as "": keep it None so to_dict() reopens an anonymous session.
        return None if value == "" else value

    @field_validator("insert_method", mode="before")
    @classmethod
    def _insert_method(cls, value: Any) -> Any:
        # Also LlamaIndex's own InsertMethod enum (Memory.from_defaults(insert_method=InsertMethod.USER)).
        return getattr(value, "value", value)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes this memory under."""
        return "TieredChatMemory"

    @classmethod
    def from_defaults(
        cls,
        path: Optional[str | Path] = None,
        session_id: Optional[str] = None,
        user_id: Optional[str] = None,
        config: Optional[MemoryConfig] = None,
        llm: Optional[LLM] = None,
        embed_model: Any = None,
        *,
        agent_id: Optional[str] = None,
        insert_method: Any = "user",
        chat_history: Optional[List[ChatMessage]] = None,
        token_limit: Optional[int] = None,
        chat_history_token_ratio: Optional[float] = None,
        token_flush_size: Optional[int] = None,
        chat_store_key: Optional[str] = None,
        **kwargs: Any,
    ) -> TieredChatMemory:
        """Open (or create) the memory of one session.

        Args:
            path: a folder for the SQLite journal and the embedded Chroma (or a ``postgresql://`` URL).
            session_id / user_id / agent_id: the namespace (``chat_store_key`` is taken as ``session_id``).
            config: a :class:`langmem_tiers.MemoryConfig` (budgets, ``recall_scope``).
            llm: summarizes evicted turns; default: the offline extractive summarizer. Without
                ``token_limit`` or ``config`` the budget is 3/4 of its context window, as in ChatMemoryBuffer.
            embed_model: a ``BaseEmbedding``; ``None`` the local MiniLM model; ``False`` no vectors.
            chat_history: stored only when the session is new (reopening does not duplicate it).
            token_limit: the context budget ``get()`` fills (``context_tokens``); the window, summary and
                recall shares keep ``config``'s proportions.
            chat_history_token_ratio / token_flush_size: as in ``Memory``: the window's share of
                ``token_limit``, and how many tokens are evicted at once when it overflows.

        Raises:
            ConfigError: an argument of LlamaIndex's memories that has no meaning here (``chat_store``,
                ``tokenizer_fn``, ``memory_blocks``, ...), named with what to use instead.
        """
        refuse_unknown(kwargs)
        session_id = session_key(session_id, chat_store_key)
        if path is None or session_id is None:
            raise ConfigError("TieredChatMemory.from_defaults needs path= (a folder for the journal) and "
                              "session_id= (the conversation), e.g. path='./memory', session_id='user-42'")
        config = budget_config(config, token_limit=token_limit, llm=llm,
                               chat_history_token_ratio=chat_history_token_ratio, token_flush_size=token_flush_size)
        memory = cls(path=str(path), session_id=session_id, user_id=user_id, agent_id=agent_id,
                     config=config, insert_method=insert_method, llm=llm, embed_model=embed_model)
        if chat_history and memory.tiered.stats().messages == 0:
            memory.put_messages(chat_history)
        return memory

    @classmethod
    def from_string(cls, json_str: str, **kwargs: Any) -> TieredChatMemory:
        """The memory ``to_string()`` described (``llm=`` / ``embed_model=`` may be given again)."""
        return cls.from_dict(json.loads(json_str), **kwargs)

    def to_string(self) -> str:
        """JSON of the path, namespace and settings (as ``ChatMemoryBuffer.to_string``); the journal holds
        the conversation."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_memory(cls, memory: TieredMemory, *, insert_method: InsertMethod = "user") -> TieredChatMemory:
        """Wrap an open :class:`langmem_tiers.TieredMemory` (its collaborators are kept)."""
        return cls(memory=memory, insert_method=insert_method)

    # --- the core memory, opened on first use -------------------------------

    @property
    def tiered(self) -> TieredMemory:
        """The langmem-tiers memory behind this object (opened on first use, thread-safe)."""
        memory = self._memory
        if memory is None:
            with self._lock:
                if self._memory is None:
                    if self.path is None:
                        raise ConfigError("this TieredChatMemory has no path to open: build it with "
                                          "from_defaults(path=..., session_id=...) or from_memory(...)")
                    try:
                        self._memory = TieredMemory.open(
                            self._dsn or self.path, session_id=self.session_id, user_id=self.user_id,
                            agent_id=self.agent_id, config=MemoryConfig(**self.config) if self.config else None,
                            summarizer=self._summarizer,
                            embedder=(self._embedder if self._embedder is not None else None) if self.vectors
                            else False,
                        )
                    except JournalError as e:
                        raise no_password_hint(self.path, self._dsn, type(self).__name__, e) from e
                memory = self._memory
        return memory

    async def _atiered(self) -> TieredMemory:
        if self._memory is not None:
            return self._memory
        return await asyncio.to_thread(lambda: self.tiered)

    @property
    def tokenizer_fn(self) -> Callable[[str], Sequence[int]]:
        """Token sequence of a text (``len()`` is the exact count); SimpleChatEngine sizes its prompt with it."""
        count = self.tiered.counter.count_text
        return lambda text: range(count(text))

    @property
    def last_context(self) -> Optional[Context]:
        """The :class:`langmem_tiers.Context` of the latest ``get()``: tokens per tier, what was left out."""
        return self._last_context

    def __bool__(self) -> bool:
        # Agents replace a falsy memory with a fresh ChatMemoryBuffer: never be falsy, even when empty.
        return True

    # --- BaseMemory -----------------------------------------------------------

    def get(self, input: Optional[str] = None, initial_token_count: int = 0, **kwargs: Any) -> List[ChatMessage]:
        """The budgeted history: window turns with summary and recall for ``input`` (or the newest user message).

        ``initial_token_count`` (what the caller's own prompt takes) shrinks the budget: fewer turns,
        less recall. When nothing but the current turn would fit, the current turn comes back alone,
        as ChatMemoryBuffer does, so the LLM reports the overflow; a prompt larger than the whole
        budget raises ``ValueError("Initial token count exceeds token limit ...")`` as there.
        """
        tiered = self.tiered
        budget = self._budget(tiered, initial_token_count)
        try:
            context = tiered.context(query=_query(input), budget=budget)
        except ConfigError:
            if not self._prompt_crowds_out(tiered, budget):
                raise
            self._last_context = None
            return _current_turn(tiered.window())
        self._last_context = context
        return render(context, self.insert_method)

    async def aget(self, input: Optional[str] = None, initial_token_count: int = 0,
                   **kwargs: Any) -> List[ChatMessage]:
        """Async :meth:`get`."""
        tiered = await self._atiered()
        budget = self._budget(tiered, initial_token_count)
        try:
            context = await tiered.acontext(query=_query(input), budget=budget)
        except ConfigError:
            if not self._prompt_crowds_out(tiered, budget):
                raise
            self._last_context = None
            return _current_turn(await asyncio.to_thread(tiered.window))
        self._last_context = context
        return render(context, self.insert_method)

    def get_all(self, status: Any = None) -> List[ChatMessage]:
        """Every stored message of the session, oldest first (the whole journal).

        ``status`` as in LlamaIndex's ``Memory``: ``MessageStatus.ACTIVE`` the messages still in
        the window (Memory's short-term queue), ``MessageStatus.ARCHIVED`` the evicted ones (in the
        summary and recall, still whole in the journal), ``None`` both.
        """
        wanted = status_of(status)
        tiered = self.tiered
        if wanted == "active":
            return [to_chat_message(m) for m in tiered.window()]
        messages = tiered.messages()
        if wanted == "archived":
            window = tiered.window()
            first = window[0].id if window else None
            messages = [m for m in messages if first is None or (m.id is not None and m.id < first)]
        return [to_chat_message(m) for m in messages]

    async def aget_all(self, status: Any = None) -> List[ChatMessage]:
        """Async :meth:`get_all`."""
        return await asyncio.to_thread(self.get_all, status)

    def put(self, message: ChatMessage) -> None:
        """Journal one chat message."""
        add_chat_messages(self.tiered, [message])

    async def aput(self, message: ChatMessage) -> None:
        """Async :meth:`put`."""
        await aadd_chat_messages(await self._atiered(), [message])

    def put_messages(self, messages: List[ChatMessage]) -> None:
        """Journal chat messages in one atomic append."""
        if messages:
            add_chat_messages(self.tiered, messages)

    async def aput_messages(self, messages: List[ChatMessage]) -> None:
        """Async :meth:`put_messages`."""
        if messages:
            await aadd_chat_messages(await self._atiered(), messages)

    def set(self, messages: List[ChatMessage]) -> None:
        """Make ``messages`` the session's history.

        Engines and agents pass ``chat_history=`` through here. When it starts with what the
        session already holds, only the new messages are appended: nothing is erased, and the
        summary, recall records and the user's memories stay. Otherwise the session's messages,
        summary and turn records are replaced; memories stored with ``remember()`` stay
        (``TieredMemory.clear(keep_memories=True)``).
        """
        tiered = self.tiered
        converted = _convert(messages)  # refuse bad input before anything is erased
        tail = _new_tail(converted, self.get_all())
        if tail is None:
            tiered.clear(keep_memories=True)
            tail = converted
        if tail:
            _add(tiered, tail)

    async def aset(self, messages: List[ChatMessage]) -> None:
        """Async :meth:`set`."""
        tiered = await self._atiered()
        converted = _convert(messages)  # refuse bad input before anything is erased
        tail = _new_tail(converted, await self.aget_all())
        if tail is None:
            await tiered.aclear(keep_memories=True)
            tail = converted
        if tail:
            await _aadd(tiered, tail)

    def reset(self, status: Any = None) -> None:
        """Erase this session: messages, summary, recall records.

        ``status`` (LlamaIndex ``Memory``'s argument) may only be ``None``: erasing just the window
        (``ACTIVE``) or just the evicted messages (``ARCHIVED``) would leave a summary and recall
        records built from erased text, so it is refused; ``tiered.forget(record_id)`` erases one
        recalled turn or memory.
        """
        self._refuse_partial_reset(status)
        self.tiered.clear()

    async def areset(self, status: Any = None) -> None:
        """Async :meth:`reset`."""
        self._refuse_partial_reset(status)
        await (await self._atiered()).aclear()

    @staticmethod
    def _refuse_partial_reset(status: Any) -> None:
        if status_of(status) is not None:
            raise ConfigError(f"reset(status={status!r}) would erase part of the session and keep the summary "
                              "and recall built from it: call reset() for the whole session, or "
                              "memory.tiered.forget(record_id) for one recalled turn or memory")

    # --- extras ----------------------------------------------------------------

    def search(self, query: str, k: int = 5, **options: Any) -> list[Any]:
        """Recall hits for ``query`` (see :meth:`langmem_tiers.TieredMemory.search`)."""
        return self.tiered.search(query, k, **options)

    def flush(self) -> None:
        """Summarize and index everything pending."""
        self.tiered.flush()

    def close(self) -> None:
        """Release the journal; a later call opens it again."""
        with self._lock:
            memory, self._memory = self._memory, None
        if memory is not None:
            memory.close()

    def _budget(self, tiered: TieredMemory, initial_token_count: Any) -> Optional[int]:
        initial = initial_token_count or 0
        if isinstance(initial, bool) or not isinstance(initial, int) or initial < 0:
            raise ConfigError(f"initial_token_count ({initial_token_count!r}) must be a whole number of tokens >= 0")
        if not initial:
            return None
        limit = tiered.config.context_tokens
        if initial > limit:
            # LlamaIndex's own words (ChatMemoryBuffer), so callers matching on them keep working.
            raise ConfigError(f"Initial token count exceeds token limit: the prompt takes {initial} tokens, the "
                              f"context budget is {limit}: shorten the prompt or raise token_limit "
                              "(MemoryConfig.context_tokens)")
        # The caller counted its prompt's text only: add the framing of the message that carries it.
        return limit - initial - _framing(tiered)

    @staticmethod
    def _prompt_crowds_out(tiered: TieredMemory, budget: Optional[int]) -> bool:
        """Whether a ConfigError of context() means: the caller's prompt left no room for the current turn."""
        return budget is not None and tiered.config.oversize_policy != "error"


# --- shared with the memory block ---------------------------------------------


def render(context: Context, insert_method: InsertMethod = "user") -> List[ChatMessage]:
    """ChatMessages for a core context, the memory text placed by ``insert_method``."""
    memory_text = ""
    out: List[ChatMessage] = []
    for m in context.messages:
        if is_memory_message(m):
            memory_text = m.text
        else:
            out.append(to_chat_message(m))
    if not memory_text:
        return out
    if insert_method == "system" or (out and out[0].role.value == "system"):
        if out and out[0].role.value == "system":
            out[0].blocks = [*out[0].blocks, TextBlock(text="\n\n" + memory_text)]
        else:
            out.insert(0, ChatMessage(role="system", content=memory_text))
        return out
    first_user = next((m for m in out if m.role.value == "user"), None)
    if first_user is not None:
        first_user.blocks = [TextBlock(text=memory_text + "\n\n"), *first_user.blocks]
    else:
        out.insert(0, ChatMessage(role="user", content=memory_text))
    return out


def _strip_memory(message: ChatMessage) -> ChatMessage:
    """Drop the memory text ``render`` added, should a caller store what ``get()`` returned."""
    blocks = message.blocks
    if len(blocks) < 2:
        return message

    def ours(b: Any) -> bool:
        return isinstance(b, TextBlock) and is_memory_text(b.text)

    if ours(blocks[0]):
        return message.model_copy(update={"blocks": blocks[1:]})
    if message.role.value == "system" and ours(blocks[-1]):
        return message.model_copy(update={"blocks": blocks[:-1]})
    return message


def _convert(messages: Sequence[ChatMessage]) -> List[Message]:
    for m in messages:
        if not isinstance(m, ChatMessage):
            raise InvalidMessageError(f"expected a LlamaIndex ChatMessage, got {type(m).__name__}")
    return [from_chat_message(_strip_memory(m)) for m in messages]


def _orphans_as_text(messages: List[Message]) -> Optional[List[Message]]:
    """Tool results whose call the journal no longer has in its window, stored as assistant text."""
    calls = {c.id for m in messages for c in m.tool_calls}
    out, changed = [], False
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in calls:
            meta = dict(m.metadata.get(META_KEY) or {})
            meta["role"] = meta.get("role", "tool")
            meta["kwargs"] = {**(meta.get("kwargs") or {}), "tool_call_id": m.tool_call_id}
            m = Message.from_dict({"role": "assistant", "content": m.content or "(empty tool result)",
                                   "name": m.name, "metadata": {**m.metadata, META_KEY: meta}, "key": m.key})
            changed = True
        out.append(m)
    return out if changed else None


def add_chat_messages(memory: TieredMemory, messages: Sequence[ChatMessage]) -> None:
    """Journal LlamaIndex chat messages in one atomic append (tool results whose call is gone stored as text)."""
    _add(memory, _convert(messages))


def _add(memory: TieredMemory, converted: List[Message]) -> None:
    try:
        memory.add_messages(converted)
    except InvalidMessageError as e:
        retry = _orphans_as_text(converted) if "unknown call" in str(e) else None
        if retry is None:
            raise
        memory.add_messages(retry)


def _new_tail(converted: List[Message], stored: List[ChatMessage]) -> Optional[List[Message]]:
    """What ``set()`` appends when ``converted`` starts with the ``stored`` history; ``None`` when it does not."""
    if len(converted) < len(stored):
        return None
    # Compare in the journal's form (JSON additional_kwargs, memory text stripped).
    if [to_chat_message(m) for m in converted[:len(stored)]] != stored:
        return None
    return converted[len(stored):]


def _current_turn(window: List[Message]) -> List[ChatMessage]:
    """The newest user message and what follows it (the turn the caller is answering)."""
    start = max((i for i, m in enumerate(window) if m.role == "user"), default=max(len(window) - 1, 0))
    return [to_chat_message(m) for m in window[start:]]


def _framing(tiered: TieredMemory) -> int:
    """Tokens the counter adds around one message's text (role, separators)."""
    counter = tiered.counter
    return counter.count_message(Message("system", "x")) - counter.count_text("x")


async def aadd_chat_messages(memory: TieredMemory, messages: Sequence[ChatMessage]) -> None:
    """Async :func:`add_chat_messages`."""
    await _aadd(memory, _convert(messages))


async def _aadd(memory: TieredMemory, converted: List[Message]) -> None:
    try:
        await memory.aadd_messages(converted)
    except InvalidMessageError as e:
        retry = _orphans_as_text(converted) if "unknown call" in str(e) else None
        if retry is None:
            raise
        await memory.aadd_messages(retry)


def _query(input: Any) -> Optional[str]:
    if isinstance(input, ChatMessage):
        input = input.content
    return input if isinstance(input, str) and input.strip() else None


def split_password(data: Dict[str, Any]) -> Optional[str]:
    """Take the password out of ``data["path"]`` (a PostgreSQL URL) and return the full URL, which the
    caller keeps in memory only; ``None`` when the path holds no password."""
    path = data.get("path")
    if not isinstance(path, (str, Path)) or not _has_password(str(path)):
        return None
    data["path"] = _without_password(str(path))
    return str(path)


def no_password_hint(path: Optional[str], dsn: Optional[str], owner: str, error: JournalError) -> JournalError:
    """The error to raise when opening ``path`` failed: a clear one when a serialised PostgreSQL URL lost
    its password by design and libpq found none, else ``error`` itself."""
    if dsn is not None or not _is_postgres(path) or os.environ.get("PGPASSWORD"):
        return error
    return JournalError(
        f"cannot reopen the PostgreSQL journal {path}: a serialised {owner} keeps no password (by design), "
        f"and none was found. Set PGPASSWORD (or ~/.pgpass), or pass the full URL: "
        f"{owner}.from_dict(data, path='postgresql://user:password@...') ({error})"
    )


def _is_postgres(path: Optional[str]) -> bool:
    return path is not None and path.startswith(("postgresql://", "postgres://"))


def _has_password(path: str) -> bool:
    try:
        return _is_postgres(path) and urlsplit(path).password is not None
    except ValueError:
        return False


def _without_password(url: str) -> str:
    """The URL as ``TieredMemory.location`` gives it: the same, with no password."""
    parts = urlsplit(url)
    credentials, host = parts.netloc.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    netloc = f"{user}@{host}" if user else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
