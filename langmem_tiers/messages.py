"""The message model shared by every tier and adapter.

A :class:`Message` is what the journal stores and what ``context()`` returns. It
follows the OpenAI chat format, which every framework can map to without loss:
``content`` is text or a tuple of typed parts, assistant tool calls carry their
JSON arguments as text, tool results name the call they answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.errors import InvalidMessageError

ROLES = ("system", "user", "assistant", "tool")

# Part types whose text is read for summaries, token counts and the keyword index.
TEXT_PART_TYPES = ("text", "input_text", "output_text")
IMAGE_PART_TYPES = ("image_url", "image", "input_image")

Content = str | tuple[Mapping[str, Any], ...]
MAX_KEY_CHARS = 256
MAX_CREATED_AT = 253_402_300_799  # 9999-12-31T23:59:59Z: dates past it break every datetime API


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by an assistant message."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        """The call as a JSON-ready dict (``id``, ``name``, ``arguments``)."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Message:
    """One chat message; ``id`` and ``created_at`` are set by the journal.

    Example:
        >>> Message("user", "Where is my order?").text
        'Where is my order?'
    """

    role: str
    content: Content = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: float | None = None
    id: int | None = None
    # A caller's idempotency key (e.g. LangChain's message id): adding a message whose key the
    # session already holds stores nothing and returns the stored message, so a retry never duplicates.
    key: str | None = None

    @property
    def text(self) -> str:
        """Plain text of the message: text parts, image captions, tool calls."""
        pieces = [content_text(self.content)] if self.content else []
        pieces.extend(f"{call.name}({call.arguments})" for call in self.tool_calls)
        return "\n".join(p for p in pieces if p)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :meth:`from_dict` turns back into an equal message."""
        data: dict[str, Any] = {"role": self.role, "content": _content_to_json(self.content)}
        if self.name is not None:
            data["name"] = self.name
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        if self.created_at is not None:
            data["created_at"] = self.created_at
        if self.id is not None:
            data["id"] = self.id
        if self.key is not None:
            data["key"] = self.key
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build and validate a message from :meth:`to_dict` output or an OpenAI-style dict."""
        if not isinstance(data, Mapping):
            raise InvalidMessageError(f"a message must be a mapping, got {type(data).__name__}")
        calls = data.get("tool_calls") or ()
        return make_message(
            data.get("role"),
            data.get("content"),
            name=data.get("name"),
            tool_calls=calls,
            tool_call_id=data.get("tool_call_id"),
            metadata=data.get("metadata"),
            created_at=data.get("created_at"),
            id=data.get("id"),
            key=data.get("key"),
        )


