"""The background indexer thread: wake-ups, coalescing bursts, stop and the flush handshake.

The drain is a counter here (the real index flow is covered through TieredMemory in the recall
tests); what is tested is when the thread calls it.
"""

from __future__ import annotations

import threading
import time

import pytest

from langmem_tiers.errors import ConfigError
from langmem_tiers.recall.indexer import BackgroundIndexer


class Drains:
    def __init__(self) -> None:
        self.calls = 0
        self.called = threading.Event()

    def __call__(self) -> int:
        self.calls += 1
        self.called.set()
        return 0


def _wait_until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_wake_up_drains_without_coalescing() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains)
    try:
        indexer.wake()
        assert drains.called.wait(30)
    finally:
        indexer.stop()
    assert drains.calls == 1


def test_a_burst_of_wake_ups_is_drained_once_when_coalescing() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains, coalesce_s=5.0, coalesce_max_s=0.5)
    try:
        for _ in range(20):  # adds in a burst: each within coalesce_s of the last
            indexer.wake()
        assert drains.called.wait(30)
        time.sleep(0.1)  # a second drain, if one were coming, would start now
    finally:
        indexer.stop()
    assert drains.calls == 1


def test_flush_waiting_on_working_gets_it_after_the_coalesced_drain() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains, coalesce_s=5.0, coalesce_max_s=0.3)
    try:
        indexer.wake()
        _wait_until(indexer.working.locked)  # the thread is coalescing, holding the lock
        with indexer.working:  # what flush() does (wait_free): it must not overtake the drain
            assert drains.calls == 1
    finally:
        indexer.stop()


def test_stop_while_coalescing_leaves_the_rows_pending() -> None:
    drains = Drains()
    indexer = BackgroundIndexer(drains, coalesce_s=60.0, coalesce_max_s=60.0)
    indexer.wake()
    _wait_until(indexer.working.locked)
    indexer.stop()  # returns without waiting out the burst
    assert drains.calls == 0
    indexer.wake()  # after stop: no new thread, nothing drained
    assert drains.calls == 0


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"coalesce_s": -1}, "coalesce_s (-1)"),
    ({"coalesce_max_s": True}, "coalesce_max_s (True)"),
    ({"interval": 0}, "interval (0)"),
    ({"interval": "5"}, "interval ('5')"),
])
def test_bad_timings_are_refused(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        BackgroundIndexer(lambda: 0, **kwargs)  # type: ignore[arg-type]
