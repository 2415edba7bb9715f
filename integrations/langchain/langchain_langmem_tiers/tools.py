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

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langmem_tiers import (
    ConfigError,
    LangmemTiersError,
    MemoryToolKind,
    MemoryToolScope,
    MemoryToolSpec,
    TieredMemory,
)
from pydantic import Field, ValidationError

if TYPE_CHECKING:
    from langchain_langmem_tiers.middleware import TieredMemoryMiddleware

MemoryOf = Callable[[Any], TieredMemory]
"""Resolves the run's memory from the injected tool runtime (raises ``ToolException`` to refuse)."""


def create_memory_tools(
    memory: TieredMemory | TieredMemoryMiddleware,
    *,
    names: Mapping[str, str] | None = None,
    scope: MemoryToolScope = "user",
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
    spec = MemoryToolSpec.of(names, scope, kinds)
    memory_of = _resolver(memory)
    return [_remember_tool(memory_of, spec), _recall_tool(memory_of, spec), _forget_tool(memory_of, spec)]


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
    return "Error: " + MemoryToolSpec.invalid_arguments(error.errors())


def _structured(
    func: Callable[..., str], coroutine: Callable[..., Any], name: str, description: str
) -> BaseTool:
    return StructuredTool.from_function(
        func=func, coroutine=coroutine, name=name, description=description,
        handle_tool_error=True, handle_validation_error=_validation_message,
    )


_ARGS, _SPEC = MemoryToolSpec.ARGUMENTS, MemoryToolSpec
Text = Annotated[str, Field(min_length=1, max_length=_SPEC.MAX_MEMORY_CHARS, description=_ARGS["text"])]
Importance = Annotated[float, Field(ge=0, le=1, description=_ARGS["importance"])]
Query = Annotated[str, Field(min_length=1, max_length=_SPEC.MAX_QUERY_CHARS, description=_ARGS["query"])]
K = Annotated[int, Field(ge=1, le=_SPEC.MAX_RECALL_K, description=_ARGS["k"])]
Key = Annotated[str | None, Field(description=_ARGS["key"])]
RecordId = Annotated[int, Field(ge=1, description=_ARGS["record_id"])]


def _remember_tool(memory_of: MemoryOf, spec: MemoryToolSpec) -> BaseTool:
    def remember(
        runtime: ToolRuntime, text: Text, kind: MemoryToolKind = "fact", importance: Importance = 0.5,
        key: Key = None,
    ) -> str:
        def run() -> str:
            record_id = memory_of(runtime).remember(text, kind, importance=importance, key=key)
            return spec.remembered(record_id, text)

        return _call(run)

    async def aremember(runtime: ToolRuntime, text: Text, kind: MemoryToolKind = "fact",
                        importance: Importance = 0.5, key: Key = None) -> str:
        async def run() -> str:
            record_id = await memory_of(runtime).aremember(text, kind, importance=importance, key=key)
            return spec.remembered(record_id, text)

        return await _acall(run)

    return _structured(remember, aremember, spec.names["remember"], spec.DESCRIPTIONS["remember"])


def _recall_tool(memory_of: MemoryOf, spec: MemoryToolSpec) -> BaseTool:
    scope, kinds = spec.scope, spec.kinds

    def recall(runtime: ToolRuntime, query: Query, k: K = 5) -> str:
        return _call(lambda: spec.format_hits(memory_of(runtime).search(query, k, scope=scope, kinds=kinds)))

    async def arecall(runtime: ToolRuntime, query: Query, k: K = 5) -> str:
        async def run() -> str:
            return spec.format_hits(await memory_of(runtime).asearch(query, k, scope=scope, kinds=kinds))

        return await _acall(run)

    return _structured(recall, arecall, spec.names["recall"], spec.DESCRIPTIONS["recall"])


def _forget_tool(memory_of: MemoryOf, spec: MemoryToolSpec) -> BaseTool:
    def forget(runtime: ToolRuntime, record_id: RecordId) -> str:
        return _call(lambda: _forgotten(spec, memory_of(runtime).forget(record_id), record_id))

    async def aforget(runtime: ToolRuntime, record_id: RecordId) -> str:
        async def run() -> str:
            memory = memory_of(runtime)
            return _forgotten(spec, await memory.aforget(record_id), record_id)

        return await _acall(run)

    return _structured(forget, aforget, spec.names["forget"], spec.DESCRIPTIONS["forget"])


def _forgotten(spec: MemoryToolSpec, removed: int, record_id: int) -> str:
    if not removed:
        raise ToolException(spec.unknown_memory(record_id))
    return spec.forgot(record_id)
