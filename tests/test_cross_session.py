"""What reaches the model across sessions: context() recalls from the user's other sessions
(recall_scope), never another user's; every answered turn is recallable, evicted or not."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter

from .conftest import SMALL_CONFIG

DAY = 86_400.0


def memory_text(memory: TieredMemory, query: str) -> str:
    """The text of the memory message context() sends for ``query`` ('' when there is none)."""
    ctx = memory.context(query=query)
    return "\n".join(m.text for m in ctx.messages if m.metadata.get("langmem_tiers") == "memory")


def open_session(path: Path, session_id: str, user_id: str | None, embedder: Any = False,
                 config: MemoryConfig = SMALL_CONFIG) -> TieredMemory:
    return TieredMemory.open(path, session_id=session_id, user_id=user_id, embedder=embedder,
                             counter=WordCounter(), config=config)


def short_conversation(memory: TieredMemory, fact: str, at: float) -> None:
    """Five turns that never overflow the window: nothing is evicted, all must stay recallable."""
    memory.add("user", fact, created_at=at)
    memory.add("assistant", "Noted, thanks for telling me.", created_at=at + 1)
    for i in range(4):
        memory.add("user", f"quick question {i} about the weather", created_at=at + 10 + i)
        memory.add("assistant", f"sunny {i}", created_at=at + 11 + i)


def test_fact_from_yesterdays_short_session_reaches_todays_context(tmp_path: Path) -> None:
    yesterday = time.time() - DAY
    with open_session(tmp_path, "monday", "ada") as first:
        short_conversation(first, "My cat is called Miso and she is nine years old.", yesterday)
        assert first.stats().window_messages == 10  # never evicted
    with open_session(tmp_path, "tuesday", "ada") as today:
        today.add("user", "What is my cat called?")
        ctx = today.context()
        assert any("Miso" in h.text for h in ctx.recalled)
        text = "\n".join(m.text for m in ctx.messages)
        assert "Miso" in text
        # The model is told the memory came from another conversation, and when.
        line = next(row for row in text.splitlines() if "Miso" in row)
        assert "another conversation" in line
        day = time.strftime("%Y-%m-%d", time.gmtime(yesterday))
        assert day in line


def test_another_users_fact_never_reaches_the_context(tmp_path: Path) -> None:
    with open_session(tmp_path, "s-bob", "bob") as bob:
        short_conversation(bob, "My cat is called Pumpernickel.", time.time() - DAY)
    with open_session(tmp_path, "s-ada", "ada") as ada:
        ada.add("user", "What is my cat called? Pumpernickel?")
        assert "Pumpernickel" not in memory_text(ada, "cat called Pumpernickel")
        assert not ada.search("Pumpernickel", k=5, scope="user")


def test_session_scope_keeps_recall_inside_the_session(tmp_path: Path) -> None:
    config = SMALL_CONFIG.with_changes(recall_scope="session")
    with open_session(tmp_path, "monday", "ada", config=config) as first:
        short_conversation(first, "My cat is called Miso.", time.time() - DAY)
    with open_session(tmp_path, "tuesday", "ada", config=config) as today:
        today.add("user", "What is my cat called?")
        assert "Miso" not in memory_text(today, "cat called")


def test_agent_scope_reaches_only_the_same_agent(tmp_path: Path) -> None:
    config = SMALL_CONFIG.with_changes(recall_scope="agent")
    for agent, fact in (("cook", "My oven is a Miele from 2019."), ("travel", "My passport expires in May.")):
        with TieredMemory.open(tmp_path, session_id=f"old-{agent}", user_id="ada", agent_id=agent,
                               embedder=False, counter=WordCounter(), config=config) as memory:
            short_conversation(memory, fact, time.time() - DAY)
    with TieredMemory.open(tmp_path, session_id="new", user_id="ada", agent_id="cook", embedder=False,
                           counter=WordCounter(), config=config) as memory:
        memory.add("user", "Which oven do I have, and when does my passport expire?")
        text = memory_text(memory, "oven passport")
        assert "Miele" in text
        assert "passport expires" not in text


def test_window_turns_are_not_recalled_twice(tmp_path: Path) -> None:
    with open_session(tmp_path, "s1", "ada") as memory:
        short_conversation(memory, "My cat is called Miso.", time.time())
        memory.add("user", "What is my cat called?")
        ctx = memory.context()
        assert not ctx.recalled  # Miso's turn is in the window: it is sent once, as itself
        assert sum(m.text.count("Miso") for m in ctx.messages) == 1


def test_window_turns_are_left_out_before_any_record_is_read(tmp_path: Path) -> None:
    """The window's own turns match the question best, yet they cost recall no record read, no rank
    and no place: yesterday's turn is found, and no record of a window message is ever loaded."""
    with open_session(tmp_path, "monday", "ada") as first:
        short_conversation(first, "My cat is called Miso.", time.time() - DAY)
    with open_session(tmp_path, "tuesday", "ada") as today:
        short_conversation(today, "My cat is called Pixel, after the dog called Miso.", time.time())
        today.add("user", "What is my cat called?")
        window_ids = {m.id for m in today.window()}
        ns_id = today.journal.namespace_id(today.namespace)
        assert ns_id is not None
        window_records = {r.id for r in today.journal.scoped_records([ns_id])
                          if window_ids.intersection(r.message_ids)}
        assert len(window_records) == 5  # the five turns answered today
        read: list[int] = []
        records = today.journal.records

        def spy(ids: Any) -> Any:
            read.extend(ids)
            return records(ids)

        today.journal.records = spy  # type: ignore[method-assign]
        ctx = today.context()
        assert any("Miso" in h.text and "Pixel" not in h.text for h in ctx.recalled)
        assert read
        assert window_records.isdisjoint(read)
        assert not any("Pixel" in h.text for h in ctx.recalled)


