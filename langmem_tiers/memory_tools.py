"""The framework-free half of the memory tools (``remember``, ``recall``, ``forget``) for tool-calling agents.

Both integrations give agents these three tools: LangChain as ``StructuredTool``\\ s
(``langchain_langmem_tiers.create_memory_tools``), LlamaIndex as ``FunctionTool``\\ s
(``llama_index.memory.langmem_tiers.create_memory_tools``). What does not depend on the framework is
here, once: the tools' names and descriptions, the rules of their arguments (limits, kinds, the
descriptions the model reads in the schema), and the texts the model reads back. Each integration
builds its framework's tool objects and argument schema from a :class:`MemoryToolSpec`, so the two
agree word for word and refuse the same arguments.

Example:
    >>> spec = MemoryToolSpec.of(names={"recall": "search_memory"})
    >>> [spec.names[tool] for tool in MEMORY_TOOLS]
    ['remember', 'search_memory', 'forget']
    >>> spec.remembered(7, "Ada drinks green tea.")
    'Remembered as memory 7: Ada drinks green tea.'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, ClassVar, Literal, cast, get_args

from langmem_tiers.errors import ConfigError
from langmem_tiers.recall.hits import RecallHit

MemoryToolScope = Literal["session", "user", "agent"]
"""How far ``recall`` searches: the session, the user's sessions with this agent, or all the user's sessions."""

MemoryToolKind = Literal["fact", "preference", "event", "skill", "note", "relation"]
"""The kinds of memory ``remember`` accepts (the argument ``kind``; default ``"fact"``)."""

MEMORY_TOOLS = ("remember", "recall", "forget")
"""The three memory tools, by their default names (the keys of :attr:`MemoryToolSpec.names`)."""

DEFAULT_TOOL_NAMES: Mapping[str, str] = MappingProxyType({tool: tool for tool in MEMORY_TOOLS})
"""The tools' names; ``create_memory_tools(names={"recall": "search_memory"})`` renames one."""

DEFAULT_TOOL_DESCRIPTIONS: Mapping[str, str] = MappingProxyType({
    "remember": (
        "Save one durable memory about the user (a fact, preference, event, skill, relation or note) so "
        "that it can be recalled in later conversations. Write it as one self-contained sentence. Give a key "
        "(snake_case, e.g. home_city) for a value that can change: a newer memory with the same key replaces "
        "the older one. Returns its memory id."
    ),
    "recall": (
        "Search the user's long-term memory (saved memories and earlier conversations, also from other "
        "sessions) and return the best matches with their memory ids, kinds and dates."
    ),
    "forget": (
        "Erase one memory of the user for good, by the memory id that remember or recall returned. "
        "Use it when the user asks to forget something or a memory is wrong."
    ),
})
"""What the model reads about each tool (by default name)."""

_SCOPES = get_args(MemoryToolScope)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic accept as a tool name


