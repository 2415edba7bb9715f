"""Lossless conversion between LangChain messages and langmem-tiers messages.

The journal stores the OpenAI-shaped :class:`langmem_tiers.Message`; everything
LangChain-specific that has no slot there (message id, type, ``additional_kwargs``,
``response_metadata``, usage, invalid tool calls, tool artifacts and status, which
content parts were bare strings) travels in ``metadata["langchain"]``, so
``to_langchain(from_langchain(m)) == m`` for every JSON-serializable message.

Metadata that a journal message carries besides ``"langchain"`` (for example the
memory message of a context, tagged ``{"langmem_tiers": "memory"}``) surfaces as
``additional_kwargs["langmem_tiers_metadata"]`` and goes back the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langmem_tiers import InvalidMessageError, Message, make_message
from langmem_tiers import is_memory_message as is_core_memory_message

LC_KEY = "langchain"
EXTRA_KEY = "langmem_tiers_metadata"
MAX_KEY_CHARS = 256  # the core's limit on an idempotency key

_CHUNK_TYPES = {
    "AIMessageChunk": "ai",
    "HumanMessageChunk": "human",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "ChatMessageChunk": "chat",
}
_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def is_memory_message(message: BaseMessage | Message) -> bool:
    """True for the synthetic message that carries pinned facts, the summary and recall."""
    if isinstance(message, Message):
        return is_core_memory_message(message)
    extra = message.additional_kwargs.get(EXTRA_KEY)
    return isinstance(extra, Mapping) and is_core_memory_message(extra)


def _jsonable(value: Any) -> Any:
    """``value`` if JSON can hold it, else its JSON round trip with ``str`` for unknown objects."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))


def idempotency_key(message_id: str | None) -> str | None:
    """The journal's idempotency key for a LangChain message id (``None`` without one).

    The id itself; an id longer than the core allows is replaced by its SHA-256 digest,
    so every id, however long, still keys its message exactly once.
    """
    if not message_id:
        return None
    if len(message_id) <= MAX_KEY_CHARS:
        return message_id
    return "sha256:" + hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()


def from_langchain(message: BaseMessage) -> Message:
    """Convert a LangChain message to a (validated, unsaved) langmem-tiers message.

    The message's LangChain id becomes the journal's idempotency key: adding a message
    whose id the session already holds (a retry, a replayed agent state) stores nothing.

    Raises:
        InvalidMessageError: the message cannot be journaled (a legacy ``FunctionMessage``,
            a ``RemoveMessage``, a ``ChatMessage`` with an unknown role, an empty human message).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from_langchain(HumanMessage("hi", id="1")).role
        'user'
    """
    if isinstance(message, RemoveMessage):
        raise InvalidMessageError("a RemoveMessage is a state instruction, not a message to journal")
    kind = _CHUNK_TYPES.get(message.type, message.type)
    if kind == "chat":
        role = getattr(message, "role", None)  # make_message refuses a role the core does not know
    elif kind in _ROLE_OF_TYPE:
        role = _ROLE_OF_TYPE[kind]
    else:
        raise InvalidMessageError(
            f"cannot journal a {type(message).__name__} (type {message.type!r}): use HumanMessage, "
            "AIMessage, SystemMessage, ToolMessage or ChatMessage"
        )
    lc: dict[str, Any] = {"type": kind}
    if message.id is not None:
        lc["id"] = message.id
    kwargs = dict(message.additional_kwargs)
    extra = kwargs.pop(EXTRA_KEY, None)
    if kwargs:
        lc["additional_kwargs"] = _jsonable(kwargs)
    if message.response_metadata:
        lc["response_metadata"] = _jsonable(dict(message.response_metadata))
    content: Any = message.content
    if isinstance(content, list):
        str_parts = [i for i, p in enumerate(content) if isinstance(p, str)]
        if str_parts:
            lc["str_parts"] = str_parts
    tool_calls: list[dict[str, Any]] = []
    tool_call_id = None
    if isinstance(message, AIMessage):
        for i, call in enumerate(message.tool_calls):
            call_id = call.get("id")
            if not call_id:
                # The journal needs an id to pair results with calls; remember it had none.
                call_id = f"lmt-call-{message.id or 'x'}-{i}"
                lc.setdefault("generated_call_ids", []).append(i)
            tool_calls.append({"id": call_id, "name": call["name"], "arguments": _jsonable(call["args"])})
        if message.invalid_tool_calls:
            lc["invalid_tool_calls"] = _jsonable([dict(c) for c in message.invalid_tool_calls])
        if message.usage_metadata:
            lc["usage_metadata"] = _jsonable(dict(message.usage_metadata))
    elif isinstance(message, ToolMessage):
        tool_call_id = message.tool_call_id
        if message.artifact is not None:
            lc["artifact"] = _jsonable(message.artifact)
        if message.status != "success":
            lc["status"] = message.status
    if kind == "chat":
        lc["role"] = role
    metadata: dict[str, Any] = dict(extra) if isinstance(extra, Mapping) else {}
    metadata[LC_KEY] = lc
    return make_message(
        role, content, name=message.name, tool_calls=tool_calls, tool_call_id=tool_call_id, metadata=metadata,
        key=idempotency_key(message.id),
    )