def content_text(content: Content) -> str:
    """The readable text of a content value; image parts contribute their caption."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content:
        kind = part.get("type")
        if kind in TEXT_PART_TYPES:
            pieces.append(str(part.get("text", "")))
        elif part.get("caption"):
            pieces.append(f"[{kind}: {part['caption']}]")
    return "\n".join(p for p in pieces if p)


def _content_to_json(content: Content) -> str | list[dict[str, Any]]:
    return content if isinstance(content, str) else [dict(p) for p in content]


def make_message(
    role: Any,
    content: Any = "",
    *,
    name: Any = None,
    tool_calls: Iterable[Any] = (),
    tool_call_id: Any = None,
    metadata: Any = None,
    created_at: Any = None,
    id: Any = None,
    key: Any = None,
    max_chars: int | None = None,
) -> Message:
    """Validate raw fields and build a :class:`Message`, refusing anything ambiguous.

    Raises:
        InvalidMessageError: naming the field, the bad value and the rule.
    """
    if role not in ROLES:
        raise InvalidMessageError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    calls = tuple(_tool_call(c) for c in (tool_calls or ()))
    if calls and role != "assistant":
        raise InvalidMessageError(f"only assistant messages carry tool_calls; got role {role!r}")
    if content is None:
        if not calls:
            raise InvalidMessageError(
                f"content of a {role} message is None; pass text, a list of parts, or tool_calls"
            )
        content = ""
    value = _content(content)
    if role == "tool":
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidMessageError("a tool message needs tool_call_id naming the call it answers")
    elif tool_call_id is not None:
        raise InvalidMessageError(f"tool_call_id is only for tool messages; got role {role!r}")
    if role in ("user", "system") and not content_text(value).strip() and not _has_media(value):
        raise InvalidMessageError(f"a {role} message needs non-empty content")
    # An assistant message may be empty (OpenAI's format and LangChain's AIMessage("") allow it,
    # and real logs such as LongMemEval's haystacks hold them): it is stored and counted as sent.
    if name is not None and (not isinstance(name, str) or not name):
        raise InvalidMessageError(f"name must be a non-empty string or None; got {name!r}")
    if name is not None:
        _check_text(name, "name")
    meta = _metadata(metadata)
    if max_chars is not None:
        size = len(content_text(value)) + sum(len(c.arguments) for c in calls)
        if size > max_chars:
            raise InvalidMessageError(
                f"message has {size} characters, over max_message_chars ({max_chars}): "
                "split it, store it elsewhere and keep a reference, or raise max_message_chars"
            )
    if created_at is not None and (isinstance(created_at, bool) or not isinstance(created_at, (int, float))
                                   or not math.isfinite(created_at)):
        raise InvalidMessageError(f"created_at must be finite unix seconds; got {created_at!r}")
    if created_at is not None and not 0 <= created_at <= MAX_CREATED_AT:
        hint = " (milliseconds? divide by 1000)" if created_at > MAX_CREATED_AT else ""
        raise InvalidMessageError(
            f"created_at ({created_at!r}) must be unix seconds between 0 and {MAX_CREATED_AT} "
            f"(year 9999){hint}"
        )
    if key is not None:
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise InvalidMessageError(f"key must be a non-empty string of at most {MAX_KEY_CHARS} characters; "
                                      f"got {key!r:.80}")
        _check_text(key, "key")
    return Message(
        role=role,
        content=value,
        name=name,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        metadata=meta,
        created_at=None if created_at is None else float(created_at),
        id=id,
        key=key,
    )


def _check_text(text: str, where: str) -> str:
    if "\x00" in text:
        raise InvalidMessageError(f"{where} contains a NUL byte; remove it before storing")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidMessageError(
            f"{where} is not valid unicode (lone surrogate at {e.start}); decode the source properly"
        ) from e
    return text


def _content(content: Any) -> Content:
    if isinstance(content, str):
        return _check_text(content, "content")
    if isinstance(content, (list, tuple)):
        return tuple(_part(p, i) for i, p in enumerate(content))
    raise InvalidMessageError(
        f"content must be a string or a list of parts; got {type(content).__name__}"
    )


def _part(part: Any, index: int) -> Mapping[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": _check_text(part, f"content part {index}")}
    if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
        raise InvalidMessageError(f"content part {index} must be a dict with a string 'type'; got {part!r:.80}")
    kind = part["type"]
    if kind in TEXT_PART_TYPES and not isinstance(part.get("text"), str):
        raise InvalidMessageError(f"content part {index} of type {kind!r} needs a string 'text'")
    if kind in IMAGE_PART_TYPES and not _image_source(part):
        raise InvalidMessageError(
            f"content part {index} of type {kind!r} needs a url, image_url.url, data or file_id"
        )
    try:
        json.dumps(part, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InvalidMessageError(f"content part {index} is not JSON-serializable: {e}") from e
    _check_strings(part, f"content part {index}")
    return dict(part)


def _check_strings(value: Any, where: str) -> None:
    """Apply the text rules (no NUL, valid unicode) to every string inside a JSON value."""
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_text(str(key), where)
            _check_strings(item, where)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_strings(item, where)


def _image_source(part: Mapping[str, Any]) -> bool:
    inner = part.get("image_url")
    if isinstance(inner, Mapping):
        return isinstance(inner.get("url"), str)
    return any(isinstance(part.get(k), str) for k in ("url", "data", "file_id", "image_url", "base64"))


def _has_media(content: Content) -> bool:
    return not isinstance(content, str) and any(p.get("type") not in TEXT_PART_TYPES for p in content)


def _tool_call(call: Any) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    if not isinstance(call, Mapping):
        raise InvalidMessageError(f"a tool call must be a dict; got {call!r:.80}")
    inner = call.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
    call_id, name, args = call.get("id"), fn.get("name"), fn.get("arguments", fn.get("args", "{}"))
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessageError(f"a tool call needs a non-empty string id; got {call_id!r}")
    if not isinstance(name, str) or not name:
        raise InvalidMessageError(f"tool call {call_id!r} needs a non-empty name")
    if not isinstance(args, str):
        try:
            args = json.dumps(args, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as e:
            raise InvalidMessageError(f"arguments of tool call {call_id!r} are not JSON: {e}") from e
    return ToolCall(id=call_id, name=name, arguments=_check_text(args, f"tool call {call_id!r}"))


def _metadata(metadata: Any) -> Mapping[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidMessageError(f"metadata must be a dict; got {type(metadata).__name__}")
    try:
        json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidMessageError(f"metadata must be JSON-serializable (no NaN): {e}") from e
    _check_strings(metadata, "metadata")
    return dict(metadata)
