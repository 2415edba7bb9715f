"""What an extraction returns, and what ``facts()`` lists."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# The kinds an extractor may give a memory (the list). "relation" memories are
# facts about the people in the user's life ("my sister Ana lives in Porto").
EXTRACTED_KINDS = ("fact", "preference", "event", "skill", "relation")


@dataclass(frozen=True)
class Triple:
    """A subject-relation-object reading of a memory: ``("user", "lives_in", "Lisbon")``."""

    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class ExtractedMemory:
    """One memory found in evicted turns, by an LLM in the summary call or offline.

    ``message_ids`` are the journal messages it came from: erasing all of them erases the
    memory (and its triple, stored with it). ``key`` (optional) names what it is the
    value of, so a later memory with the same key supersedes it.
    """

    text: str
    kind: str = "fact"
    key: str | None = None
    triple: Triple | None = None
    confidence: float = 1.0
    message_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Fact:
    """One of the user's memories as :meth:`~langmem_tiers.TieredMemory.facts` lists it.

    ``source`` is ``"explicit"`` for ``remember()``, else the ids of the messages it was
    extracted from. ``valid_to`` is set once a newer memory with the same key superseded it.
    ``metadata`` is the memory's own (an event's type and outcome, a preference's category, a
    skill's record, ...; not compared or hashed); ``tags`` as given to ``remember()``.
    """

    id: int
    text: str
    kind: str
    key: str | None
    valid_from: float
    valid_to: float | None
    source: Literal["explicit"] | tuple[int, ...]
    importance: float
    confidence: float | None = None
    triple: Triple | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def current(self) -> bool:
        """Whether nothing superseded this fact yet (no ``valid_to``)."""
        return self.valid_to is None
