"""CallableSummarizer: any prompt -> text function as a summarizer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from langmem_tiers.errors import ConfigError, SummarizerError
from langmem_tiers.messages import Message
from langmem_tiers.summarizers.base import Summarizer, SummaryRequest, render_prompt
from langmem_tiers.summarizers.callable import CallableSummarizer

REQUEST = SummaryRequest(
    previous_summary="User is Ada.",
    messages=(Message("user", "I moved to Oslo."),),
    max_tokens=50,
    count_tokens=len,
)


def boom(prompt: str) -> str:
    raise TimeoutError("LLM took too long")


def already_wrapped(prompt: str) -> str:
    raise SummarizerError("inner")


# Each row: the function, and a fragment of the SummarizerError message.
FAILURES: list[tuple[str, Callable[[str], Any], str]] = [
    ("raises", boom, "TimeoutError: LLM took too long"),
    ("empty", lambda p: "", "empty text"),
    ("blank", lambda p: " \n", "empty text"),
    ("not-text", lambda p: {"content": "x"}, "returned dict, not str"),
    ("none", lambda p: None, "returned NoneType"),
    ("summarizer-error-passes-through", already_wrapped, "^inner$"),
]
IDS = [row[0] for row in FAILURES]


def test_is_a_summarizer() -> None:
    assert isinstance(CallableSummarizer(str.upper), Summarizer)


def test_summarize_renders_prompt_and_strips() -> None:
    seen: list[str] = []

    def fn(prompt: str) -> str:
        seen.append(prompt)
        return "  Ada lives in Oslo. "

    assert CallableSummarizer(fn).summarize(REQUEST) == "Ada lives in Oslo."
    assert seen == [render_prompt(REQUEST)]
    assert "User is Ada." in seen[0]
    assert "user: I moved to Oslo." in seen[0]


def test_custom_prompts() -> None:
    s = CallableSummarizer(lambda p: p, prompt="S={previous_summary} T={turns}",
                           compress_prompt="C={previous_summary} {max_tokens}")
    assert s.summarize(REQUEST) == "S=User is Ada. T=user: I moved to Oslo."
    assert s.summarize(SummaryRequest("User is Ada.", (), 9, len, compress=True)) == "C=User is Ada. 9"


async def test_asummarize_uses_afn() -> None:
    async def afn(prompt: str) -> str:
        return "async " + str(len(prompt))

    s = CallableSummarizer(lambda p: "sync", afn)
    assert await s.asummarize(REQUEST) == f"async {len(render_prompt(REQUEST))}"


async def test_asummarize_without_afn_runs_fn_off_the_loop() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def fn(prompt: str) -> str:
        threads.append(threading.get_ident())
        return "Ada."

    assert await CallableSummarizer(fn).asummarize(REQUEST) == "Ada."
    assert threads
    assert threads[0] != loop_thread


@pytest.mark.parametrize(("case", "fn", "fragment"), FAILURES, ids=IDS)
def test_summarize_failures(case: str, fn: Callable[[str], Any], fragment: str) -> None:
    with pytest.raises(SummarizerError, match=fragment) as info:
        CallableSummarizer(fn).summarize(REQUEST)
    if case == "raises":
        assert isinstance(info.value.__cause__, TimeoutError)


@pytest.mark.parametrize(("case", "fn", "fragment"), FAILURES, ids=IDS)
async def test_asummarize_failures_with_fn(case: str, fn: Callable[[str], Any], fragment: str) -> None:
    with pytest.raises(SummarizerError, match=fragment):
        await CallableSummarizer(fn).asummarize(REQUEST)


@pytest.mark.parametrize(("case", "fn", "fragment"), FAILURES, ids=IDS)
async def test_asummarize_failures_with_afn(case: str, fn: Callable[[str], Any], fragment: str) -> None:
    async def afn(prompt: str) -> Any:
        return fn(prompt)

    with pytest.raises(SummarizerError, match=fragment):
        await CallableSummarizer(lambda p: "unused", afn).asummarize(REQUEST)


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        (("not callable",), {}, "fn must be a callable"),
        ((str.upper, 42), {}, "afn must be"),
        ((str.upper,), {"prompt": "{oops}"}, "prompt must be"),
    ],
)
def test_bad_arguments_are_refused(args: tuple[Any, ...], kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        CallableSummarizer(*args, **kwargs)
