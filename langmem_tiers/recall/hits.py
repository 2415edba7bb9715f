"""What a recall query returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.journal.base import Namespace


@dataclass(frozen=True)
class RecallHit:
    """One recalled record, with the parts of its score (why it was recalled).

    ``message_ids`` are the journal messages it came from (empty for an explicit
    memory); ``parts`` holds the keyword and vector ranks, the fused score and
    the recency and importance factors (a rank is ``None`` when that side did not find it).
    ``valid_to``: when a superseded memory stopped being current (``None``: current), as the search read it.
    """

    record_id: int
    kind: str
    text: str
    score: float
    parts: Mapping[str, float | None]
    namespace: Namespace
    message_ids: tuple[int, ...] = ()
    created_at: float = 0.0
    importance: float = 0.5
    pinned: bool = False
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    valid_to: float | None = None
