"""``TieredMemoryMiddleware``: tiered memory for ``langchain.agents.create_agent``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.runtime import Runtime
from langmem_tiers import Context, InvalidNamespaceError, MemoryConfig, Message, TieredMemory

from langchain_langmem_tiers.messages import from_langchain, is_memory_message, to_langchain
from langchain_langmem_tiers.sessions import DEFAULT_MAX_SESSIONS, SessionPool, as_id

DEFAULT_THREAD_ID = "default"


@dataclass
class _Thread:
    """One session's state in this process: its memory and the message ids already journaled."""

    memory: TieredMemory
    # Only spares re-sending a checkpointed state on every hook: the journal itself refuses a
    # second copy of a message id (the id is its idempotency key), also across processes.
    journaled: set[str] = field(default_factory=set)


class TieredMemoryMiddleware(AgentMiddleware):
    """Durable, token-budgeted memory for ``create_agent``, one session per user and ``thread_id``.

    * Identity: the session is ``(user, thread_id)``. The user comes from the run:
      LangGraph Server's authenticated user (``runtime.server_info.user.identity``),
      ``config["configurable"]["user_id"]`` or a ``user_id`` in the runtime context
      (``create_agent(context_schema=...)``); all that are given must agree (else
      :class:`langmem_tiers.InvalidNamespaceError`); without any, the middleware's own
      ``user_id``; without that, the session has no user and is its own private scope.
      Two users with the same ``thread_id`` never share a session. Ids are compared as
      text: ``thread_id`` 7 and ``"7"`` are one session.
    * Journaling: every message that enters the agent state (user input, model
      replies, tool results) is appended once to the session's journal, keyed by its
      LangChain message id, in ``before_model`` / ``after_model`` / ``after_agent``.
    * Model input: in ``wrap_model_call`` the request's messages are replaced by the
      budgeted context (window of recent whole turns; tool calls travel with their
      results); pinned facts, the rolling summary and memories recalled for the latest
      user message (from the user's sessions, as ``config.recall_scope`` says) are
      appended to the system message. The agent state is never rewritten, so a
      checkpointer still holds the whole thread and the journal holds everything.
    * Without a checkpointer, pass only the new messages each call: the journal
      supplies the earlier turns. Without a ``thread_id`` the session is
      ``default_thread_id``.
    * At most ``max_sessions`` sessions stay open in this process (least recently used
      first out; one reopens on its next request with nothing lost).

    The system prompt and tool schemas are outside the memory budget: size
    ``config.context_tokens`` to what is left of the model's window.

    Example:
        >>> import tempfile
        >>> from langchain.agents import create_agent
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> middleware = TieredMemoryMiddleware(tempfile.mkdtemp(), embedder=False)
        >>> agent = create_agent(FakeListChatModel(responses=["Hi Ada!"]), middleware=[middleware])
        >>> cfg = {"configurable": {"thread_id": "t1", "user_id": "ada"}}
        >>> out = agent.invoke({"messages": [("user", "I am Ada")]}, cfg)
        >>> [m.role for m in middleware.memory_for("t1", user_id="ada").messages()]
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
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        memory_tools: bool | Mapping[str, str] = False,
        **memory_kwargs: Any,
    ) -> None:
        """Set up memory under ``path``; sessions open lazily, one per user and ``thread_id``.

        Args:
            path: folder for the SQLite journal and embedded Chroma (or a PostgreSQL URL).
            config: budgets and ``recall_scope`` (:class:`langmem_tiers.MemoryConfig`).
            user_id: the user of runs that name none (see the class docstring).
            agent_id: the agent around every session (``recall_scope="agent"`` stays within it).
            default_thread_id: session used when the run has no ``thread_id``.
            budget: token budget of the model input; default ``config.context_tokens``.
            max_sessions: sessions kept open in this process (LRU), default 1024.
            memory_tools: also give the agent the ``remember`` / ``recall`` / ``forget`` tools of
                :func:`~langchain_langmem_tiers.tools.create_memory_tools`, acting on the run's user;
                a mapping renames them (``{"recall": "search_memory"}``).
            **memory_kwargs: passed to :meth:`langmem_tiers.TieredMemory.open` (``summarizer``,
                ``embedder``, ``chroma``, ``counter``).
        """
        super().__init__()
        self.path = path
        self.config = config
        self.agent_id = agent_id
        self.default_thread_id = as_id(default_thread_id, "default_thread_id")
        self.budget = budget
        self.memory_kwargs = memory_kwargs
        self._sessions: SessionPool[_Thread] = SessionPool(
            path, _Thread, lambda thread: thread.memory, user_id=user_id, agent_id=agent_id,
            config=config, max_sessions=max_sessions, memory_kwargs=memory_kwargs,
        )
        self.last_context: Context | None = None
        if memory_tools:
            from langchain_langmem_tiers.tools import create_memory_tools

            names = memory_tools if isinstance(memory_tools, Mapping) else None
            self.tools = create_memory_tools(self, names=names)

    @property
    def user_id(self) -> str | None:
        """The user of runs that name none."""
        return self._sessions.user_id

    @property
    def max_sessions(self) -> int:
        """How many sessions stay open in this process."""
        return self._sessions.max_sessions

    # --- sessions -------------------------------------------------------------

    def memory_for(self, thread_id: Any, user_id: Any = None) -> TieredMemory:
        """The (lazily opened) memory of one thread of one user (default: the middleware's user)."""
        return self._sessions.get(thread_id, user_id).memory

    def open_sessions(self) -> int:
        """How many sessions are open in this process now (at most ``max_sessions``)."""
        return len(self._sessions)

    def thread_id(self, runtime: Runtime[Any] | None) -> str:
        """The run's ``thread_id``, from the runtime or the run config; else ``default_thread_id``."""
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        if thread is None:
            thread = _configurable().get("thread_id")
        return self.default_thread_id if thread is None or thread == "" else as_id(thread, "thread_id")

    def user_id_of(self, runtime: Runtime[Any] | None) -> str | None:
        """The run's user: authenticated, configured or in the runtime context; else the middleware's.

        Raises:
            InvalidNamespaceError: two sources name different users.
        """
        return run_user_id(runtime) or self.user_id

    def _thread(self, runtime: Runtime[Any] | None) -> _Thread:
        return self._sessions.get(self.thread_id(runtime), self.user_id_of(runtime))

    def close(self) -> None:
        """Close every opened session."""
        self._sessions.close()

    # --- journaling -----------------------------------------------------------

    @staticmethod
    def _unjournaled(thread: _Thread, messages: Iterable[AnyMessage]) -> tuple[list[Message], list[str]]:
        new, ids = [], []
        for m in messages:
            if isinstance(m, RemoveMessage) or is_memory_message(m) or (m.id and m.id in thread.journaled):
                continue
            new.append(from_langchain(m))
            if m.id:
                ids.append(m.id)
        return new, ids

    def _journal(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> _Thread:
        thread = self._thread(runtime)
        new, ids = self._unjournaled(thread, state.get("messages", ()))
        if new:
            thread.memory.add_messages(new)
            thread.journaled.update(ids)
        return thread

    async def _ajournal(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> _Thread:
        thread = self._thread(runtime)
        new, ids = self._unjournaled(thread, state.get("messages", ()))
        if new:
            await thread.memory.aadd_messages(new)
            thread.journaled.update(ids)
        return thread

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Journal the user input and tool results that arrived since the last model call."""
        self._journal(state, runtime)
        return None

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async :meth:`before_model`."""
        await self._ajournal(state, runtime)
        return None

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Journal the model's reply."""
        self._journal(state, runtime)
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        await self._ajournal(state, runtime)
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Journal whatever the last step added (e.g. a ``return_direct`` tool result)."""
        self._journal(state, runtime)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async :meth:`after_agent`."""
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
        in_state = {m.id for m in request.state.get("messages", ()) if m.id}
        # Messages another middleware put into the request (not in the state, so never journaled)
        # stay, at the end; state messages the context left out are left out.
        messages += [
            m
            for m in request.messages
            if m.id not in seen and (not m.id or m.id not in in_state) and not isinstance(m, SystemMessage)
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
        thread = self._journal(request.state, request.runtime)
        context = thread.memory.context(self._query(request), self.budget)
        return handler(self._request(request, context))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        thread = await self._ajournal(request.state, request.runtime)
        context = await thread.memory.acontext(self._query(request), self.budget)
        return await handler(self._request(request, context))


def run_user_id(runtime: Any) -> str | None:
    """The user a run names, or ``None``: LangGraph Server's authenticated user
    (``runtime.server_info.user.identity``), ``config["configurable"]["user_id"]`` or the runtime
    context's ``user_id``. ``runtime`` is a LangGraph ``Runtime`` or a tool's ``ToolRuntime``.

    Raises:
        InvalidNamespaceError: two sources name different users.
    """
    server_user = getattr(getattr(runtime, "server_info", None), "user", None)
    context = getattr(runtime, "context", None)
    config = getattr(runtime, "config", None)
    configurable = (config.get("configurable") if isinstance(config, Mapping) else None) or _configurable()
    given = {
        "the authenticated user (server_info.user.identity)": getattr(server_user, "identity", None),
        'config["configurable"]["user_id"]': configurable.get("user_id"),
        "the runtime context's user_id": (
            context.get("user_id") if isinstance(context, Mapping) else getattr(context, "user_id", None)
        ),
    }
    named = {where: as_id(v, "user_id") for where, v in given.items() if v is not None and v != ""}
    if len(set(named.values())) > 1:
        raise InvalidNamespaceError(
            "the run names two different users: "
            + ", ".join(f"{where} is {user!r}" for where, user in named.items())
            + ": pass one user id, the same in every place"
        )
    return next(iter(named.values()), None)


def _configurable() -> Mapping[str, Any]:
    """``config["configurable"]`` of the run being executed (empty outside a run)."""
    from langgraph.config import get_config

    try:
        return get_config().get("configurable") or {}
    except RuntimeError:  # called outside a runnable context
        return {}
