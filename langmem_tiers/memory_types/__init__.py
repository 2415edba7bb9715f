"""The memory types beyond conversation: expiry, working memory, skills, events, preferences by category.

All of them are records in the one journal (same recall, same erasure), told apart by
``kind`` and a few metadata fields (:mod:`.fields`):

* :mod:`.expiry`: ``metadata["expires_at"]`` on any memory; expired records are never
  delivered nor returned, and are erased by ``cleanup()`` and a periodic sweep.
* :mod:`.working`: a per-session key/value scratchpad (kind ``"working"``), delivered in
  ``context()`` as the "working state" block.
* :mod:`.skills`: ``kind="skill"`` with ``triggers`` and a success record feeding the ranking.
* :mod:`.events`: ``kind="event"`` with ``event_type``, ``outcome`` and the time it happened.

This package imports nothing at import time: ``langmem_tiers.recall.engine`` reads the
constants of :mod:`.fields`, and the modules here import the recall engine.
"""
