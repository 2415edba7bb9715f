"""Events: things that happened, with a type, an outcome and the time they happened.

``record_event("deploy", "Deployed v2 to production", outcome="rolled back", at=t)``
stores a memory of kind ``"event"`` whose time is ``at`` (default: now, unix seconds),
with ``metadata["event_type"]`` and ``metadata["outcome"]``. Its text names the type
and the outcome, so keyword and vector recall find it by either. The seed queries
are one call each::

    memory.search("deploy", kinds=["event"], where={"event_type": "deploy"})      # by type
    memory.facts(kinds=["event"], since=time.time() - 24 * 3600)                 # the last 24 hours
    memory.search("outage", kinds=["event"], since=t0, until=t1)                   # in a time range
"""

from __future__ import annotations

from typing import Any

from langmem_tiers.errors import InvalidMessageError
from langmem_tiers.memory_types.fields import EVENT_TYPE, OUTCOME, check_label, check_time


def event_text(event_type: str, description: str, outcome: str | None) -> str:
    """The text an event is stored (and recalled) as.

    Example:
        >>> event_text("deploy", "Deployed v2", "rolled back")
        'deploy: Deployed v2 (outcome: rolled back)'
    """
    return f"{event_type}: {description}" + (f" (outcome: {outcome})" if outcome else "")


def event_fields(event_type: Any, description: Any, outcome: Any, at: Any, now: float) -> tuple[str, dict[str, Any],
                                                                                                   float]:
    """Validated ``(text, metadata, time)`` of an event."""
    kind = check_label("event_type", event_type)
    if not isinstance(description, str) or not description.strip():
        raise InvalidMessageError(f"an event needs a non-empty description; got {description!r:.80}")
    if outcome is not None and (not isinstance(outcome, str) or not outcome.strip()):
        raise InvalidMessageError(f"outcome ({outcome!r:.80}) must be a non-empty string or None")
    when = now if at is None else check_time("at", at)
    metadata: dict[str, Any] = {EVENT_TYPE: kind}
    if outcome is not None:
        metadata[OUTCOME] = outcome.strip()
    return event_text(kind, description.strip(), metadata.get(OUTCOME)), metadata, when
