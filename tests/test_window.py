"""The window planner (pure) and the window invariants through TieredMemory, as properties."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langmem_tiers import Message, SummarizerError, TieredMemory, ToolCall, WordCounter
from langmem_tiers.journal.base import WindowEntry
from langmem_tiers.tokens import count_messages
from langmem_tiers.window import plan_window, split_turns

from .conftest import SMALL_CONFIG as CONFIG
from .conftest import FailingSummarizer, RecordingSummarizer

WORDS = WordCounter()

# --- the pure planner --------------------------------------------------------


def test_plan_docstring_example() -> None:
    e = [WindowEntry(1, "user", 50), WindowEntry(2, "assistant", 60), WindowEntry(3, "user", 10)]
    plan = plan_window(e, high=100, low=60)
    assert plan.evicted_turns == ((1, 2),)
    assert plan.window_start == 3
    assert plan.tokens == 10
    assert not plan.over_budget


def test_nothing_moves_until_high_is_crossed() -> None:
    e = [WindowEntry(1, "user", 40), WindowEntry(2, "assistant", 30), WindowEntry(3, "user", 30)]
    plan = plan_window(e, high=100, low=60)
    assert not plan.evicts
    assert (plan.window_start, plan.tokens) == (1, 100)


def test_eviction_goes_down_to_low_in_whole_turns() -> None:
    e = [WindowEntry(i, "user" if i % 2 else "assistant", 15) for i in range(1, 9)]  # 4 turns of 30
    plan = plan_window(e, high=100, low=60)
    assert plan.evicted_turns == ((1, 2), (3, 4))
    assert plan.tokens == 60
    assert plan.window_start == 5


def test_current_turn_alone_over_budget_is_kept_whole() -> None:
    e = [WindowEntry(1, "user", 10), WindowEntry(2, "user", 150), WindowEntry(3, "tool", 20)]
    plan = plan_window(e, high=100, low=60)
    assert plan.evicted_turns == ((1,),)
    assert plan.window_start == 2
    assert plan.tokens == 170
    assert plan.over_budget


def test_empty_window() -> None:
    assert plan_window([], 100, 60).window_start == 0


def test_split_turns_leading_non_user_message() -> None:
    e = [
        WindowEntry(1, "system", 5),
        WindowEntry(2, "user", 5),
        WindowEntry(3, "assistant", 5),
        WindowEntry(4, "tool", 5),
        WindowEntry(5, "user", 5),
    ]
    assert [[x.id for x in t] for t in split_turns(e)] == [[1], [2, 3, 4], [5]]


entries_strategy = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(0, 80)), min_size=1, max_size=30
)


@settings(max_examples=60, deadline=None)
@given(entries_strategy, st.integers(10, 200), st.floats(0.1, 0.9))
def test_plan_window_properties(raw: list[tuple[str, int]], high: int, ratio: float) -> None:
    entries = [WindowEntry(i + 1, role, size) for i, (role, size) in enumerate(raw)]
    low = int(high * ratio)
    plan = plan_window(entries, high, low)
    turns = split_turns(entries)
    evicted = [i for t in plan.evicted_turns for i in t]
    kept = [e for e in entries if e.id >= plan.window_start]
    assert evicted + [e.id for e in kept] == [e.id for e in entries]  # order kept, nothing lost
    assert plan.tokens == sum(e.tokens for e in kept)
    assert kept[0].id in {t[0].id for t in turns}  # a whole turn boundary
    assert turns[-1][0].id >= plan.window_start  # the current turn stays
    total = sum(e.tokens for e in entries)
    if total <= high:
        assert not plan.evicts
    else:
        assert plan.tokens <= low or len(split_turns(kept)) == 1
    assert plan.over_budget == (plan.tokens > high)
    if plan.over_budget:
        assert len(split_turns(kept)) == 1


# --- invariants through TieredMemory -------------------------------------------


def _text(n: int, seed: int) -> str:
    vocab = ["apple", "river", "Paris", "budget", "42", "blue", "train", "Monday", "code", "tea", "Ada"]
    return " ".join(vocab[(seed + i * 7) % len(vocab)] for i in range(n))


step = st.one_of(
    st.tuples(st.just("text"), st.integers(1, 40), st.just(0)),
    st.tuples(st.just("tools"), st.integers(1, 2), st.integers(1, 30)),
)
turn_strategy = st.tuples(st.integers(1, 120), st.lists(step, max_size=3))
session_strategy = st.tuples(
    st.booleans(),  # leading system message
    st.lists(turn_strategy, min_size=1, max_size=10),
    st.booleans(),  # add each turn as one batch
)


def _turn_messages(index: int, user_size: int, steps: list[tuple[str, int, int]]) -> list[Message]:
    out = [Message("user", _text(user_size, index))]
    for j, (kind, a, b) in enumerate(steps):
        if kind == "text":
            out.append(Message("assistant", _text(a, index + j)))
        else:
            calls = tuple(ToolCall(f"call_{index}_{j}_{c}", "lookup", f'{{"q": "{_text(3, c)}"}}') for c in range(a))
            out.append(Message("assistant", "", tool_calls=calls))
            out += [Message("tool", _text(b, c), tool_call_id=call.id) for c, call in enumerate(calls)]
    return out


def _count(messages: list[Message]) -> int:
    return sum(WORDS.count_message(m) for m in messages)


def check_invariants(memory: TieredMemory, *, failing: bool) -> None:
    journal = memory.messages()
    window = memory.window()
    stats = memory.stats()
    assert window, "the window never empties while the session has messages"
    ids = [m.id for m in journal]
    assert ids == sorted(ids)
    # Order preserved: the window is exactly the tail of the journal.
    assert [m.id for m in window] == ids[len(ids) - len(window) :]
    assert window == journal[len(journal) - len(window) :]
    # Turns never split: the window opens a turn.
    assert window[0].role == "user" or window[0].id == ids[0]
    # The current user turn is kept whole.
    users = [m for m in journal if m.role == "user"]
    if users:
        assert users[-1].id >= window[0].id
    # Within budget, except the documented oversize case: the current turn alone is larger.
    size = _count(window)
    assert stats.window_tokens == size
    if size > CONFIG.window_tokens:
        assert all(m.role != "user" for m in window[1:]), "over budget with more than the current turn"
    # Every journal message is in the window, covered by the summary, or pending.
    start = window[0].id
    cursor = stats.summary_cursor
    older = [m for m in journal if m.id < start]
    pending = [m for m in older if m.id > cursor]
    assert stats.pending_summary_messages == len(pending)
    assert all(m.id <= cursor or cursor < m.id < start for m in older)
    if failing:
        assert cursor == 0
        assert len(pending) == len(older)
        assert memory.summary == ""
        if older:
            assert stats.summary_failures >= 1
            assert "ConnectionError" in (stats.last_summary_error or "")
    else:
        assert pending == []
        assert cursor == (older[-1].id if older else 0)
        assert WORDS.count_text(memory.summary) <= CONFIG.summary_tokens
    # The context fits its budget and ends with the current turn.
    context = memory.context()
    assert context.tokens.total == count_messages(list(context.messages), WORDS)
    assert context.tokens.total <= CONFIG.context_tokens
    assert [m.id for m in context.messages if m.id is not None][-1] == ids[-1]


def _run_session(path: Path, session: Any, summarizer: Any, failing: bool) -> None:
    leading_system, turns, batched = session
    with TieredMemory.open(
        path, session_id="prop", embedder=False, counter=WORDS, config=CONFIG, summarizer=summarizer
    ) as memory:
        if leading_system:
            memory.add("system", "You are a helpful assistant")
            check_invariants(memory, failing=failing)
        for index, (user_size, steps) in enumerate(turns):
            messages = _turn_messages(index, user_size, steps)
            if batched:
                memory.add_messages(messages)
                check_invariants(memory, failing=failing)
            else:
                for m in messages:
                    memory.add_messages([m])
                    check_invariants(memory, failing=failing)
        before = (memory.window(), memory.summary, memory.stats())
    # Persistence: reopening gives the same window, summary and cursors.
    with TieredMemory.open(
        path, session_id="prop", embedder=False, counter=WORDS, config=CONFIG, summarizer=summarizer
    ) as again:
        assert (again.window(), again.summary, again.stats()) == before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_strategy)
def test_window_invariants_with_working_summarizer(session: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _run_session(Path(folder), session, RecordingSummarizer(), failing=False)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_strategy)
def test_window_invariants_with_failing_summarizer(session: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        _run_session(path, session, FailingSummarizer(), failing=True)
        # flush() raises but loses nothing; a working summarizer later covers every pending message.
        with TieredMemory.open(
            path, session_id="prop", embedder=False, counter=WORDS, config=CONFIG, summarizer=FailingSummarizer()
        ) as memory:
            count = len(memory.messages())
            pending = memory.stats().pending_summary_messages
            if pending:
                with pytest.raises(SummarizerError):
                    memory.flush()
            assert len(memory.messages()) == count
            assert memory.stats().pending_summary_messages == pending
        with TieredMemory.open(
            path, session_id="prop", embedder=False, counter=WORDS, config=CONFIG, summarizer=RecordingSummarizer()
        ) as memory:
            memory.flush()
            check_invariants(memory, failing=False)
