"""A clock tests move by hand, for everything that reads ``memory.clock`` (expiry, TTL, sweeps)."""

from __future__ import annotations

T0 = 1_800_000_000.0  # a fixed start, far from the epoch and from today


class FakeClock:
    """The memory's clock, moved by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
