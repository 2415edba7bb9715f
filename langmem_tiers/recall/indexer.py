"""The background indexer: embedding stays off the add() and query paths.

``add()`` commits messages and their recall records (with outbox rows) and returns;
this thread drains the outbox into the vector store when woken after an add, and
every ``interval`` seconds for rows whose retry delay ran out. Work is claimed with
a lease (see :meth:`RecallIndex.index_flow`), so any number of processes may run one
against a shared journal. ``flush()`` drains the rest in the caller's thread, after
waiting for the batch in flight here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class BackgroundIndexer:
    """One daemon thread per recall index, started on the first wake-up."""

    def __init__(self, drain: Callable[[], int], *, interval: float = 5.0, name: str = "langmem-tiers-indexer") -> None:
        self._drain = drain
        self._interval = interval
        self._name = name
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        # Held while a batch is in flight: flush() takes it to wait for that batch.
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

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                with self.working:
                    self._drain()
            except Exception:  # the index flow records its own errors; never let the thread die
                log.exception("background indexing failed; the rows stay pending")
