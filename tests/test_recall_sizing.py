"""How many hits context() asks recall for: sized by the window's turns (issue 15: each hit asked makes
every rank list read more candidates), and still enough to fill the share recall gets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, Message, TieredMemory, WordCounter
from langmem_tiers.context import WindowMessage
from langmem_tiers.memory import context_flow
from langmem_tiers.memory.context_flow import HIT_SIZE_TURNS, MIN_HIT_TOKENS, hit_tokens

WORDS = WordCounter()


def turns(*sizes: int, current: bool = True) -> list[WindowMessage]:
    """A window of turns of these sizes (a user message and a reply, each half), and a current question."""
    out: list[WindowMessage] = []
    for size in sizes:
        for role, half in (("user", size // 2), ("assistant", size - size // 2)):
            message = Message(role, "w " * half, id=len(out) + 1)
            out.append(WindowMessage(message, WORDS.count_message(message)))  # framing included, as the window keeps it
    if current:
        question = Message("user", "and now?", id=len(out) + 1)
        out.append(WindowMessage(question, WORDS.count_message(question)))
    return out


def test_a_fresh_window_asks_for_short_hits() -> None:
    """Too few turns to judge by: the smallest size, so recall is asked for the most hits."""
    assert hit_tokens([], WORDS) == MIN_HIT_TOKENS
    assert hit_tokens(turns(*[200] * (HIT_SIZE_TURNS - 1)), WORDS) == MIN_HIT_TOKENS
    # The last turn is the current one and is not judged by: it may be only the question so far.
    assert hit_tokens(turns(*[200] * HIT_SIZE_TURNS, current=False), WORDS) == MIN_HIT_TOKENS
    assert hit_tokens(turns(*[200] * HIT_SIZE_TURNS), WORDS) == 200


def test_the_shorter_quartile_of_the_windows_complete_turns() -> None:
    assert hit_tokens(turns(120, 40, 100, 60, 80), WORDS) == 60  # sorted 40, 60, 80, 100, 120: the second
    assert hit_tokens(turns(90, 90, 90, 90), WORDS) == 90
    assert hit_tokens(turns(10, 12, 8, 9, 11), WORDS) == MIN_HIT_TOKENS  # never below the shortest size


def long_turn(topic: str, i: int) -> str:
    """About 40 words, each turn its own (near-duplicates are recalled once)."""
    return f"the {topic} on day {i}: " + " ".join(f"{topic[0]}{i}x{j}" for j in range(36))


def record_k_asked(memory: TieredMemory, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The k of every ranked search the memory's recall engine is asked for, in order."""
    assert memory.recall is not None
    real: Callable[..., Any] = memory.recall.ranked_flow
    asked: list[int] = []

    def ranked_flow(query: str, k: int, *args: Any, **kwargs: Any) -> Any:
        asked.append(k)
        return real(query, k, *args, **kwargs)

    monkeypatch.setattr(memory.recall, "ranked_flow", ranked_flow)
    return asked


def test_long_turns_ask_for_fewer_hits_and_deliver_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose turns are long asks recall for fewer hits than when every hit is sized as a short
    turn (fewer candidates to read), and the context it gets is the same: the share held no more."""
    config = MemoryConfig(context_tokens=3000, window_tokens=700, window_low_ratio=0.8, summary_tokens=40,
                          recall_tokens=100, summary_retry_base_s=0)
    with TieredMemory.open(tmp_path, session_id="past", user_id="u", config=config, embedder=False,
                           counter=WORDS) as past:
        for i in range(120):
            past.add("user", long_turn("garden", i))
            past.add("assistant", long_turn("reply", i))
        past.flush()
        asked = record_k_asked(past, monkeypatch)  # the handles share the engine
        live = past.for_session("live", user_id="u")
        for i in range(8):
            live.add("user", long_turn("kitchen", i))
            live.add("assistant", long_turn("answer", i))
        live.add("user", "what about the garden?")
        sized = live.context()
        monkeypatch.setattr(context_flow, "hit_tokens", lambda window, counter: MIN_HIT_TOKENS)
        most = live.context()
    sized_k, most_k = asked
    assert sized_k < most_k
    assert len(sized.recalled) > 20
    assert sized.to_openai() == most.to_openai()


def test_the_profile_recall_sits_beside_sizes_the_hits_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the profile takes of the budget is known before recall is asked: the share recall may fill is
    that much smaller, and so is the number of hits asked for. The profile is delivered whole either way."""
    config = MemoryConfig(context_tokens=1500, window_tokens=700, window_low_ratio=0.8, summary_tokens=40,
                          recall_tokens=100, profile_tokens=600, profile_related_only=False,
                          summary_retry_base_s=0)
    with TieredMemory.open(tmp_path, session_id="past", user_id="u", config=config, embedder=False,
                           counter=WORDS) as past:
        for i in range(60):
            past.add("user", f"the garden on day {i}")
            past.add("assistant", f"noted the garden on day {i}")
        past.flush()
        asked = record_k_asked(past, monkeypatch)
        live = past.for_session("live", user_id="u")
        live.add("user", "what about the garden?")
        live.context()
        for i in range(12):
            live.remember(" ".join(f"fact{i}w{j}" for j in range(40)), key=f"fact_{i}")
        with_profile = live.context()
    assert with_profile.tokens.profile > 400
    no_profile_k, profile_k = asked
    assert no_profile_k < context_flow.MAX_RECALL_K
    share = with_profile.tokens.profile // MIN_HIT_TOKENS
    assert no_profile_k - profile_k >= share - 1  # about one hit fewer per short hit the profile takes
    assert len(with_profile.profile) == 12
