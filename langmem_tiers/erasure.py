"""Erasure you can verify: what ``forget(..., physical=True)`` guarantees, and a report per store.

``forget`` always removes the data from every API at once (journal rows, keyword index, the
vectors through the outbox). Deleted bytes can still sit in the engines' files until they are
rewritten; ``physical=True`` asks each engine to rewrite them now:

- SQLite journal: ``secure_delete`` zeroes freed pages, the FTS5 index is merged so erased
  terms leave its segments, and the WAL is checkpointed and truncated.
- Embedded Chroma: the collection is rebuilt from its live rows and its SQLite file vacuumed
  (cost: one pass over every live row of the deployment: run it for erasures, not per request).
  Chroma holds ids, vectors and namespace ids only, never texts or user ids.
- PostgreSQL: the tables are vacuumed; dead tuples already written to the WAL and to backups
  cannot be erased in place (say so to your users; rotate WAL and backups by your policy).
- A Chroma server: compaction is the server operator's job (another replica may be writing).

:func:`erase_report` then scans each store for texts the caller erased and says what remains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.errors import ConfigError


@dataclass(frozen=True)
class StoreResidue:
    """What one store still holds of the erased texts (``None``: this store cannot be scanned here)."""

    store: str
    counts: Mapping[str, int] | None
    note: str = ""

    @property
    def clean(self) -> bool | None:
        return None if self.counts is None else not any(self.counts.values())


@dataclass(frozen=True)
class EraseReport:
    """Per store: copies of each erased text still found, and what could not be checked."""

    stores: tuple[StoreResidue, ...] = field(default_factory=tuple)

    @property
    def clean(self) -> bool:
        """True when every scanned store holds no copy (stores that cannot be scanned do not count)."""
        return all(s.clean is not False for s in self.stores)

    def explain(self) -> str:
        lines = []
        for s in self.stores:
            if s.counts is None:
                lines.append(f"{s.store}: not scanned ({s.note})")
            else:
                found = {k: v for k, v in s.counts.items() if v}
                state = "clean" if not found else f"{sum(found.values())} copies of {len(found)} texts"
                lines.append(f"{s.store}: {state}" + (f" ({s.note})" if s.note else ""))
        return "\n".join(lines)


def erase_report(journal: Any, store: Any | None, needles: Sequence[str]) -> EraseReport:
    """Scan the journal and the vector store for raw copies of ``needles`` (UTF-8 bytes)."""
    if isinstance(needles, str) or not all(isinstance(n, str) and n for n in needles):
        raise ConfigError("needles must be a list of non-empty strings: the texts that were erased")
    stores = [_scan("journal", journal, needles)]
    if store is not None:
        stores.append(_scan("vectors", store, needles))
    return EraseReport(tuple(stores))


def _scan(name: str, target: Any, needles: Sequence[str]) -> StoreResidue:
    try:
        counts = target.residue(list(needles))
    except ConfigError as e:  # e.g. a Chroma server: its files are on another host
        return StoreResidue(name, None, str(e))
    note = getattr(target, "residue_note", "")
    return StoreResidue(name, dict(counts), note)