def to_langchain(message: Message) -> BaseMessage:
    """Convert a langmem-tiers message (from the journal or a context) to a LangChain message.

    Messages written by :func:`from_langchain` come back equal to the original;
    others (written through the core API) get the id ``lmt-<journal id>``.

    Example:
        >>> from langmem_tiers import Message
        >>> to_langchain(Message("assistant", "hello", id=7)).id
        'lmt-7'
    """
    lc: Mapping[str, Any] = message.metadata.get(LC_KEY) or {}
    extra = {k: v for k, v in message.metadata.items() if k != LC_KEY}
    kind = (
        lc.get("type")
        or {"user": "human", "assistant": "ai", "system": "system", "tool": "tool"}[message.role]
    )
    content: Any
    if lc.get("empty"):
        # Rows written before the journal accepted empty assistant messages hold one empty text part.
        content = ""
    elif isinstance(message.content, str):
        content = message.content
    else:
        str_parts = set(lc.get("str_parts", ()))
        content = [p["text"] if i in str_parts else dict(p) for i, p in enumerate(message.content)]
    fields: dict[str, Any] = {"content": content}
    if LC_KEY in message.metadata:
        fields["id"] = lc.get("id")
    elif message.id is not None:
        fields["id"] = f"lmt-{message.id}"
    kwargs = dict(lc.get("additional_kwargs") or {})
    if extra:
        kwargs[EXTRA_KEY] = extra
    fields["additional_kwargs"] = kwargs
    fields["response_metadata"] = dict(lc.get("response_metadata") or {})
    if message.name is not None:
        fields["name"] = message.name
    if kind == "ai":
        generated = set(lc.get("generated_call_ids", ()))
        fields["tool_calls"] = [
            {
                "name": c.name,
                "args": json.loads(c.arguments or "{}"),
                "id": None if i in generated else c.id,
                "type": "tool_call",
            }
            for i, c in enumerate(message.tool_calls)
        ]
        if lc.get("invalid_tool_calls"):
            fields["invalid_tool_calls"] = list(lc["invalid_tool_calls"])
        if lc.get("usage_metadata"):
            fields["usage_metadata"] = dict(lc["usage_metadata"])
        return AIMessage(**fields)
    if kind == "human":
        return HumanMessage(**fields)
    if kind == "system":
        return SystemMessage(**fields)
    if kind == "tool":
        fields["tool_call_id"] = message.tool_call_id
        if "artifact" in lc:
            fields["artifact"] = lc["artifact"]
        fields["status"] = lc.get("status", "success")
        return ToolMessage(**fields)
    if kind == "chat":
        return ChatMessage(role=lc.get("role", message.role), **fields)
    raise InvalidMessageError(f"unknown LangChain message type {kind!r} in journal message {message.id}")


def messages_from_langchain(messages: Iterable[BaseMessage]) -> list[Message]:
    """Convert many messages, skipping context memory messages and ``RemoveMessage`` instructions."""
    out = []
    for m in messages:
        if not isinstance(m, BaseMessage):
            raise InvalidMessageError(f"expected a LangChain BaseMessage, got {type(m).__name__}")
        if not isinstance(m, RemoveMessage) and not is_memory_message(m):
            out.append(from_langchain(m))
    return out


def messages_to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """Convert many journal or context messages to LangChain messages."""
    return [to_langchain(m) for m in messages]


def chunk_to_message(message: BaseMessage) -> BaseMessage:
    """A finished ``AIMessageChunk`` (from streaming) as the ``AIMessage`` it stands for."""
    if isinstance(message, AIMessageChunk):
        return to_langchain(from_langchain(message))
    return message
