"""Lossless conversion between LlamaIndex ``ChatMessage`` and langmem-tiers ``Message``.

The core stores the OpenAI shape (text or typed parts, tool calls, tool_call_id);
what that shape cannot say (the original role such as ``developer`` or ``model``,
non-text blocks, where ``ToolCallBlock`` s sat among the blocks, the rest of
``additional_kwargs``) travels in ``metadata["llama_index"]``, so
``to_chat_message(from_chat_message(m))`` gives back an equal message (JSON form
of ``additional_kwargs``).

Idempotency: LlamaIndex's ``ChatMessage`` has no id field, and llama-index-core
puts none in ``additional_kwargs``; tool call ids come from the model and are not
guaranteed unique across a conversation (this module invents one when a block has
none). So no key is derived from a message: a key that could repeat would make the
journal drop a real message. A caller that retries ``put`` can give a stable key of
its own in ``additional_kwargs["langmem_tiers_key"]``; the journal stores a message
whose key it already holds only once.

Example:
    >>> from llama_index.core.llms import ChatMessage
    >>> m = ChatMessage(role="user", content="hi")
    >>> to_chat_message(from_chat_message(m)) == m
    True
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ContentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from pydantic import TypeAdapter

from langmem_tiers import Message, ToolCall

META_KEY = "llama_index"
BLOCK_KEY = "li_block"
KEY_FIELD = "langmem_tiers_key"  # additional_kwargs entry carrying a caller's idempotency key
EMPTY_PART = {"type": "li_empty"}

_CORE_ROLE = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant",
    "model": "assistant", "chatbot": "assistant", "tool": "tool", "function": "tool",
}
_BLOCKS: TypeAdapter[Any] = TypeAdapter(ContentBlock)


def from_chat_message(message: ChatMessage) -> Message:
    """A core :class:`Message` for ``message`` (validated by the core's rules)."""
    li_role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    role = _CORE_ROLE.get(li_role, "user")
    kwargs: dict[str, Any] = dict(message.model_dump(mode="json")["additional_kwargs"])
    key = kwargs.pop(KEY_FIELD, None)  # the core validates it (a non-empty string)
    meta: dict[str, Any] = {}

    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    call_blocks: list[list[Any]] = []
    for pos, block in enumerate(message.blocks):
        if isinstance(block, ToolCallBlock):
            call_id = block.tool_call_id or f"li-call-{uuid.uuid4().hex[:12]}"
            args = block.tool_kwargs if isinstance(block.tool_kwargs, str) else json.dumps(
                block.tool_kwargs, ensure_ascii=False, sort_keys=True)
            calls.append(ToolCall(call_id, block.tool_name or "tool", args))
            call_blocks.append([pos, isinstance(block.tool_kwargs, str), block.tool_call_id is not None])
        else:
            parts.append(_part(block))
    if call_blocks:
        meta["call_blocks"] = call_blocks
    raw_calls = kwargs.get("tool_calls")
    if isinstance(raw_calls, list) and raw_calls and not calls:
        try:
            calls = [_openai_call(c) for c in raw_calls]
        except (TypeError, ValueError, KeyError):
            calls = []  # an unknown shape: it still round-trips through metadata
    if calls and role != "assistant":
        calls = []  # only assistants call tools in the core's model; kwargs keep the original

    tool_call_id: str | None = None
    if role == "tool":
        tid = kwargs.get("tool_call_id")
        if isinstance(tid, str) and tid:
            tool_call_id = tid
            kwargs.pop("tool_call_id")
        else:
            role = "assistant"  # a tool result the core cannot attach to a call: keep it, as text
    name = kwargs.pop("name", None) if isinstance(kwargs.get("name"), str) and kwargs.get("name") else None

    if role != li_role:
        meta["role"] = li_role
    if kwargs:
        meta["kwargs"] = kwargs
    content: Any
    single_text = len(parts) == 1 and parts[0].get("type") == "text" and set(parts[0]) == {"type", "text"}
    if single_text and (parts[0]["text"] or not calls):
        content = parts[0]["text"]
    elif parts:
        content = parts
    else:
        content = ""
    if not calls and not _has_substance(content):
        content = [*(parts or []), EMPTY_PART]  # the core refuses empty messages; LlamaIndex allows them
        meta["empty"] = True
    # Message.from_dict validates by the core's rules (the same ones add() applies).
    return Message.from_dict({"role": role, "content": content, "name": name, "tool_calls": calls,
                              "tool_call_id": tool_call_id, "metadata": {META_KEY: meta} if meta else None,
                              "key": key})


def to_chat_message(message: Message) -> ChatMessage:
    """The ``ChatMessage`` a core :class:`Message` came from (or the natural one for foreign messages)."""
    meta: Mapping[str, Any] = message.metadata.get(META_KEY) or {}
    role = meta.get("role") or message.role
    kwargs: dict[str, Any] = dict(meta.get("kwargs") or {})
    if message.name is not None:
        kwargs["name"] = message.name
    if message.tool_call_id is not None:
        kwargs["tool_call_id"] = message.tool_call_id
    if message.key is not None:
        kwargs[KEY_FIELD] = message.key

    blocks: list[Any] = []
    if isinstance(message.content, str):
        if message.content or not message.tool_calls:
            blocks.append(TextBlock(text=message.content))
    else:
        blocks = [b for b in (_block(p) for p in message.content) if b is not None]

    call_blocks = meta.get("call_blocks")
    if call_blocks is not None:
        for (pos, was_str, had_id), call in zip(call_blocks, message.tool_calls):
            blocks.insert(pos, ToolCallBlock(tool_call_id=call.id if had_id else None, tool_name=call.name,
                                             tool_kwargs=call.arguments if was_str else _loads(call.arguments)))
    elif message.tool_calls and "tool_calls" not in kwargs:
        blocks += [ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=_loads(c.arguments))
                   for c in message.tool_calls]
    return ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs)


