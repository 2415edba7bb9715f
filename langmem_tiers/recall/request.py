"""What one request reads once for all of its reads.

``context()`` reads the user's memories (profile, skills, working state), the pinned ones and
recalls across the user's sessions: each of those needs the scope's namespaces, and the in-process
vector index their version counters. One :class:`~langmem_tiers.journal.base.ScopeListing` per scope
serves them all; the journal hands back the same listing across calls while the scope is unchanged.
A memo lives as long as the call that made it. The reads of memories, pinned records, keyed ones and
skills probe only the sessions the listing says hold one (:func:`ids_to_probe`): a user of 10,000
sessions of turns and a few memories costs a few index probes, not 10,000, and so do the skills, keyed
and pinned memories of a user whose every session holds an extracted fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langmem_tiers.journal.base import SKILL_KIND, Journal, Scope, ScopeListing


@dataclass
class RequestMemo:
    """The scopes' listings read so far in one call."""

    listings: dict[Scope, ScopeListing] = field(default_factory=dict)


def scope_listing(journal: Journal, scope: Scope, memo: RequestMemo | None = None) -> ScopeListing:
    """The scope's namespaces and their counters: from the memo when this request read them already."""
    if memo is None:
        return journal.scope_listing(scope)
    found = memo.listings.get(scope)
    if found is None:
        found = memo.listings[scope] = journal.scope_listing(scope)
    return found


def ids_to_probe(listing: ScopeListing, kinds: Sequence[str] | None = None, pinned_only: bool = False,
                 keyed_only: bool = False) -> Sequence[int]:
    """The namespaces of ``listing`` where ``Journal.scoped_records(ids, kinds, pinned_only)`` can find a
    record, in id order: when it asks for pinned records only, those holding one (``ScopeListing.pinned``);
    for keyed ones only (``keyed_only``), those holding one (``keyed``); when it leaves turns out (kinds
    without ``"turn"``), those holding a skill for skills alone (``skills``), those holding a memory
    or a pinned record else (``memories``); every one otherwise.
    """
    if pinned_only:
        return listing.pinned
    if keyed_only:
        return listing.keyed
    if kinds and "turn" not in kinds:
        return listing.skills if set(kinds) == {SKILL_KIND} else listing.memories
    return listing.ids
