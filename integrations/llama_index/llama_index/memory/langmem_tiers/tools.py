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

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timezone
from typing import Any, Literal, Optional, Union

from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.workflow import Context
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langmem_tiers import ConfigError, LangmemTiersError, RecallHit, TieredMemory
from llama_index.memory.langmem_tiers.block import TieredMemoryBlock
from llama_index.memory.langmem_tiers.memory import TieredChatMemory

DEFAULT_TOOL_NAMES: Mapping[str, str] = {"remember": "remember", "recall": "recall", "forget": "forget"}
"""The tools' names; ``create_memory_tools(names={"recall": "search_memory"})`` renames one."""

DEFAULT_REMEMBER_DESCRIPTION = (
    "Save one durable memory about the user (a fact, preference, event, skill, relation or note) so that it "
    "can be recalled in later conversations. Write it as one self-contained sentence. Give a key (snake_case, "
    "e.g. home_city) for a value that can change: a newer memory with the same key replaces the older one. "
    "Returns its memory id."
)
DEFAULT_RECALL_DESCRIPTION = (
    "Search the user's long-term memory (saved memories and earlier conversations, also from other "
    "sessions) and return the best matches with their memory ids, kinds and dates."
)
DEFAULT_FORGET_DESCRIPTION = (
    "Erase one memory of the user for good, by the memory id that remember or recall returned. "
    "Use it when the user asks to forget something or a memory is wrong."
)

MAX_MEMORY_CHARS = 2000  # one memory is a sentence or a short paragraph, not a document
MAX_QUERY_CHARS = 1000
MAX_RECALL_K = 20
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic accept as a tool name


class RememberArgs(BaseModel):
    """Arguments of ``remember``."""

    model_config = ConfigDict(extra="ignore")  # an argument the schema does not name (user_id) is dropped
    text: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS, description="the memory, one sentence")
    kind: Literal["fact", "preference", "event", "skill", "note", "relation"] = "fact"
    importance: float = Field(0.5, ge=0, le=1, description="0 (trivia) to 1 (essential)")
    key: Optional[str] = Field(None, description="optional snake_case name, e.g. home_city; replaces an older "
                                                 "memory with the same key")


class RecallArgs(BaseModel):
    """Arguments of ``recall``."""

    model_config = ConfigDict(extra="ignore")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for")
    k: int = Field(5, ge=1, le=MAX_RECALL_K, description="how many results")


class ForgetArgs(BaseModel):
    """Arguments of ``forget``."""

    model_config = ConfigDict(extra="ignore")
    record_id: int = Field(ge=1, description="the memory id from remember or recall")


class MemoryToolError(Exception):
    """A refused tool call; its message goes back to the model as an error output."""


class MemoryTool(FunctionTool):
    """A ``FunctionTool`` that validates its arguments and answers refusals with ``is_error`` outputs."""

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        try:
            return super().call(*args, **self._validated(kwargs))
        except (MemoryToolError, LangmemTiersError) as e:
            return self._error(str(e), kwargs)
        except ValidationError as e:
            return self._error(_validation_message(e), kwargs)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        try:
            return await super().acall(*args, **self._validated(kwargs))
        except (MemoryToolError, LangmemTiersError) as e:
            return self._error(str(e), kwargs)
        except ValidationError as e:
            return self._error(_validation_message(e), kwargs)

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
    scope: Literal["session", "user", "agent"] = "user",
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
    tool_names = _names(names)
    if scope not in ("session", "user", "agent"):
        raise ConfigError(f"scope ({scope!r}) must be 'session', 'user' or 'agent'")
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
        return _remembered(sync_memory(ctx).remember(args["text"], args["kind"], importance=args["importance"],
                                                     key=args["key"]), args["text"])

    async def aremember(ctx: Optional[Context] = None, **args: Any) -> str:
        target = await memory_of(ctx)
        record_id = await target.aremember(args["text"], args["kind"], importance=args["importance"],
                                           key=args["key"])
        return _remembered(record_id, args["text"])

    def recall(ctx: Optional[Context] = None, **args: Any) -> str:
        return format_hits(sync_memory(ctx).search(args["query"], args["k"], scope=scope, kinds=kinds))

    async def arecall(ctx: Optional[Context] = None, **args: Any) -> str:
        target = await memory_of(ctx)
        return format_hits(await target.asearch(args["query"], args["k"], scope=scope, kinds=kinds))

    def forget(ctx: Optional[Context] = None, **args: Any) -> str:
        return _forgotten(sync_memory(ctx).forget(args["record_id"]), args["record_id"])

    async def aforget(ctx: Optional[Context] = None, **args: Any) -> str:
        target = await memory_of(ctx)
        return _forgotten(await asyncio.to_thread(target.forget, args["record_id"]), args["record_id"])

    return [
        _tool(remember, aremember, tool_names["remember"], DEFAULT_REMEMBER_DESCRIPTION, RememberArgs),
        _tool(recall, arecall, tool_names["recall"], DEFAULT_RECALL_DESCRIPTION, RecallArgs),
        _tool(forget, aforget, tool_names["forget"], DEFAULT_FORGET_DESCRIPTION, ForgetArgs),
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


def _names(names: Optional[Mapping[str, str]]) -> dict[str, str]:
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


def _validation_message(error: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors())
    return f"invalid arguments ({problems}). Fix them and call the tool again."


def _remembered(record_id: int, text: str) -> str:
    return f"Remembered as memory {record_id}: {text}"


def _forgotten(removed: int, record_id: int) -> str:
    if not removed:
        # The same answer for an id that does not exist and one of another user: nothing leaks.
        raise MemoryToolError(f"no memory {record_id} in this user's memory: use an id that recall returned")
    return f"Forgot memory {record_id}."


def format_hits(hits: list[RecallHit]) -> str:
    """Recall hits as the lines a model reads: id, kind, date, text (continuation lines indented)."""
    if not hits:
        return "No memories found."
    lines = []
    for hit in hits:
        day = datetime.fromtimestamp(hit.created_at, timezone.utc).strftime("%Y-%m-%d") if hit.created_at else "?"
        text = hit.text.replace("\n", "\n  ")
        lines.append(f"[memory {hit.record_id}] ({hit.kind}, {day}) {text}")
    return "\n".join(lines)