def test_pinned_memories_of_the_user_appear_in_every_session(tmp_path: Path) -> None:
    with open_session(tmp_path, "monday", "ada") as first:
        first.remember("Allergic to peanuts", kind="fact", pinned=True)
    with open_session(tmp_path, "tuesday", "ada") as today:
        today.add("user", "Suggest a snack")
        assert today.context().pinned == ("Allergic to peanuts",)
    with open_session(tmp_path, "other", "bob") as bob:
        bob.add("user", "Suggest a snack")
        assert bob.context().pinned == ()


def test_cross_session_recall_with_vectors(tmp_path: Path, local_embedder: Any) -> None:
    """The default path: keyword and vector ranks both find the other session's turn."""
    with open_session(tmp_path, "monday", "ada", embedder=local_embedder) as first:
        short_conversation(first, "My sister Lena is getting married in Porto in June.", time.time() - DAY)
        first.flush()
    with open_session(tmp_path, "tuesday", "ada", embedder=local_embedder) as today:
        today.add("user", "Which city is the wedding in?")
        ctx = today.context()
        hit = next(h for h in ctx.recalled if "Porto" in h.text)
        assert hit.parts["vector_rank"] is not None
        assert today.recall is not None
        assert today.recall.last_error is None


def test_vector_recall_keeps_working_as_the_session_grows(tmp_path: Path, local_embedder: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Regression: an empty first copy of the session's vectors made every later query fall back
    to keyword recall ('all the input array dimensions ... size 0 ... size 384')."""
    with open_session(tmp_path, "s1", "ada", embedder=local_embedder) as memory:
        memory.add("user", "hello there")
        memory.search("hello", k=1)  # the first copy holds no vector yet
        for i, text in enumerate(["My dog Rex chases tennis balls.", "We fly to Tokyo on the 3rd of June."]):
            memory.add("user", text + f" ({i})")
            memory.add("assistant", "ok")
        memory.flush()
        hits = memory.search("the puppy and its toys", k=1)
        assert hits
        assert "Rex" in hits[0].text
        assert hits[0].parts["vector_rank"] is not None
        assert "vector recall failed" not in caplog.text
        assert memory.recall is not None
        assert memory.recall.last_error is None


def test_empty_assistant_message_round_trips(tmp_path: Path) -> None:
    with open_session(tmp_path, "s1", "ada") as memory:
        memory.add("user", "Say nothing.")
        stored = memory.add("assistant", "")
        assert stored.content == ""
        assert stored.id is not None
        assert memory.messages()[-1].content == ""
        for i in range(30):  # through the window, the summary and recall
            memory.add("user", f"turn {i} " + "word " * 10)
            memory.add("assistant", "")
        memory.flush()
        assert len(memory.messages()) == 62
        assert memory.stats().pending_summary_messages == 0
        memory.context(query="Say nothing")


def test_context_is_budgeted_across_sessions(tmp_path: Path) -> None:
    """Hits from many sessions still fit the recall share of the one budget."""
    for day in range(12):
        with open_session(tmp_path, f"day-{day}", "ada") as memory:
            short_conversation(memory, f"On day {day} the garden project needed compost {day}.",
                               time.time() - (12 - day) * DAY)
    with open_session(tmp_path, "today", "ada") as today:
        today.add("user", "What did the garden project need?")
        ctx = today.context()
        assert ctx.recalled
        assert ctx.tokens.recall <= SMALL_CONFIG.recall_tokens
        assert ctx.tokens.total <= SMALL_CONFIG.context_tokens


def test_clear_keeping_memories_replaces_the_history_only(tmp_path: Path) -> None:
    with open_session(tmp_path, "s1", "ada") as memory:
        memory.remember("Allergic to peanuts", kind="fact", pinned=True)
        short_conversation(memory, "My cat is called Miso.", time.time())
        memory.clear(keep_memories=True)
        assert memory.messages() == []
        assert memory.context().pinned == ("Allergic to peanuts",)
        assert not memory.search("Miso", k=3)
        memory.clear()
        assert memory.context().pinned == ()
