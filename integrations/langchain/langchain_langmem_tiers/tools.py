"""Memory tools for tool-calling agents: ``remember``, ``recall`` and ``forget``.

The tools act on the memory of the user the run belongs to. That user is never a tool
argument (the model can neither see nor set it): it comes from the run, as
:class:`~langchain_langmem_tiers.TieredMemoryMiddleware` reads it (LangGraph Server's
authenticated user, ``config["configurable"]["user_id"]`` or the runtime context's
``user_id``), through LangChain's injected :class:`~langchain.tools.ToolRuntime`.

Bad arguments and refused operations come back to the model as tool error messages
(``ToolMessage(status="error")``) naming the rule and the fix, never as exceptions that end
the agent run. ``forget`` and ``recall`` reach only the run's user's memories: a record id of
another user is answered exactly like an id that does not exist.

Example:
    >>> import tempfile
    >>> from langmem_tiers import TieredMemory
    >>> memory = TieredMemory.open(tempfile.mkdtemp(), session_id="s1", user_id="ada", embedder=False)
    >>> remember, recall, forget = create_memory_tools(memory)
    >>> [t.name for t in (remember, recall, forget)]
    ['remember', 'recall', 'forget']
    >>> sorted(remember.tool_call_schema.model_json_schema()["properties"])
    ['importance', 'key', 'kind', 'text']
    >>> memory.close()
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any, Literal

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langmem_tiers import ConfigError, LangmemTiersError, RecallHit, TieredMemory
from pydantic import Field, ValidationError

if TYPE_CHECKING:
    from langchain_langmem_tiers.middleware import TieredMemoryMiddleware

DEFAULT_TOOL_NAMES: Mapping[str, str] = {"remember": "remember", "recall": "recall", "forget": "forget"}
"""The tools' names; ``create_memory_tools(names={"recall": "search_memory"})`` renames one."""

DEFAULT_REMEMBER_DESCRIPTION = (
    "Save one durable memory about the user (a fact, preference, event, skill, relation or note) so "
    "that it can be recalled in later conversations. Write it as one self-contained sentence. Give a key "
    "(snake_case, e.g. home_city) for a value that can change: a newer memory with the same key replaces "
    "the older one. Returns its memory id."
)
DEFAULT_RECALL_DESCRIPTION = (
    "Search the user's long-term memory (saved memories and earlier conversations, also from other "
    "sessions) and return the best matches with their memory ids, kinds and dates."
)
DEFAULT_FORGET_DESCRIPTION = (
    "Erase one memory of the user for good, by the memory id that remember or recall returned. "
    "Use it when the user asks to forget something or a memory is wrong."
)

MemoryKind = Literal["fact", "preference", "event", "skill", "note", "relation"]
MAX_MEMORY_CHARS = 2000  # one memory is a sentence or a short paragraph, not a document
MAX_QUERY_CHARS = 1000
MAX_RECALL_K = 20
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic accept as a tool name

MemoryOf = Callable[[Any], TieredMemory]
"""Resolves the run's memory from the injected tool runtime (raises ``ToolException`` to refuse)."""


def create_memory_tools(
    memory: TieredMemory | TieredMemoryMiddleware,
    *,
    names: Mapping[str, str] | None = None,
    scope: Literal["session", "user", "agent"] = "user",
    kinds: tuple[str, ...] | None = None,
) -> list[BaseTool]:
    """``remember``, ``recall`` and ``forget`` tools bound to a memory and to the run's user.

    Args:
        memory: a :class:`langmem_tiers.TieredMemory` (the tools act on its session and user; a
            run that names another user gets a tool error), or a
            :class:`~langchain_langmem_tiers.TieredMemoryMiddleware` (the tools act on the session of
            the run's user and ``thread_id``, by the middleware's identity rules).
        names: new names for some tools, e.g. ``{"recall": "search_memory"}``.
        scope: what ``recall`` searches: ``"user"`` (every session of the user, default),
            ``"agent"`` or ``"session"``.
        kinds: record kinds ``recall`` returns (default: every kind, earlier turns included).

    Raises:
        ConfigError: an unknown tool in ``names``, a name a model API refuses, or a bad ``scope``.
    """
    tool_names = _names(names)
    if scope not in ("session", "user", "agent"):
        raise ConfigError(f"scope ({scope!r}) must be 'session', 'user' or 'agent'")
    memory_of = _resolver(memory)
    return [
        _remember_tool(memory_of, tool_names["remember"]),
        _recall_tool(memory_of, tool_names["recall"], scope, kinds),
        _forget_tool(memory_of, tool_names["forget"]),
    ]


# --- whose memory ---------------------------------------------------------------


def _resolver(memory: Any) -> MemoryOf:
    from langchain_langmem_tiers.middleware import TieredMemoryMiddleware, run_user_id

    if isinstance(memory, TieredMemoryMiddleware):
        middleware = memory

        def of_middleware(runtime: Any) -> TieredMemory:
            return middleware.memory_for(middleware.thread_id(runtime), middleware.user_id_of(runtime))

        return of_middleware
    if isinstance(memory, TieredMemory):
        bound = memory

        def of_memory(runtime: Any) -> TieredMemory:
            user = run_user_id(runtime)
            if user is not None and user != bound.namespace.user_id:
                # A tool bound to one user's memory never serves another user's run.
                raise ToolException(
                    f"these memory tools belong to another user's memory than this run's user ({user!r}): "
                    "give the agent tools created for this user, or create them from the middleware"
                )
            return bound

        return of_memory
    raise ConfigError(
        f"create_memory_tools() takes a TieredMemory or a TieredMemoryMiddleware; got {type(memory).__name__}"
    )


