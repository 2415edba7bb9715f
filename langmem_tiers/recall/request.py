"""What one request reads once for all of its reads.

``context()`` reads the user's memories (profile, skills, working state), the pinned ones and
recalls across the user's sessions: each of those needs the scope's namespaces, and the in-process
vector index their version counters. One :class:`~langmem_tiers.journal.base.ScopeListing` per scope
serves them all; the journal hands back the same listing across calls while the scope is unchanged.
A memo lives as long as the call that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langmem_tiers.journal.base import Journal, Scope, ScopeListing


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
