"""``TieredChatMessageHistory``: a durable, token-budgeted ``BaseChatMessageHistory``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from langmem_tiers import Context, MemoryConfig, TieredMemory

from langchain_langmem_tiers.messages import messages_from_langchain, messages_to_langchain
from langchain_langmem_tiers.sessions import DEFAULT_MAX_SESSIONS, SessionPool

View = Literal["context", "full"]


class TieredChatMessageHistory(BaseChatMessageHistory):
    """Chat history backed by a :class:`langmem_tiers.TieredMemory` (journal + summary + recall + window).

    ``add_messages`` appends durably to the journal (committed before it returns); a
    message's LangChain id is its idempotency key, so adding it again (a retry) stores
    nothing. ``messages`` returns, with ``view="context"`` (the default), the budgeted
    context: one system message holding pinned facts, the rolling summary and recalled
    turns (from this user's sessions, as ``config.recall_scope`` says), then the window of
    recent whole turns. With ``view="full"`` it returns every journaled message.

    Fresh and cheap: the context view is cached with the session's version stamp
    (:meth:`langmem_tiers.TieredMemory.version`, one indexed read) and rebuilt only when
    the session changed, through this object, another object or another process (a
    write or a ``clear()`` elsewhere shows on the next read).

    Recall keyed on the question being answered: plain ``RunnableWithMessageHistory``
    reads the history before it adds the new input, so recall would be keyed on the
    previous question; and it slices each run's input by the length of a second read
    of ``messages`` after the run, which is rebuilt if the session changed meanwhile
    (another writer, a background summary). Use
    :class:`~langchain_langmem_tiers.TieredRunnableWithMessageHistory` (same arguments),
    which gives each request its own view holding the context of that request's input
    (:meth:`request_view`, :meth:`load_context`), or :meth:`context_messages` with ``query=``.

    Deprecation: ``BaseChatMessageHistory`` is deprecated since langchain-core 1.6.4
    and ``RunnableWithMessageHistory`` since 1.3.3 (both removed in 2.0). This class
    is for existing chains; new agents should use ``create_agent`` with
    :class:`~langchain_langmem_tiers.TieredMemoryMiddleware`.

    Example:
        >>> import tempfile
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = TieredChatMessageHistory.open(tempfile.mkdtemp(), session_id="s1", embedder=False)
        >>> history.add_messages([HumanMessage("My name is Ada."), AIMessage("Hello Ada!")])
        >>> [m.type for m in history.messages]
        ['human', 'ai']
        >>> history.close()
    """

    def __init__(
        self,
        memory: TieredMemory,
        *,
        view: View = "context",
        budget: int | None = None,
        owns_memory: bool = False,
    ) -> None:
        """Wrap an open memory.

        Args:
            memory: the session's memory.
            view: ``"context"`` (budgeted: summary + recall + window) or ``"full"`` (whole journal).
            budget: token budget of the context view; default ``memory.config.context_tokens``.
            owns_memory: close ``memory`` in :meth:`close`.
        """
        if view not in ("context", "full"):
            raise ValueError(f"view ({view!r}) must be 'context' or 'full'")
        super().__init__()
        self.memory = memory
        self.view: View = view
        self.budget = budget
        self._owns_memory = owns_memory
        self._cache: list[BaseMessage] | None = None
        self._cache_version: int | None = None
        # True while the cache holds a context loaded for one input (load_context): it is served
        # as is until the next write through this object, whatever else writes the session.
        self._held = False
        self._last_context: Context | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        session_id: str,
        user_id: str | None = None,
        config: MemoryConfig | None = None,
        view: View = "context",
        budget: int | None = None,
        **memory_kwargs: Any,
    ) -> TieredChatMessageHistory:
        """Open (or create) one session's history under ``path``.

        Args:
            path: folder for the SQLite journal and embedded Chroma (or a PostgreSQL URL).
            session_id: the session; user_id: its user (recall never crosses users).
            config: budgets and ``recall_scope`` (:class:`langmem_tiers.MemoryConfig`).
            view / budget: see the constructor.
            **memory_kwargs: passed to :meth:`langmem_tiers.TieredMemory.open` (``agent_id``,
                ``summarizer``, ``embedder``, ``chroma``, ``counter``).
        """
        memory = TieredMemory.open(
            path, session_id=session_id, user_id=user_id, config=config, **memory_kwargs
        )
        return cls(memory, view=view, budget=budget, owns_memory=True)

    @classmethod
    def factory(
        cls,
        path: str | Path,
        *,
        user_id: str | None = None,
        config: MemoryConfig | None = None,
        view: View = "context",
        budget: int | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        **memory_kwargs: Any,
    ) -> SessionHistoryFactory:
        """A ``get_session_history`` callable for ``RunnableWithMessageHistory``.

        ``get_history(session_id, user_id=None)`` opens each ``(user, session)`` once and
        hands back the same history object on every call; the journal and Chroma are
        opened once per process. ``user_id`` defaults to the factory's; pass it per request
        with ``history_factory_config`` (see the README). At most ``max_sessions`` sessions
        stay open (least recently used first out).

        Example:
            >>> import tempfile
            >>> get_history = TieredChatMessageHistory.factory(tempfile.mkdtemp(), embedder=False)
            >>> get_history("s1") is get_history("s1")
            True
            >>> get_history.close()
        """
        return SessionHistoryFactory(
            path, user_id=user_id, config=config, view=view, budget=budget, max_sessions=max_sessions,
            memory_kwargs=memory_kwargs,
        )

    # --- reading --------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:
        """The context view (rebuilt when the session changed) or the full history."""
        if self.view == "full":
            return messages_to_langchain(self.memory.messages())
        with self._lock:
            if self._held and self._cache is not None:
                return list(self._cache)
            # The stamp is read before the context: a write in between leaves the cache older
            # than its stamp says, so the next read rebuilds it (never the other way round).
            version = self.memory.version()
            if self._cache is None or version != self._cache_version:
                self._store(self.memory.context(budget=self.budget), version)
            assert self._cache is not None
            return list(self._cache)

    @messages.setter
    def messages(self, messages: Sequence[BaseMessage]) -> None:
        """Replace the session's messages, as ``InMemoryChatMessageHistory.messages = [...]`` does.

        The session's messages, summary and turn records are cleared (explicit ``remember()``
        memories stay: ``TieredMemory.clear(keep_memories=True)``) and ``messages`` are added
        as one batch.
        The new messages are converted (and so validated) before anything is erased; if
        the journal refuses the batch, the previous messages are put back and the error
        is raised.
        """
        converted = messages_from_langchain(messages)
        previous = self.memory.messages()
        self.memory.clear(keep_memories=True)
        try:
            if converted:
                self.memory.add_messages(converted)
        except BaseException:
            if previous:
                self.memory.add_messages(previous)
            raise
        finally:
            self.refresh()

    async def aget_messages(self) -> list[BaseMessage]:
        """Async :attr:`messages`."""
        if self.view == "full":
            return messages_to_langchain(await asyncio.to_thread(self.memory.messages))
        with self._lock:
            if self._held and self._cache is not None:
                return list(self._cache)
            cached, cached_version = self._cache, self._cache_version
        version = await asyncio.to_thread(self.memory.version)
        if cached is not None and version == cached_version:
            return list(cached)
        context = await self.memory.acontext(budget=self.budget)
        with self._lock:
            if not self._held:
                self._store(context, version)
            return messages_to_langchain(context.messages)

    def load_context(self, query: str | None) -> list[BaseMessage]:
        """Assemble the context with recall for ``query`` and hold it as :attr:`messages`.

        The held list is served until the next ``add_messages`` / ``clear`` through this
        object, so the two reads ``RunnableWithMessageHistory`` makes in one request see
        the same messages. Meant for a per-request history (:meth:`request_view`);
        ``view="full"`` holds the whole journal. ``query=None`` keys recall on the last
        stored user message.
        """
        if self.view == "full":
            held = messages_to_langchain(self.memory.messages())
            with self._lock:
                self._cache, self._held = held, True
            return list(held)
        context = self.memory.context(query, self.budget)
        with self._lock:
            self._store(context, None)
            self._held = True
            return list(self._cache or [])

    async def aload_context(self, query: str | None) -> list[BaseMessage]:
        """Async :meth:`load_context`."""
        if self.view == "full":
            held = messages_to_langchain(await asyncio.to_thread(self.memory.messages))
            with self._lock:
                self._cache, self._held = held, True
            return list(held)
        context = await self.memory.acontext(query, self.budget)
        with self._lock:
            self._store(context, None)
            self._held = True
            return list(self._cache or [])

    def request_view(self) -> TieredChatMessageHistory:
        """A new history on the same memory (not owned: closing it closes nothing).

        One per request keeps what :meth:`load_context` holds private to that request, so
        concurrent requests on one session each get recall for their own input.
        """
        return TieredChatMessageHistory(self.memory, view=self.view, budget=self.budget)

    def _store(self, context: Context, version: int | None) -> None:
        self._last_context = context
        self._cache = messages_to_langchain(context.messages)
        self._cache_version = version

    @property
    def last_context(self) -> Context | None:
        """The :class:`langmem_tiers.Context` behind the last view (tokens per tier, omissions)."""
        return self._last_context

    def context_messages(self, query: str | None = None, budget: int | None = None) -> list[BaseMessage]:
        """The budgeted context with recall for ``query`` (uncached, does not touch :attr:`messages`).

        :attr:`last_context` then describes this context.
        """
        context = self.memory.context(query, budget if budget is not None else self.budget)
        self._last_context = context
        return messages_to_langchain(context.messages)

    async def acontext_messages(
        self, query: str | None = None, budget: int | None = None
    ) -> list[BaseMessage]:
        """Async :meth:`context_messages`."""
        context = await self.memory.acontext(query, budget if budget is not None else self.budget)
        self._last_context = context
        return messages_to_langchain(context.messages)

    def refresh(self) -> None:
        """Drop the cached (or held) view; the next read assembles it again."""
        with self._lock:
            self._cache = None
            self._cache_version = None
            self._held = False

    # --- writing --------------------------------------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages to the journal atomically (the context memory message is skipped).

        A message whose LangChain id this session already holds is not stored again.
        """
        converted = messages_from_langchain(messages)
        if converted:
            self.memory.add_messages(converted)
        self.refresh()

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async :meth:`add_messages`."""
        converted = messages_from_langchain(messages)
        if converted:
            await self.memory.aadd_messages(converted)
        self.refresh()

    def clear(self) -> None:
        """Erase the session: messages, summary, recall records."""
        self.memory.clear()
        self.refresh()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.memory.aclear()
        self.refresh()

    def close(self) -> None:
        """Close the memory if this history opened it."""
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> TieredChatMessageHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SessionHistoryFactory:
    """``get_session_history`` for ``RunnableWithMessageHistory``: one history per ``(user, session)``.

    Built by :meth:`TieredChatMessageHistory.factory`; thread-safe; keeps at most
    ``max_sessions`` sessions open (least recently used first out); :meth:`close` closes all.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        user_id: str | None,
        config: MemoryConfig | None,
        view: View,
        budget: int | None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        memory_kwargs: dict[str, Any],
    ) -> None:
        if view not in ("context", "full"):
            raise ValueError(f"view ({view!r}) must be 'context' or 'full'")
        self.view: View = view
        self.budget = budget
        self._pool: SessionPool[TieredChatMessageHistory] = SessionPool(
            path,
            lambda memory: TieredChatMessageHistory(memory, view=self.view, budget=self.budget),
            lambda history: history.memory,
            user_id=user_id, agent_id=memory_kwargs.pop("agent_id", None), config=config,
            max_sessions=max_sessions, memory_kwargs=memory_kwargs,
        )

    @property
    def user_id(self) -> str | None:
        """The user of sessions asked for without one."""
        return self._pool.user_id

    def __call__(self, session_id: str, user_id: str | None = None) -> TieredChatMessageHistory:
        """The history of ``session_id`` for ``user_id`` (default: the factory's user).

        Two users' sessions with the same ``session_id`` are two sessions; ids are compared
        as text (``7`` and ``"7"`` are one session).
        """
        return self._pool.get(session_id, user_id)

    def close(self) -> None:
        """Close every opened session (the shared journal last)."""
        self._pool.close()
