"""Effects and their drivers: each operation is written once as a generator.

An operation yields effects (blocking I/O, a summarizer call, an embedding call)
and receives their results. ``run_sync`` performs them in the calling thread;
``run_async`` awaits the async variants and moves blocking I/O off the event
loop. Errors raised by an effect are thrown back into the generator, so the
operation handles them in one place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langmem_tiers.embedders.base import Embedder
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest

T = TypeVar("T")


@dataclass(frozen=True)
class Blocking:
    """Blocking I/O (journal, vector store): run inline, or in a worker thread under asyncio."""

    fn: Callable[[], Any]


def wait_free(lock: Any) -> Blocking:
    """An effect that waits until ``lock`` is free: taken and released at once in the worker, so a
    cancelled caller never leaves it held (unlike acquiring it in a thread for the caller)."""

    def wait() -> None:
        with lock:
            pass

    return Blocking(wait)


@dataclass(frozen=True)
class Summarize:
    request: SummaryRequest


@dataclass(frozen=True)
class Embed:
    texts: Sequence[str]


Effect = Blocking | Summarize | Embed
Flow = Generator[Effect, Any, T]


class Drivers:
    """Holds the collaborators the effects need."""

    def __init__(self, summarizer: Summarizer | None, embedder: Embedder | None) -> None:
        self.summarizer = summarizer
        self.embedder = embedder

    def run_sync(self, flow: Flow[T]) -> T:
        send: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = flow.throw(error) if error is not None else flow.send(send)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            send, error = None, None
            try:
                send = self._sync(effect)
            except Exception as e:
                error = e

    async def run_async(self, flow: Flow[T]) -> T:
        send: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    effect = flow.throw(error) if error is not None else flow.send(send)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                send, error = None, None
                try:
                    send = await self._async(effect)
                except Exception as e:
                    error = e
        except BaseException:
            # Cancelled (or the loop is closing): run the flow's finally blocks now, so a lock it
            # holds is released at once instead of whenever the generator is collected.
            flow.close()
            raise

    def _sync(self, effect: Effect) -> Any:
        if isinstance(effect, Blocking):
            return effect.fn()
        if isinstance(effect, Summarize):
            return self._summarizer().summarize(effect.request)
        return self._embedder().embed(list(effect.texts))

    async def _async(self, effect: Effect) -> Any:
        if isinstance(effect, Blocking):
            return await asyncio.to_thread(effect.fn)
        if isinstance(effect, Summarize):
            return await self._summarizer().asummarize(effect.request)
        return await self._embedder().aembed(list(effect.texts))

    def _summarizer(self) -> Summarizer:
        if self.summarizer is None:
            raise RuntimeError("a Summarize effect was yielded but no summarizer is configured")
        return self.summarizer

    def _embedder(self) -> Embedder:
        if self.embedder is None:
            raise RuntimeError("an Embed effect was yielded but no embedder is configured")
        return self.embedder