def _part(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    dump = block.model_dump(mode="json")
    if isinstance(block, ImageBlock):
        url = _image_url(block)
        if url:
            part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}, BLOCK_KEY: dump}
            if block.detail:
                part["detail"] = block.detail
            return part
    text = getattr(block, "content", None) if block.block_type == "thinking" else None
    part = {"type": f"li_{block.block_type}", BLOCK_KEY: dump}
    if isinstance(text, str) and text:
        part["caption"] = "thinking"
    return part


def _image_url(block: ImageBlock) -> str | None:
    if block.url is not None:
        return str(block.url)
    if isinstance(block.image, bytes) and block.image:
        mime = block.image_mimetype or "image/png"
        return f"data:{mime};base64,{block.image.decode('ascii', errors='replace')}"
    if block.path is not None:
        return str(block.path)
    return None


def _block(part: Mapping[str, Any]) -> Any:
    if BLOCK_KEY in part:
        return _BLOCKS.validate_python(part[BLOCK_KEY])
    kind = part.get("type")
    if kind == EMPTY_PART["type"]:
        return None
    if kind in ("text", "input_text", "output_text"):
        return TextBlock(text=str(part.get("text", "")))
    if kind in ("image_url", "image", "input_image"):
        inner = part.get("image_url")
        url = inner.get("url") if isinstance(inner, Mapping) else part.get("url") or inner
        if isinstance(url, str):
            return ImageBlock(url=url, detail=part.get("detail"))
    # A part another adapter stored that LlamaIndex has no block for: keep its text form.
    return TextBlock(text=json.dumps(dict(part), ensure_ascii=False))


def _openai_call(raw: Any) -> ToolCall:
    fn = raw.get("function") if isinstance(raw.get("function"), Mapping) else raw
    args = fn.get("arguments", "{}")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return ToolCall(str(raw["id"]), str(fn["name"]), args)


def _loads(arguments: str) -> Any:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments


def _has_substance(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content.strip())
    return any(p.get("type") != "text" or str(p.get("text", "")).strip() for p in content)
