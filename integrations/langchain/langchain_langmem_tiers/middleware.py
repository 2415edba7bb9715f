"""``TieredMemoryMiddleware``: tiered memory for ``langchain.agents.create_agent``."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.runtime import Runtime
from langmem_tiers import Context, MemoryConfig, Message, TieredMemory

from langchain_langmem_tiers.messages import LC_KEY, from_langchain, is_memory_message, to_langchain

DEFAULT_THREAD_ID = "default"


class TieredMemoryMiddleware(AgentMiddleware):
    """Durable, token-budgeted memory for ``create_agent``, one session per ``thread_id``.

    * Journaling: every message that enters the agent state (user input, model
      replies, tool results) is appended once to the session's journal, keyed by its
      LangChain message id, in ``before_model`` / ``after_model`` / ``after_agent``.
    * Model input: in ``wrap_model_call`` the request's messages are replaced by the
      budgeted context (window of recent whole turns; tool calls travel with their
      results); pinned facts, the rolling summary and turns recalled for the latest user
      message are appended to the system message. The agent state is never rewritten,
      so a checkpointer still holds the whole thread and the journal holds everything.
    * Without a checkpointer, pass only the new messages each call: the journal
      supplies the earlier turns. Without a ``thread_id`` the session is
      ``default_thread_id``.

    The system prompt and tool schemas are outside the memory budget: size
    ``config.context_tokens`` to what is left of the model's window.

    Example:
        >>> import tempfile
        >>> from langchain.agents import create_agent
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> middleware = TieredMemoryMiddleware(tempfile.mkdtemp(), embedder=False)
        >>> agent = create_agent(FakeListChatModel(responses=["Hi Ada!"]), middleware=[middleware])
        >>> out = agent.invoke({"messages": [("user", "I am Ada")]}, {"configurable": {"thread_id": "t1"}})
        >>> [m.role for m in middleware.memory_for("t1").messages()]
        ['user', 'assistant']
        >>> middleware.close()
    """

    def __init__(
        self,
        path: str | Path,
        config: MemoryConfig | None = None,
        user_id: str | None = None,
        *,
        agent_id: str | None = None,
        default_thread_id: str = DEFAULT_THREAD_ID,
        budget: int | None = None,
        **memory_kwargs: Any,
    ) -> None:
        """Set up memory under ``path``; sessions open lazily, one per ``thread_id``.

        Args:
            path: folder for the SQLite journal and embedded Chroma (or a PostgreSQL URL).
            config: budgets (:class:`langmem_tiers.MemoryConfig`).
            user_id / agent_id: the namespace around every session (recall never crosses it).
            default_thread_id: session used when the run has no ``thread_id``.
            budget: token budget of the model input; default ``config.context_tokens``.
            **memory_kwargs: passed to :meth:`langmem_tiers.TieredMemory.open` (``summarizer``,
                ``embedder``, ``chroma``, ``counter``).
        """
        super().__init__()
        self.path = path
        self.config = config
        self.user_id = user_id
        self.agent_id = agent_id
        self.default_thread_id = default_thread_id
        self.budget = budget
        self.memory_kwargs = memory_kwargs
        self._memories: dict[str, TieredMemory] = {}
        self._root: TieredMemory | None = None
        self._journaled: dict[str, set[str]] = {}
        self._lock = threading.RLock()
        self.last_context: Context | None = None

    # --- sessions -------------------------------------------------------------

    def memory_for(self, thread_id: str) -> TieredMemory:
        """The (lazily opened) memory of one thread."""
        with self._lock:
            memory = self._memories.get(thread_id)
            if memory is None:
                # The first thread opens the journal and Chroma; the others share them.
                if self._root is None:
                    memory = self._root = TieredMemory.open(
                        self.path,
                        session_id=thread_id,
                        user_id=self.user_id,
                        agent_id=self.agent_id,
                        config=self.config,
                        **self.memory_kwargs,
                    )
                else:
                    memory = self._root.for_session(thread_id)
                # Ids already journaled (by an earlier process) are not journaled again.
                self._journaled[thread_id] = {
                    lc["id"]
                    for m in memory.iter_messages()
                    if isinstance(lc := m.metadata.get(LC_KEY), dict) and lc.get("id")
                }
                self._memories[thread_id] = memory
            return memory

    def thread_id(self, runtime: Runtime[Any] | None) -> str:
        """The run's ``thread_id``, from the runtime or the run config; else ``default_thread_id``."""
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        if thread:
            return str(thread)
        try:
            from langgraph.config import get_config

            thread = (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:  # called outside a runnable context
            thread = None
        return str(thread) if thread else self.default_thread_id

    def close(self) -> None:
        """Close every opened session."""
        with self._lock:
            for memory in self._memories.values():
                if memory is not self._root:
                    memory.close()
            if self._root is not None:
                self._root.close()
                self._root = None
            self._memories.clear()
            self._journaled.clear()

    # --- journaling -----------------------------------------------------------

    def _unjournaled(
        self, thread: str, messages: Iterable[AnyMessage]
    ) -> tuple[TieredMemory, list[Message], list[str]]:
        memory = self.memory_for(thread)
        seen = self._journaled[thread]
        new, ids = [], []
        for m in messages:
            if isinstance(m, RemoveMessage) or is_memory_message(m) or (m.id and m.id in seen):
                continue
            new.append(from_langchain(m))
            if m.id:
                ids.append(m.id)
        return memory, new, ids

    def _journal(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> None:
        thread = self.thread_id(runtime)
        with self._lock:
            memory, new, ids = self._unjournaled(thread, state.get("messages", ()))
            if new:
                memory.add_messages(new)
                self._journaled[thread].update(ids)

    async def _ajournal(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> None:
        thread = self.thread_id(runtime)
        # The lock only guards the id sets; a thread runs its nodes one after another.
        memory, new, ids = self._unjournaled(thread, state.get("messages", ()))
        if new:
            await memory.aadd_messages(new)
            self._journaled[thread].update(ids)

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Journal the user input and tool results that arrived since the last model call."""
        self._journal(state, runtime)
        return None

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._ajournal(state, runtime)
        return None

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Journal the model's reply."""
        self._journal(state, runtime)
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._ajournal(state, runtime)
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Journal whatever the last step added (e.g. a ``return_direct`` tool result)."""
        self._journal(state, runtime)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._ajournal(state, runtime)
        return None

    # --- model input ----------------------------------------------------------

    def _request(self, request: ModelRequest[Any], context: Context) -> ModelRequest[Any]:
        self.last_context = context
        by_id = {m.id: m for m in request.messages if m.id}
        memory_text = ""
        messages: list[AnyMessage] = []
        for m in context.messages:
            if m.metadata.get("langmem_tiers") == "memory":
                memory_text = m.text
                continue
            lc = to_langchain(m)
            # Prefer the state's own object (identical content, keeps provider extras untouched).
            messages.append(by_id.get(lc.id, lc) if lc.id else lc)  # type: ignore[arg-type]
        seen = {m.id for m in messages}
        journaled = self._journaled.get(self.thread_id(request.runtime), set())
        # Messages another middleware put into the request (never journaled) stay, at the end.
        messages += [
            m
            for m in request.messages
            if m.id not in seen and (not m.id or m.id not in journaled) and not isinstance(m, SystemMessage)
        ]
        system = request.system_message
        if memory_text:
            text = f"{system.text}\n\n{memory_text}" if system is not None else memory_text
            system = SystemMessage(text)
        return request.override(messages=messages, system_message=system)

    @staticmethod
    def _query(request: ModelRequest[Any]) -> str | None:
        for m in reversed(request.messages):
            if isinstance(m, HumanMessage):
                return m.text or None
        return None

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        """Send the budgeted context instead of the raw state messages."""
        thread = self.thread_id(request.runtime)
        memory = self.memory_for(thread)
        self._journal(request.state, request.runtime)
        context = memory.context(self._query(request), self.budget)
        return handler(self._request(request, context))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        thread = self.thread_id(request.runtime)
        memory = self.memory_for(thread)
        await self._ajournal(request.state, request.runtime)
        context = await memory.acontext(self._query(request), self.budget)
        return await handler(self._request(request, context))