def _names(names: Mapping[str, str] | None) -> dict[str, str]:
    chosen = dict(DEFAULT_TOOL_NAMES)
    for tool, name in (names or {}).items():
        if tool not in DEFAULT_TOOL_NAMES:
            raise ConfigError(f"names has an unknown tool {tool!r}: rename 'remember', 'recall' or 'forget'")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"tool name {name!r} for {tool!r} must be 1-64 letters, digits, '_' or '-'")
        chosen[tool] = name
    if len(set(chosen.values())) != 3:
        raise ConfigError(f"tool names must differ; got {chosen}")
    return chosen


# --- the tools --------------------------------------------------------------------


def _call(operation: Callable[[], str]) -> str:
    """Run a tool's operation; the core's typed errors become a tool error message for the model."""
    try:
        return operation()
    except LangmemTiersError as e:
        raise ToolException(str(e)) from e


async def _acall(operation: Callable[[], Any]) -> str:
    try:
        result: str = await operation()
        return result
    except LangmemTiersError as e:
        raise ToolException(str(e)) from e


def _validation_message(error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()
    )
    return f"Error: invalid arguments ({problems}). Fix them and call the tool again."


def _structured(
    func: Callable[..., str], coroutine: Callable[..., Any], name: str, description: str
) -> BaseTool:
    return StructuredTool.from_function(
        func=func, coroutine=coroutine, name=name, description=description,
        handle_tool_error=True, handle_validation_error=_validation_message,
    )


Text = Annotated[str, Field(min_length=1, max_length=MAX_MEMORY_CHARS, description="the memory, a sentence")]
Importance = Annotated[float, Field(ge=0, le=1, description="0 (trivia) to 1 (essential)")]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for")]
K = Annotated[int, Field(ge=1, le=MAX_RECALL_K, description="how many results")]
Key = Annotated[str | None, Field(description="optional snake_case name, e.g. home_city; replaces an older "
                                              "memory with the same key")]
RecordId = Annotated[int, Field(ge=1, description="the memory id from remember or recall")]


def _remember_tool(memory_of: MemoryOf, name: str) -> BaseTool:
    def remember(
        runtime: ToolRuntime, text: Text, kind: MemoryKind = "fact", importance: Importance = 0.5,
        key: Key = None,
    ) -> str:
        def run() -> str:
            return _remembered(memory_of(runtime).remember(text, kind, importance=importance, key=key), text)

        return _call(run)

    async def aremember(runtime: ToolRuntime, text: Text, kind: MemoryKind = "fact",
                        importance: Importance = 0.5, key: Key = None) -> str:
        async def run() -> str:
            record_id = await memory_of(runtime).aremember(text, kind, importance=importance, key=key)
            return _remembered(record_id, text)

        return await _acall(run)

    return _structured(remember, aremember, name, DEFAULT_REMEMBER_DESCRIPTION)


def _recall_tool(memory_of: MemoryOf, name: str, scope: str, kinds: tuple[str, ...] | None) -> BaseTool:
    def recall(runtime: ToolRuntime, query: Query, k: K = 5) -> str:
        return _call(lambda: format_hits(memory_of(runtime).search(query, k, scope=scope, kinds=kinds)))

    async def arecall(runtime: ToolRuntime, query: Query, k: K = 5) -> str:
        async def run() -> str:
            return format_hits(await memory_of(runtime).asearch(query, k, scope=scope, kinds=kinds))

        return await _acall(run)

    return _structured(recall, arecall, name, DEFAULT_RECALL_DESCRIPTION)


def _forget_tool(memory_of: MemoryOf, name: str) -> BaseTool:
    def forget(runtime: ToolRuntime, record_id: RecordId) -> str:
        return _call(lambda: _forgotten(memory_of(runtime).forget(record_id), record_id))

    async def aforget(runtime: ToolRuntime, record_id: RecordId) -> str:
        async def run() -> str:
            memory = memory_of(runtime)
            return _forgotten(await asyncio.to_thread(memory.forget, record_id), record_id)

        return await _acall(run)

    return _structured(forget, aforget, name, DEFAULT_FORGET_DESCRIPTION)


def _remembered(record_id: int, text: str) -> str:
    return f"Remembered as memory {record_id}: {text}"


def _forgotten(removed: int, record_id: int) -> str:
    if not removed:
        # The same answer for an id that does not exist and one of another user: nothing leaks.
        raise ToolException(f"no memory {record_id} in this user's memory: use an id that recall returned")
    return f"Forgot memory {record_id}."


def format_hits(hits: list[RecallHit]) -> str:
    """Recall hits as the lines a model reads: id, kind, date, text."""
    if not hits:
        return "No memories found."
    lines = []
    for hit in hits:
        day = "?"
        if hit.created_at:
            day = datetime.fromtimestamp(hit.created_at, timezone.utc).strftime("%Y-%m-%d")
        text = hit.text.replace("\n", "\n  ")  # continuation lines indented: each hit starts a line
        lines.append(f"[memory {hit.record_id}] ({hit.kind}, {day}) {text}")
    return "\n".join(lines)
