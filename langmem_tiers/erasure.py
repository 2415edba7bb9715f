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

For the copies no engine erases in place, open the memory with a keyring
(``TieredMemory.open(..., keyring=...)``, :mod:`langmem_tiers.keyring`): stored text is then
encrypted with a per-user key kept outside the database, and ``forget`` of a user's last
session destroys the key (crypto-shredding), so WAL, dead tuples, replicas and backups hold
ciphertext nobody can open. Erasing one record or one session of a user who keeps other
sessions cannot shred (the key is shared): those copies stay readable to the key's holder.

:func:`erase_report` then scans each store for texts the caller erased and says what remains,
and whether the user's key is destroyed. The guarantees, store by store, are in
``docs/core/erasure.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langmem_tiers.errors import ConfigError
from langmem_tiers.journal.base import Namespace


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
class KeyStatus:
    """Whether the key that sealed a user's (or anonymous session's) text still exists.

    ``destroyed`` is ``None`` when the journal is not encrypted (there is no key to destroy).
    """

    who: str
    destroyed: bool | None
    note: str = ""


@dataclass(frozen=True)
class EraseReport:
    """Per store: copies of each erased text still found, and what could not be checked; the user's key."""

    stores: tuple[StoreResidue, ...] = field(default_factory=tuple)
    key: KeyStatus | None = None

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
        if self.key is not None:
            state = {None: "not encrypted", True: "destroyed", False: "present"}[self.key.destroyed]
            lines.append(f"key of {self.key.who}: {state}" + (f" ({self.key.note})" if self.key.note else ""))
        return "\n".join(lines)


def erase_report(journal: Any, store: Any | None, needles: Sequence[str],
                 namespace: Namespace | None = None) -> EraseReport:
    """Scan the journal and the vector store for raw copies of ``needles`` (UTF-8 bytes); with a
    ``namespace``, also say whether the key that sealed its user's text is destroyed."""
    if isinstance(needles, str) or not all(isinstance(n, str) and n for n in needles):
        raise ConfigError("needles must be a list of non-empty strings: the texts that were erased")
    stores = [_scan("journal", journal, needles)]
    if store is not None:
        stores.append(_scan("vectors", store, needles))
    elif journal.has_vectors():
        pending = journal.outbox_count()
        stores.append(StoreResidue("vectors", None, (
            f"this handle has no vector store, but the journal's records are indexed in one; {pending} outbox "
            "rows (vector deletions among them) wait for a handle with vectors to apply them" if pending else
            "this handle has no vector store, but the journal's records are indexed in one; no deletion waits "
            "in the outbox")))
    return EraseReport(tuple(stores), _key_status(journal, namespace) if namespace is not None else None)


def _key_status(journal: Any, ns: Namespace) -> KeyStatus:
    who = f"user {ns.user_id!r}" if ns.user_id else f"anonymous session {ns.session_id!r}"
    destroyed = journal.key_destroyed(ns) if hasattr(journal, "key_destroyed") else None
    if destroyed is None:
        note = ("the journal is not encrypted: copies outside the live files (PostgreSQL WAL and dead tuples, "
                "replicas, backups) keep the plaintext until rotated; open with keyring= to crypto-shred")
    elif destroyed:
        note = "copies of this user's text anywhere (WAL, dead tuples, replicas, backups) are unreadable"
    else:
        note = ("the user still has sessions (or was never forgotten), so the shared key stays: copies of records "
                "or sessions erased meanwhile stay readable to whoever holds the key; forget('user') destroys it")
    return KeyStatus(who, destroyed, note)


def _scan(name: str, target: Any, needles: Sequence[str]) -> StoreResidue:
    try:
        counts = target.residue(list(needles))
    except ConfigError as e:  # e.g. a Chroma server: its files are on another host
        return StoreResidue(name, None, str(e))
    note = getattr(target, "residue_note", "")
    if getattr(target, "encrypted", False):
        # Sealed rows never hold plaintext, erased or not: for them the key line is what counts.
        sealed = "user text is stored encrypted, so a raw scan finds none even before an erase: see the key line"
        note = f"{sealed}; {note}" if note else sealed
    return StoreResidue(name, dict(counts), note)
