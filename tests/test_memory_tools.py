"""MemoryToolSpec: the framework-free half of both integrations' memory tools (their suites run the tools)."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

import pytest

from langmem_tiers import MEMORY_TOOLS, ConfigError, MemoryToolSpec, Namespace, RecallHit


def test_defaults_and_renames() -> None:
    spec = MemoryToolSpec.of()
    assert dict(spec.names) == {"remember": "remember", "recall": "recall", "forget": "forget"}
    assert (spec.scope, spec.kinds) == ("user", None)
    renamed = MemoryToolSpec.of({"recall": "search_memory"}, "session", ["fact", "event"])
    assert [renamed.names[t] for t in MEMORY_TOOLS] == ["remember", "search_memory", "forget"]
    assert (renamed.scope, renamed.kinds) == ("session", ("fact", "event"))
    assert isinstance(renamed.names, MappingProxyType)  # a spec cannot be renamed after its checks
    assert set(MemoryToolSpec.DESCRIPTIONS) == set(MEMORY_TOOLS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"names": {"search": "x"}}, "unknown tool 'search'"),
        ({"names": {"recall": "has space"}}, "must be 1-64 letters"),
        ({"names": {"recall": "r" * 65}}, "must be 1-64 letters"),
        ({"names": {"recall": 3}}, "must be 1-64 letters"),
        ({"names": {"recall": "remember"}}, "must differ"),
        ({"names": ["recall"]}, "must be a dict"),
        ({"scope": "everyone"}, "scope ('everyone') must be"),
        ({"kinds": "fact"}, "must be a list of record kinds"),
        ({"kinds": ["fact", ""]}, "must be a list of record kinds"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        MemoryToolSpec.of(**kwargs)


def test_replies() -> None:
    spec = MemoryToolSpec.of()
    assert spec.remembered(3, "Ada drinks tea.") == "Remembered as memory 3: Ada drinks tea."
    assert spec.forgot(3) == "Forgot memory 3."
    assert spec.unknown_memory(3) == "no memory 3 in this user's memory: use an id that recall returned"
    assert spec.format_hits([]) == "No memories found."
    hits = [
        RecallHit(7, "fact", "Ada drinks tea.\nGreen, no sugar.", 0.9, {}, Namespace.of("s"), created_at=86_400.0),
        RecallHit(8, "turn", "user: hi", 0.5, {}, Namespace.of("s")),
    ]
    assert spec.format_hits(hits) == (
        "[memory 7] (fact, 1970-01-02) Ada drinks tea.\n  Green, no sugar.\n[memory 8] (turn, ?) user: hi"
    )
    errors = [{"loc": ("k",), "msg": "Input should be less than or equal to 20"}, {"loc": (), "msg": "bad"}]
    assert spec.invalid_arguments(errors) == (
        "invalid arguments (k: Input should be less than or equal to 20; arguments: bad). "
        "Fix them and call the tool again."
    )
