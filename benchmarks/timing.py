"""Wall time per named part of a run, by wrapping the methods that do the parts (ingest.py, scale.py), Python's
garbage collections (scale.py, gc_pauses.py), and the process's memory (load.py, scale.py, vector_index.py)."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class Counters:
    """Wall seconds and calls per named part, summed over threads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] += seconds
            self.calls[name] += 1

    def wrap(self, obj: Any, attr: str, name: str, undo: list[Callable[[], None]]) -> None:
        original = getattr(obj, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - t)

        setattr(obj, attr, timed)
        undo.append(lambda: setattr(obj, attr, original))

    def wrap_cm(self, obj: Any, attr: str, name: str, undo: list[Callable[[], None]]) -> None:
        """A method returning a context manager: time from the call to the end of the with block."""
        original = getattr(obj, attr)

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            t = time.perf_counter()
            try:
                with original(*args, **kwargs) as value:
                    yield value
            finally:
                self.add(name, time.perf_counter() - t)

        setattr(obj, attr, timed)
        undo.append(lambda: setattr(obj, attr, original))


@contextlib.contextmanager
def collections_timed() -> Iterator[dict[int, list[float]]]:
    """Seconds of each garbage collection made inside the block, by generation (``gc.callbacks``)."""
    pauses: dict[int, list[float]] = defaultdict(list)
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(time.perf_counter() - started[0])

    gc.callbacks.append(on_gc)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(on_gc)


def rss_kib(pid: int | None = None) -> tuple[int, int]:
    """(current RSS, peak RSS) in KiB of this process, or of process ``pid``, from /proc/PID/status
    (Linux; elsewhere both are this process's peak, from getrusage, and (0, 0) for another process)."""
    now = peak = 0
    try:
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                now = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    except OSError:
        if pid is not None:
            return 0, 0
        import resource

        peak = now = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return now, peak

