"""The public face of the tier core, :class:`TieredMemory`, and the modules behind it by concern.

- :mod:`.tiered`: ``TieredMemory`` itself: each public method runs one flow, sync or async.
- :mod:`.opening`: ``open()``: journal backend, keyring, vector store, collection; the recall mode.
- :mod:`.writes`: validating and appending messages and memories; indexing and the expiry sweep after a write.
- :mod:`.summary_schedule`: evicted turns folded into the summary (background or inline), backoff, extraction.
- :mod:`.context_flow`: what ``context()`` gathers (pinned, profile, skills, working state, recall).
- :mod:`.reads`: window snapshot, summary history, search, facts.
- :mod:`.typed`: the typed-memory operations (events, expiry, skills and outcomes).
- :mod:`.management`: ``forget``, ``clear``, ``compact``, ``cleanup``, ``consolidate``, ``link``, ``pin``, ``reindex``.
- :mod:`.stats`: :class:`Stats`.
"""

from langmem_tiers.memory.opening import CHROMA_DIR, COLLECTION_LAYOUT, JOURNAL_FILE, KEYS_DIR
from langmem_tiers.memory.stats import Stats
from langmem_tiers.memory.tiered import TieredMemory
from langmem_tiers.memory.writes import MEMORY_KINDS

__all__ = ["CHROMA_DIR", "COLLECTION_LAYOUT", "JOURNAL_FILE", "KEYS_DIR", "MEMORY_KINDS", "Stats", "TieredMemory"]
