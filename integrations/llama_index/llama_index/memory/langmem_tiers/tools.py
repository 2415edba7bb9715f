"""Memory tools for LlamaIndex agents: ``remember``, ``recall`` and ``forget`` as ``FunctionTool``s.

The tools act on the memory of the run: ``FunctionAgent`` and ``ReActAgent`` keep the
``memory=`` of ``agent.run(..., memory=...)`` in the workflow ``Context`` (a ``TieredChatMemory``,
or LlamaIndex's ``Memory`` with a ``TieredMemoryBlock``), and the tools read it from there
(LlamaIndex injects the ``Context``; it is not part of the tool schema). So the user is the run's
user, never an argument the model can see or set. Tools created with a memory use it when the run
has no such memory, and refuse a run whose memory belongs to another user.

Bad arguments and refused operations come back as a ``ToolOutput`` with ``is_error=True`` whose
text names the rule and the fix; they never raise into the agent. ``forget`` and ``recall`` reach
only the run's user's memories: another user's record id is answered like a missing one.

Example:
    >>> import tempfile
    >>> from llama_index.memory.langmem_tiers import TieredChatMemory
    >>> memory = TieredChatMemory.from_defaults(path=tempfile.mkdtemp(), session_id="s1", user_id="ada",
    ...                                         embed_model=False)
    >>> [t.metadata.name for t in create_memory_tools(memory)]
    ['remember', 'recall', 'forget']
    >>> out = create_memory_tools(memory)[2].call(record_id=0)
    >>> out.is_error, out.content.startswith("invalid arguments")
    (True, True)
    >>> memory.close()
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Optional, Union

from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.workflow import Context
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langmem_tiers import (
    ConfigError,
    LangmemTiersError,
    MemoryToolKind,
    MemoryToolScope,
    MemoryToolSpec,
    TieredMemory,
)
from llama_index.memory.langmem_tiers.block import TieredMemoryBlock
from llama_index.memory.langmem_tiers.memory import TieredChatMemory

_ARGS, _SPEC = MemoryToolSpec.ARGUMENTS, MemoryToolSpec


class RememberArgs(BaseModel):
    """Arguments of ``remember``."""

    model_config = ConfigDict(extra="ignore")  # an argument the schema does not name (user_id) is dropped
    text: str = Field(min_length=1, max_length=_SPEC.MAX_MEMORY_CHARS, description=_ARGS["text"])
    kind: MemoryToolKind = "fact"
    importance: float = Field(0.5, ge=0, le=1, description=_ARGS["importance"])
    key: Optional[str] = Field(None, description=_ARGS["key"])


class RecallArgs(BaseModel):
    """Arguments of ``recall``."""

    model_config = ConfigDict(extra="ignore")
    query: str = Field(min_length=1, max_length=_SPEC.MAX_QUERY_CHARS, description=_ARGS["query"])
    k: int = Field(5, ge=1, le=_SPEC.MAX_RECALL_K, description=_ARGS["k"])


class ForgetArgs(BaseModel):
    """Arguments of ``forget``."""

    model_config = ConfigDict(extra="ignore")
    record_id: int = Field(ge=1, description=_ARGS["record_id"])


class MemoryToolError(Exception):
    """A refused tool call; its message goes back to the model as an error output."""


class MemoryTool(FunctionTool):
    """A ``FunctionTool`` that validates its arguments and answers refusals with ``is_error`` outputs."""

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Run the tool on validated arguments; a refusal or invalid arguments come back as an ``is_error`` output."""
        try:
            return super().call(*args, **self._validated(kwargs))
        except (MemoryToolError, LangmemTiersError) as e:
            return self._error(str(e), kwargs)
        except ValidationError as e:
            return self._error(MemoryToolSpec.invalid_arguments(e.errors()), kwargs)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Async :meth:`call`."""
        try:
            return await super().acall(*args, **self._validated(kwargs))
        except (MemoryToolError, LangmemTiersError) as e:
            return self._error(str(e), kwargs)
        except ValidationError as e:
            return self._error(MemoryToolSpec.invalid_arguments(e.errors()), kwargs)

    def _validated(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # The Context is optional: a direct call without one uses the memory the tools were made with.
        ctx = {"ctx": kwargs.get("ctx")}
        arguments = {k: v for k, v in kwargs.items() if k != self.ctx_param_name}
        schema = self.metadata.fn_schema
        assert schema is not None
        return {**schema.model_validate(arguments).model_dump(), **ctx}

    def _error(self, message: str, kwargs: dict[str, Any]) -> ToolOutput:
        shown = {k: v for k, v in kwargs.items() if k != self.ctx_param_name}
        return ToolOutput(content=message, tool_name=self.metadata.get_name(), raw_input={"kwargs": shown},
                          raw_output=message, is_error=True)


def create_memory_tools(
    memory: Union[TieredChatMemory, TieredMemory, None] = None,
    *,
    names: Optional[Mapping[str, str]] = None,
    scope: MemoryToolScope = "user",
    kinds: Optional[tuple[str, ...]] = None,
) -> list[FunctionTool]:
    """``remember``, ``recall`` and ``forget`` as ``FunctionTool``s acting on the run's memory.

    Args:
        memory: used when the run has no ``TieredChatMemory`` (and by a direct ``tool.call``);
            ``None``: the tools work only inside an agent run given a ``TieredChatMemory``.
        names: new names for some tools, e.g. ``{"recall": "search_memory"}``.
        scope: what ``recall`` searches: ``"user"`` (every session of the user, default),
            ``"agent"`` or ``"session"``.
        kinds: record kinds ``recall`` returns (default: every kind, earlier turns included).

    Raises:
        ConfigError: an unknown tool in ``names``, a name a model API refuses, or a bad ``scope``.
    """
    spec = MemoryToolSpec.of(names, scope, kinds)
    if memory is not None and not isinstance(memory, (TieredChatMemory, TieredMemory)):
        raise ConfigError(f"create_memory_tools() takes a TieredChatMemory or a TieredMemory; got "
                          f"{type(memory).__name__}")
    bound = memory

    def bound_memory() -> TieredMemory:
        if bound is None:
            raise MemoryToolError("no memory for this run: run the agent with memory=TieredChatMemory(...), "
                                  "or create the tools with a memory")
        return bound.tiered if isinstance(bound, TieredChatMemory) else bound

    async def memory_of(ctx: Optional[Context]) -> TieredMemory:
        run_memory = await ctx.store.get("memory", default=None) if ctx is not None else None
        tiered = _tiered_of(run_memory)
        if tiered is None:
            return bound_memory()
        if bound is not None and bound_memory().namespace.user_id != tiered.namespace.user_id:
            # Tools made for one user never serve another user's run.
            raise MemoryToolError("these memory tools belong to another user's memory than this run's: create "
                                  "them without a memory, or with this run's memory")
        return tiered

    def sync_memory(ctx: Optional[Context]) -> TieredMemory:
        if ctx is not None:  # a run's Context is read asynchronously: agents call acall
            raise MemoryToolError("inside an agent run, call the memory tools with acall")
        return bound_memory()

    def remember(ctx: Optional[Context] = None, **args: Any) -> str:
        return spec.remembered(sync_memory(ctx).remember(args["text"], args["kind"], importance=args["importance"],
                                                         key=args["key"]), args["text"])

    async def aremember(ctx: Optional[Context] = None, **args: Any) -> str:
        target = await memory_of(ctx)
        record_id = await target.aremember(args["text"], args["kind"], importance=args["importance"],
                                           key=args["key"])
        return spec.remembered(record_id, args["text"])

    def recall(ctx: Optional[Context] = None, **args: Any) -> str:
        return spec.format_hits(sync_memory(ctx).search(args["query"], args["k"], scope=spec.scope, kinds=spec.kinds))

    async def arecall(ctx: Optional[Context] = None, **args: Any) -> str:
        target = await memory_of(ctx)
        return spec.format_hits(await target.asearch(args["query"], args["k"], scope=spec.scope, kinds=spec.kinds))

    def forget(ctx: Optional[Context] = None, **args: Any) -> str:
        return _forgotten(spec, sync_memory(ctx).forget(args["record_id"]), args["record_id"])

    async def aforget(ctx: Optional[Context] = None, **args: Any) -> str:
        target = await memory_of(ctx)
        return _forgotten(spec, await target.aforget(args["record_id"]), args["record_id"])

    return [
        _tool(remember, aremember, spec.names["remember"], spec.DESCRIPTIONS["remember"], RememberArgs),
        _tool(recall, arecall, spec.names["recall"], spec.DESCRIPTIONS["recall"], RecallArgs),
        _tool(forget, aforget, spec.names["forget"], spec.DESCRIPTIONS["forget"], ForgetArgs),
    ]


def _tiered_of(run_memory: Any) -> Optional[TieredMemory]:
    """The core memory behind an agent run's memory: a TieredChatMemory, or LlamaIndex's ``Memory``
    holding a TieredMemoryBlock (the block's session for that Memory's session id)."""
    if isinstance(run_memory, TieredChatMemory):
        return run_memory.tiered
    for block in getattr(run_memory, "memory_blocks", None) or ():
        if isinstance(block, TieredMemoryBlock):
            return block.memory_for(getattr(run_memory, "session_id", None))
    return None


def _tool(fn: Callable[..., str], async_fn: Callable[..., Awaitable[str]], name: str, description: str,
          schema: type[BaseModel]) -> FunctionTool:
    from llama_index.core.tools import ToolMetadata

    tool = MemoryTool(fn=fn, async_fn=async_fn,
                      metadata=ToolMetadata(name=name, description=description, fn_schema=schema))
    # Agents pass their Context to a tool that asks for it; the signatures' ``ctx`` is a string
    # annotation here (postponed evaluation), so say so explicitly.
    tool.requires_context = True
    tool.ctx_param_name = "ctx"
    return tool


def _forgotten(spec: MemoryToolSpec, removed: int, record_id: int) -> str:
    if not removed:
        raise MemoryToolError(spec.unknown_memory(record_id))
    return spec.forgot(record_id)
