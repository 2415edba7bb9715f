"""The background indexer: embedding stays off the add() and query paths.

``add()`` commits messages and their recall records (with outbox rows) and returns;
this thread drains the outbox into the vector store when woken after an add, and
every ``interval`` seconds for rows whose retry delay ran out. Work is claimed with
a lease (see :meth:`RecallIndex.index_flow`), so any number of processes may run one
against a shared journal. ``flush()`` drains the rest in the caller's thread, after
waiting for the batch in flight here.

Coalescing (``coalesce_s``): after a wake-up the thread may wait while adds keep coming
(each within ``coalesce_s`` of the previous one, ``coalesce_max_s`` at most) so that one
drain embeds a burst in one call. It waits holding :attr:`BackgroundIndexer.working`, so
a ``flush()`` right after the last add waits at most ``coalesce_s`` longer and never embeds
beside this thread. Rows stay in the outbox while it waits: durability does not change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from langmem_tiers.errors import ConfigError

log = logging.getLogger(__name__)

# Measured by benchmarks/ingest.py (issue 15): on a 2-core CPU, starting to embed at once overlaps
# the embedder with the adds' commits (mostly fsync waits), which outweighs what bigger calls save.
DEFAULT_COALESCE_S = 0.0
DEFAULT_COALESCE_MAX_S = 0.5


class BackgroundIndexer:
    """One daemon thread per recall index, started on the first wake-up.

    Args:
        drain: indexes everything pending (returns rows done); called on this thread.
        interval: seconds between drains when nothing wakes the thread (retries of failed rows).
        coalesce_s: after a wake-up, keep waiting while the next wake-up comes within this many
            seconds (0: drain at once).
        coalesce_max_s: the longest a burst of wake-ups delays a drain.
    """

    def __init__(self, drain: Callable[[], int], *, interval: float = 5.0,
                 coalesce_s: float = DEFAULT_COALESCE_S, coalesce_max_s: float = DEFAULT_COALESCE_MAX_S,
                 name: str = "langmem-tiers-indexer") -> None:
        for label, value in (("interval", interval), ("coalesce_s", coalesce_s), ("coalesce_max_s", coalesce_max_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{label} ({value!r}) must be a number of seconds >= 0")
        if interval == 0:
            raise ConfigError("interval (0) must be > 0: it is how often failed rows are retried")
        self._drain = drain
        self._interval = interval
        self._coalesce_s = float(coalesce_s)
        self._coalesce_max_s = float(coalesce_max_s)
        self._name = name
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        # Held while a batch is in flight (and while a burst is coalesced): flush() takes it to wait.
        self.working = threading.Lock()

    def wake(self) -> None:
        """Ask for a drain soon (after an add queued rows)."""
        if self._stop.is_set():
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread after its current batch. Idempotent; rows left pending stay in the outbox."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _coalesce(self) -> None:
        """Wait while wake-ups keep coming close together (see the module docstring)."""
        deadline = time.monotonic() + self._coalesce_max_s
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or not self._wake.wait(min(self._coalesce_s, left)):
                return  # the burst ended, or it has waited long enough
            self._wake.clear()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                with self.working:
                    if self._coalesce_s > 0:
                        self._coalesce()
                        if self._stop.is_set():
                            return  # stopping: what is pending stays in the outbox
                    self._drain()
            except Exception:  # the index flow records its own errors; never let the thread die
                log.exception("background indexing failed; the rows stay pending")