@dataclass(frozen=True)
class MemoryToolSpec:
    """The memory tools of one agent, whatever its framework: names, recall reach and the rules of arguments.

    Build it with :meth:`of`, which validates. An integration turns it into its framework's tools:
    ``names[tool]`` and ``DESCRIPTIONS[tool]`` for each of :data:`MEMORY_TOOLS`, an argument schema from
    the limits and :attr:`ARGUMENTS` (the descriptions the model reads), and the replies from
    :meth:`remembered`, :meth:`forgot`, :meth:`unknown_memory`, :meth:`format_hits` and
    :meth:`invalid_arguments`.

    Attributes:
        names: each tool's name, by its default name.
        scope: how far ``recall`` searches: ``"user"``, ``"agent"`` or ``"session"``.
        kinds: the record kinds ``recall`` returns; ``None`` for every kind (earlier turns included).
    """

    names: Mapping[str, str]
    scope: MemoryToolScope = "user"
    kinds: tuple[str, ...] | None = None

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = DEFAULT_TOOL_DESCRIPTIONS
    MAX_MEMORY_CHARS: ClassVar[int] = 2000  # one memory is a sentence or a short paragraph, not a document
    MAX_QUERY_CHARS: ClassVar[int] = 1000
    MAX_RECALL_K: ClassVar[int] = 20
    ARGUMENTS: ClassVar[Mapping[str, str]] = MappingProxyType({
        "text": "the memory, one sentence",
        "importance": "0 (trivia) to 1 (essential)",
        "key": "optional snake_case name, e.g. home_city; replaces an older memory with the same key",
        "query": "what to look for",
        "k": "how many results",
        "record_id": "the memory id from remember or recall",
    })

    @classmethod
    def of(cls, names: Mapping[str, str] | None = None, scope: str = "user",
           kinds: Sequence[str] | None = None) -> MemoryToolSpec:
        """A checked spec: ``names`` renames some tools, ``scope`` and ``kinds`` shape ``recall``.

        Raises:
            ConfigError: an unknown tool in ``names``, a name a model API refuses (1-64 letters, digits,
                ``_`` or ``-``), two tools with one name, or a bad ``scope`` or ``kinds``.
        """
        chosen = dict(DEFAULT_TOOL_NAMES)
        if names is not None and not isinstance(names, Mapping):
            raise ConfigError(f"names must be a dict of tool -> name; got {type(names).__name__}")
        for tool, name in (names or {}).items():
            if tool not in DEFAULT_TOOL_NAMES:
                raise ConfigError(f"names has an unknown tool {tool!r}: rename 'remember', 'recall' or 'forget'")
            if not isinstance(name, str) or not _NAME.match(name):
                raise ConfigError(f"tool name {name!r} for {tool!r} must be 1-64 letters, digits, '_' or '-'")
            chosen[tool] = name
        if len(set(chosen.values())) != len(MEMORY_TOOLS):
            raise ConfigError(f"tool names must differ; got {chosen}")
        if scope not in _SCOPES:
            raise ConfigError(f"scope ({scope!r}) must be 'session', 'user' or 'agent'")
        if kinds is not None and (isinstance(kinds, str) or not all(isinstance(k, str) and k for k in kinds)):
            raise ConfigError(f"kinds ({kinds!r:.80}) must be a list of record kinds, e.g. ['fact'], or None")
        return cls(MappingProxyType(chosen), cast(MemoryToolScope, scope), tuple(kinds) if kinds is not None else None)

    @staticmethod
    def remembered(record_id: int, text: str) -> str:
        """The reply of ``remember``: the new memory's id, which ``forget`` takes."""
        return f"Remembered as memory {record_id}: {text}"

    @staticmethod
    def forgot(record_id: int) -> str:
        """The reply of ``forget`` when the memory was erased."""
        return f"Forgot memory {record_id}."

    @staticmethod
    def unknown_memory(record_id: int) -> str:
        """The refusal of ``forget`` when nothing was erased (give it to the model as a tool error).

        The same answer for an id that does not exist and for one of another user, so nothing leaks.
        """
        return f"no memory {record_id} in this user's memory: use an id that recall returned"

    @staticmethod
    def format_hits(hits: Iterable[RecallHit]) -> str:
        """The reply of ``recall``: one line per hit (id, kind, date, text; continuation lines indented).

        Example:
            >>> MemoryToolSpec.format_hits([])
            'No memories found.'
        """
        lines = []
        for hit in hits:
            day = datetime.fromtimestamp(hit.created_at, timezone.utc).strftime("%Y-%m-%d") if hit.created_at else "?"
            text = hit.text.replace("\n", "\n  ")  # continuation lines indented: each hit starts a line
            lines.append(f"[memory {hit.record_id}] ({hit.kind}, {day}) {text}")
        return "\n".join(lines) if lines else "No memories found."

    @staticmethod
    def invalid_arguments(errors: Iterable[Mapping[str, Any]]) -> str:
        """The refusal of arguments that break the schema, from pydantic's ``ValidationError.errors()``
        (dicts with ``loc`` and ``msg``): each field and rule, and what to do."""
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or 'arguments'}: {e.get('msg', 'invalid')}" for e in errors
        )
        return f"invalid arguments ({problems}). Fix them and call the tool again."
