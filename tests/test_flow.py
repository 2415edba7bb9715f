"""Effects run alongside an operation (``Start`` / ``Join``), under both drivers, and the search that uses
them: a query's embedding runs while the journal answers its keyword search (issue 15)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.flow import Blocking, Drivers, Flow, Join, Start

WAIT_S = 5.0  # long enough for any loaded machine; a sequential run waits it out and fails


def run_sync(flow: Flow[Any]) -> Any:
    return Drivers(None, None).run_sync(flow)


def run_async(flow: Flow[Any]) -> Any:
    return asyncio.run(Drivers(None, None).run_async(flow))


DRIVERS = [pytest.param(run_sync, id="sync"), pytest.param(run_async, id="async")]


@pytest.mark.parametrize("run", DRIVERS)
def test_a_started_effect_runs_while_the_operation_goes_on(run: Callable[[Flow[Any]], Any]) -> None:
    """The started job waits for something the operation does after starting it: run one after the other,
    it would time out."""
    signal = threading.Event()

    def flow() -> Flow[bool]:
        job = yield Start(Blocking(lambda: signal.wait(WAIT_S)))
        yield Blocking(signal.set)
        seen: bool = yield Join(job)
        return seen

    assert run(flow()) is True


@pytest.mark.parametrize("run", DRIVERS)
def test_a_jobs_error_is_raised_where_it_is_joined(run: Callable[[Flow[Any]], Any]) -> None:
    steps: list[str] = []

    def fail() -> None:
        raise LookupError("the job failed")

    def flow() -> Flow[str]:
        job = yield Start(Blocking(fail))
        steps.append("went on")
        try:
            yield Join(job)
        except LookupError as e:
            return str(e)
        return "no error"

    assert run(flow()) == "the job failed"
    assert steps == ["went on"]


def test_an_async_job_never_joined_reports_nothing_to_the_loop() -> None:
    """A flow that fails before joining leaves its job's error unread: the loop is not told of it (asyncio
    would log "Task exception was never retrieved")."""
    reported: list[dict[str, Any]] = []

    def fail() -> None:
        raise LookupError("never joined")

    def flow() -> Flow[None]:
        yield Start(Blocking(fail))
        raise KeyError("the operation failed first")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        with pytest.raises(KeyError):
            await Drivers(None, None).run_async(flow())
        await asyncio.sleep(0.2)  # the job's thread ends and its task completes

    asyncio.run(main())
    assert reported == []


class QuerySignallingEmbedder:
    """The real local model; embedding ``query`` sets ``started`` first."""

    def __init__(self, inner: Any, query: str) -> None:
        self.inner, self.query = inner, query
        self.dimension, self.key = inner.dimension, inner.key
        self.started = threading.Event()

    def embed(self, texts: Any) -> Any:
        if list(texts) == [self.query]:
            self.started.set()
        return self.inner.embed(texts)

    async def aembed(self, texts: Any) -> Any:
        return await asyncio.to_thread(self.embed, texts)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_the_query_is_embedded_while_the_keyword_search_runs(tmp_path: Path, local_embedder: Any,
                                                             monkeypatch: pytest.MonkeyPatch, use_async: bool) -> None:
    """The keyword search waits until the query's embedding has begun: it has when the two run alongside;
    one after the other, the search would wait out ``WAIT_S`` and find it had not. The hits are the same."""
    question = "where does Ada keep the garden tools?"
    embedder = QuerySignallingEmbedder(local_embedder, question)
    config = MemoryConfig(window_tokens=60, window_low_ratio=0.5, summary_tokens=20, summary_retry_base_s=0)
    with TieredMemory.open(tmp_path, session_id="s1", user_id="ada", config=config, counter=WordCounter(),
                           embedder=embedder) as memory:
        for i in range(12):
            memory.add("user", f"note {i}: the garden tools are in shed number {i}")
            memory.add("assistant", f"Noted, shed {i}.")
        memory.flush()
        assert memory.recall is not None
        journal = memory.recall.journal
        real_search = journal.keyword_search
        began: list[bool] = []

        def keyword_search(*args: Any, **kwargs: Any) -> Any:
            if args and args[0] == question:
                began.append(embedder.started.wait(WAIT_S))
            return real_search(*args, **kwargs)

        monkeypatch.setattr(journal, "keyword_search", keyword_search)
        hits = asyncio.run(memory.asearch(question, k=5)) if use_async else memory.search(question, k=5)
    assert began and all(began)
    assert hits and all("shed" in h.text for h in hits)
