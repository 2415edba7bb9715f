"""``TieredChatMessageHistory``: a durable, token-budgeted ``BaseChatMessageHistory``."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from langmem_tiers import Context, MemoryConfig, TieredMemory

from langchain_langmem_tiers.messages import messages_from_langchain, messages_to_langchain

View = Literal["context", "full"]


class TieredChatMessageHistory(BaseChatMessageHistory):
    """Chat history backed by a :class:`langmem_tiers.TieredMemory` (journal + summary + recall + window).

    ``add_messages`` appends durably to the journal (committed before it returns).
    ``messages`` returns, with ``view="context"`` (the default), the budgeted context:
    one system message holding pinned facts, the rolling summary and turns recalled
    for the latest stored user message, then the window of recent whole turns. With
    ``view="full"`` it returns every journaled message.

    Stable within a turn: ``RunnableWithMessageHistory`` reads ``messages`` before the
    call and again afterwards, slicing the run's input by the length of the second
    read. This class caches the context view and serves the same list until the next
    ``add_messages`` / ``clear`` through this object, so both reads agree even if
    indexing or recall changed in between. Call :meth:`refresh` to drop the cache
    (e.g. when another process writes the same session).

    Recall with ``RunnableWithMessageHistory`` is keyed on the last *stored* user
    message, because the history is read before the new input is known. For recall
    keyed on the current question use :class:`~langchain_langmem_tiers.TieredMemoryMiddleware`
    or :meth:`context_messages` with ``query=``.

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
            config: budgets (:class:`langmem_tiers.MemoryConfig`).
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
        **memory_kwargs: Any,
    ) -> SessionHistoryFactory:
        """A ``get_session_history`` callable for ``RunnableWithMessageHistory``.

        It opens each session once and hands back the same history object on every
        call, so the journal and Chroma are opened once per process.

        Example:
            >>> import tempfile
            >>> get_history = TieredChatMessageHistory.factory(tempfile.mkdtemp(), embedder=False)
            >>> get_history("s1") is get_history("s1")
            True
            >>> get_history.close()
        """
        return SessionHistoryFactory(
            path, user_id=user_id, config=config, view=view, budget=budget, memory_kwargs=memory_kwargs
        )

    # --- reading --------------------------------------------------------------

    @property  # type: ignore[override]
    def messages(self) -> list[BaseMessage]:
        """The context view (cached until the next add) or the full history."""
        if self.view == "full":
            return messages_to_langchain(self.memory.messages())
        with self._lock:
            if self._cache is None:
                self._last_context = self.memory.context(budget=self.budget)
                self._cache = messages_to_langchain(self._last_context.messages)
            return list(self._cache)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async :attr:`messages`."""
        if self.view == "full":
            import asyncio

            return messages_to_langchain(await asyncio.to_thread(self.memory.messages))
        if self._cache is None:
            context = await self.memory.acontext(budget=self.budget)
            with self._lock:
                if self._cache is None:
                    self._last_context = context
                    self._cache = messages_to_langchain(context.messages)
        return list(self._cache)

    @property
    def last_context(self) -> Context | None:
        """The :class:`langmem_tiers.Context` behind the cached view (tokens per tier, omissions)."""
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
        """Forget the cached context view; the next read assembles it again."""
        with self._lock:
            self._cache = None

    # --- writing --------------------------------------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages to the journal atomically (the context memory message is skipped)."""
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
    """``get_session_history`` for ``RunnableWithMessageHistory``: one history per ``session_id``.

    Built by :meth:`TieredChatMessageHistory.factory`; thread-safe; :meth:`close` closes all.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        user_id: str | None,
        config: MemoryConfig | None,
        view: View,
        budget: int | None,
        memory_kwargs: dict[str, Any],
    ) -> None:
        self.path = path
        self.user_id = user_id
        self.config = config
        self.view: View = view
        self.budget = budget
        self.memory_kwargs = memory_kwargs
        self._histories: dict[str, TieredChatMessageHistory] = {}
        self._root: TieredMemory | None = None
        self._lock = threading.Lock()

    def __call__(self, session_id: str) -> TieredChatMessageHistory:
        with self._lock:
            history = self._histories.get(session_id)
            if history is None:
                # The first session opens the journal and Chroma; the others share them.
                if self._root is None:
                    self._root = TieredMemory.open(
                        self.path, session_id=session_id, user_id=self.user_id, config=self.config,
                        **self.memory_kwargs,
                    )
                    memory = self._root
                else:
                    memory = self._root.for_session(session_id)
                history = TieredChatMessageHistory(
                    memory, view=self.view, budget=self.budget, owns_memory=True
                )
                self._histories[session_id] = history
            return history

    def close(self) -> None:
        """Close every opened session (the shared journal last)."""
        with self._lock:
            for history in self._histories.values():
                if history.memory is not self._root:
                    history.close()
            if self._root is not None:
                self._root.close()
                self._root = None
            self._histories.clear()
