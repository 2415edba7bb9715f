"""The rolling summary: failures keep turns pending, incremental requests, the cap, background mode,
and the offline extractive summarizer."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import ExtractiveSummarizer, Message, SummarizerError, SummaryRequest, WordCounter
from langmem_tiers.summarizers.fold import chunk_pending, trim_to_tokens

from .conftest import FailingSummarizer, OvershootingSummarizer, RecordingSummarizer

WORDS = WordCounter()


def talk(memory: Any, turns: int, start: int = 0, words: int = 20) -> None:
    for i in range(start, start + turns):
        memory.add("user", f"question {i} " + " ".join(f"q{i}w{j}" for j in range(words)))
        memory.add("assistant", f"answer {i} " + " ".join(f"a{i}w{j}" for j in range(words)))


async def atalk(memory: Any, turns: int, words: int = 20) -> None:
    for i in range(turns):
        await memory.aadd("user", f"question {i} " + " ".join(f"q{i}w{j}" for j in range(words)))
        await memory.aadd("assistant", f"answer {i} " + " ".join(f"a{i}w{j}" for j in range(words)))


def evicted(memory: Any) -> list[Message]:
    start = memory.window()[0].id
    return [m for m in memory.messages() if m.id < start]


def test_failing_summarizer_keeps_turns_pending_then_recovers(make_memory: Any, tmp_path: Path) -> None:
    failing = FailingSummarizer()
    memory = make_memory(summarizer=failing)
    talk(memory, 6)
    older = evicted(memory)
    assert older
    stats = memory.stats()
    assert stats.summary_cursor == 0
    assert stats.pending_summary_messages == len(older)
    assert stats.summary_failures >= 1
    assert "ConnectionError" in (stats.last_summary_error or "")
    assert "LLM endpoint unreachable" in (stats.last_summary_error or "")
    assert memory.summary == ""
    left_out = memory.context().left_out
    assert any(o.tier == "pending" and "LLM endpoint unreachable" in o.reason for o in left_out)

    # Retry after the backoff (0 s here): the next eviction calls the summarizer again.
    calls = failing.calls
    talk(memory, 3, start=6)
    assert failing.calls > calls

    # flush() raises but loses nothing.
    total = len(memory.messages())
    with pytest.raises(SummarizerError, match="stay pending"):
        memory.flush()
    assert len(memory.messages()) == total
    assert memory.stats().pending_summary_messages == len(evicted(memory))
    memory.close()

    # A working summarizer (after a restart) covers every pending message and resets the failures.
    working = RecordingSummarizer()
    again = make_memory(summarizer=working)
    again.flush()
    stats = again.stats()
    assert stats.pending_summary_messages == 0
    assert stats.summary_cursor == evicted(again)[-1].id
    assert stats.summary_failures == 0
    assert stats.last_summary_error is None
    sent = [m.id for r in working.requests if not r.compress for m in r.messages]
    assert sent == [m.id for m in evicted(again)]
    assert again.summary


def test_backoff_is_respected_between_evictions_but_flush_forces(make_memory: Any, small_config: Any) -> None:
    failing = FailingSummarizer()
    memory = make_memory(
        summarizer=failing, config=small_config.with_changes(summary_retry_base_s=300.0, summary_retry_max_s=600.0)
    )
    talk(memory, 6)
    assert failing.calls == 1
    talk(memory, 4, start=6)
    assert failing.calls == 1  # still backing off
    with pytest.raises(SummarizerError):
        memory.flush()
    assert failing.calls == 2
    assert memory.stats().summary_failures == 2


@pytest.mark.parametrize("reply", ["", "   ", None, 42])
def test_unusable_reply_is_a_failure(make_memory: Any, reply: Any) -> None:
    class Bad:
        def summarize(self, request: SummaryRequest) -> Any:
            return reply

        async def asummarize(self, request: SummaryRequest) -> Any:
            return reply

    memory = make_memory(summarizer=Bad())
    talk(memory, 6)
    assert memory.stats().pending_summary_messages > 0
    assert "no usable text" in (memory.stats().last_summary_error or "")
    with pytest.raises(SummarizerError):
        memory.flush()


def test_summarizer_only_receives_messages_after_the_cursor(make_memory: Any) -> None:
    recording = RecordingSummarizer()
    memory = make_memory(summarizer=recording)
    cursors = []
    for i in range(12):
        talk(memory, 1, start=i)
        cursors.append(memory.stats().summary_cursor)
    memory.flush()
    requests = [r for r in recording.requests if not r.compress]
    assert len(requests) >= 2
    sent = [m.id for r in requests for m in r.messages]
    assert sent == sorted(set(sent)), "a message was sent twice or out of order"
    assert sent == [m.id for m in evicted(memory)]
    # Each request continues the previous summary.
    for before, after in itertools.pairwise(requests):
        assert after.previous_summary
        assert max(m.id for m in before.messages) < min(m.id for m in after.messages)
    assert cursors == sorted(cursors)


def test_summary_input_tokens_chunks_requests(make_memory: Any, small_config: Any) -> None:
    recording = RecordingSummarizer()
    memory = make_memory(summarizer=recording, config=small_config.with_changes(summary_input_tokens=30))
    talk(memory, 8, words=10)
    memory.flush()
    requests = [r for r in recording.requests if not r.compress]
    for r in requests:
        assert len(r.messages) == 1 or sum(WORDS.count_message(m) for m in r.messages) <= 30
    assert [m.id for r in requests for m in r.messages] == [m.id for m in evicted(memory)]


def test_chunk_pending_never_splits_a_message() -> None:
    msgs = [Message("user", "x", id=i) for i in range(5)]
    assert [[m.id for m in c] for c in chunk_pending(msgs, [10, 10, 50, 5, 5], 20)] == [[0, 1], [2], [3, 4]]


@pytest.mark.parametrize("overshoots", [1, 5])
def test_cap_is_enforced_with_an_overshooting_summarizer(make_memory: Any, small_config: Any, overshoots: int) -> None:
    fake = OvershootingSummarizer(overshoot_compress=overshoots)
    memory = make_memory(summarizer=fake)
    talk(memory, 6)
    memory.flush()
    assert any(r.compress for r in fake.requests), "no compress request was issued"
    for r in fake.requests:
        assert r.max_tokens == small_config.summary_tokens
        if r.compress:
            assert r.messages == ()
    assert 0 < WORDS.count_text(memory.summary) <= small_config.summary_tokens
    assert memory.stats().summary_tokens == WORDS.count_text(memory.summary)
    assert memory.stats().pending_summary_messages == 0


def test_trim_to_tokens_keeps_whole_sentences() -> None:
    text = "One two three. Four five six. Seven eight nine."
    assert trim_to_tokens(text, 7, WORDS.count_text) == "One two three.\nFour five six."
    assert trim_to_tokens("a b c d e f", 4, WORDS.count_text) == "a b c d"


def test_background_summary_with_flush(make_memory: Any, small_config: Any) -> None:
    recording = RecordingSummarizer()
    memory = make_memory(summarizer=recording, config=small_config.with_changes(background_summary=True))
    talk(memory, 10)
    memory.flush()
    stats = memory.stats()
    assert stats.pending_summary_messages == 0
    assert stats.summary_cursor == evicted(memory)[-1].id
    assert memory.summary
    sent = [m.id for r in recording.requests if not r.compress for m in r.messages]
    assert sent == [m.id for m in evicted(memory)]


async def test_async_path_summarizes_and_aflush(make_memory: Any) -> None:
    recording = RecordingSummarizer()
    memory = make_memory(summarizer=recording)
    await atalk(memory, 8)
    await memory.aflush()
    assert memory.stats().pending_summary_messages == 0
    assert recording.requests


async def test_async_failure_then_aflush_raises(make_memory: Any) -> None:
    memory = make_memory(summarizer=FailingSummarizer())
    await atalk(memory, 6)
    assert memory.stats().pending_summary_messages > 0
    with pytest.raises(SummarizerError):
        await memory.aflush()


# --- the extractive summarizer ------------------------------------------------------

DAY = dt.datetime(2024, 3, 14, 9, 30, tzinfo=dt.timezone.utc).timestamp()
CONVERSATION = (
    Message(
        "user",
        "My sister Alice moves to Lisbon on 12 May. She found a flat near the river.",
        created_at=DAY,
        name="bob",
    ),
    Message("assistant", "That is exciting news. Do you want me to remind you about the move?", created_at=DAY),
    Message("user", "ok", created_at=DAY),
    Message("tool", "Weather in Lisbon: 24C and sunny on 12 May", tool_call_id="c1", created_at=DAY + 86400),
    Message("user", "Please book a train ticket to Porto for 3 people on Friday.", created_at=DAY + 86400),
)


def _request(previous: str = "", cap: int = 60, compress: bool = False) -> SummaryRequest:
    return SummaryRequest(previous, () if compress else CONVERSATION, cap, WORDS.count_text, compress=compress)


def test_extractive_is_deterministic_and_within_cap() -> None:
    summarizer = ExtractiveSummarizer()
    for cap in (10, 25, 60, 500):
        first = summarizer.summarize(_request(cap=cap))
        assert first == summarizer.summarize(_request(cap=cap))
        assert WORDS.count_text(first) <= cap
    assert ExtractiveSummarizer().summarize(_request(cap=500)) == summarizer.summarize(_request(cap=500))


def test_extractive_keeps_speakers_and_dates() -> None:
    text = ExtractiveSummarizer().summarize(_request(cap=500))
    # A "[day]" line opens each day; the lines under it name their speaker.
    day_one, day_two = text.split("[2024-03-15]")
    assert day_one.startswith("[2024-03-14]\n- bob: My sister Alice moves to Lisbon on 12 May.")
    assert "\n- assistant:" in day_one
    assert "\n- user: Please book a train ticket to Porto for 3 people on Friday." in day_two
    assert "\n- tool" in day_two
    # Small talk carries no salience: it is the first line to go under a tight cap.
    tight = ExtractiveSummarizer().summarize(_request(cap=WORDS.count_text(text) - 1))
    assert "user: ok" in text
    assert "user: ok" not in tight


def test_extractive_folds_previous_summary_and_compresses() -> None:
    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize(_request(cap=500))
    second = summarizer.summarize(
        SummaryRequest(
            first, (Message("user", "I changed my mind about Porto, make it Braga."),), 500, WORDS.count_text
        )
    )
    assert first in second or all(line in second for line in first.splitlines())
    assert "Braga" in second
    short = summarizer.summarize(_request(previous=second, cap=20, compress=True))
    assert 0 < WORDS.count_text(short) <= 20
    assert all(line in second.splitlines() for line in short.splitlines())


async def test_extractive_async_matches_sync() -> None:
    summarizer = ExtractiveSummarizer()
    assert await summarizer.asummarize(_request()) == summarizer.summarize(_request())
