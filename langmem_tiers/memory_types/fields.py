"""Metadata fields and kinds of the typed memories, and the checks of ``remember()``'s options.

A memory's typed fields live in its record's metadata (the journal stores any JSON
there), so every backend holds them without a schema change:

=================  ==============================================================
``expires_at``     unix seconds (UTC) after which the memory is gone (:mod:`.expiry`)
``category``       a preference's category (``"food"``, ``"travel"``)
``triggers``       a skill's trigger phrases (:mod:`.skills`)
``uses``           how often a skill's outcome was recorded
``successes``      how many of those succeeded
``event_type``     an event's type (:mod:`.events`)
``outcome``        an event's outcome, when known
``value``          a working-memory entry's JSON value (:mod:`.working`)
=================  ==============================================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from langmem_tiers.errors import InvalidMessageError
from langmem_tiers.journal.base import SKILL_KIND as SKILL_KIND  # the journal's listings track who holds one

EXPIRES_AT = "expires_at"
CATEGORY = "category"
TRIGGERS = "triggers"
USES = "uses"
SUCCESSES = "successes"
EVENT_TYPE = "event_type"
OUTCOME = "outcome"
VALUE = "value"

WORKING_KIND = "working"
EVENT_KIND = "event"

MAX_LABEL_CHARS = 64  # a category or an event type: a short label
MAX_TRIGGERS = 32
MAX_TRIGGER_CHARS = 200


def check_ttl(ttl: Any) -> float:
    """A time to live in seconds: a finite number > 0."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
        raise InvalidMessageError(
            f"ttl ({ttl!r}) must be a positive number of seconds (e.g. 3600 for an hour); "
            "to erase a memory now use forget(record_id)")
    return float(ttl)


def check_time(name: str, value: Any) -> float:
    """A point in time: finite unix seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidMessageError(f"{name} ({value!r:.80}) must be a time in unix seconds (e.g. time.time())")
    return float(value)


def check_label(name: str, value: Any) -> str:
    """A short non-empty label (a category, an event type)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_LABEL_CHARS or "\x00" in value:
        raise InvalidMessageError(
            f"{name} ({value!r:.80}) must be a non-empty string of at most {MAX_LABEL_CHARS} characters, "
            "e.g. 'food'")
    return value.strip()


def check_triggers(kind: str, triggers: Any) -> list[str]:
    """A skill's trigger phrases: a non-empty list of non-empty strings."""
    if kind != SKILL_KIND:
        raise InvalidMessageError(f"triggers are for kind='skill' (got kind={kind!r}): drop triggers or store a skill")
    if isinstance(triggers, str) or not isinstance(triggers, Sequence) or not triggers \
            or len(triggers) > MAX_TRIGGERS:
        raise InvalidMessageError(
            f"triggers ({triggers!r:.80}) must be a list of 1 to {MAX_TRIGGERS} phrases, e.g. ['deploy fails']")
    out = []
    for t in triggers:
        if not isinstance(t, str) or not t.strip() or len(t) > MAX_TRIGGER_CHARS or "\x00" in t:
            raise InvalidMessageError(
                f"each trigger must be a non-empty phrase of at most {MAX_TRIGGER_CHARS} characters; got {t!r:.80}")
        out.append(" ".join(t.split()))
    return out


def typed_metadata(kind: str, metadata: dict[str, Any], *, now: float, ttl: Any = None,
                   triggers: Any = None, category: Any = None) -> dict[str, Any]:
    """``metadata`` with the typed fields of ``remember()``'s options set (validated; refused, never repaired).

    Example:
        >>> typed_metadata("skill", {}, now=100.0, ttl=60, triggers=["tests fail"], category="ci")
        {'expires_at': 160.0, 'triggers': ['tests fail'], 'uses': 0, 'successes': 0, 'category': 'ci'}
    """
    out = dict(metadata)
    if ttl is not None:
        out[EXPIRES_AT] = now + check_ttl(ttl)
    elif EXPIRES_AT in out:
        out[EXPIRES_AT] = check_time("metadata['expires_at']", out[EXPIRES_AT])
    if triggers is not None:
        out[TRIGGERS] = check_triggers(kind, triggers)
    if kind == SKILL_KIND:
        out.setdefault(USES, 0)
        out.setdefault(SUCCESSES, 0)
    if category is not None:
        out[CATEGORY] = check_label("category", category)
    return out
