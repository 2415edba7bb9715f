"""The semantic tier through TieredMemory: keyed memories and supersession, facts() and their
history, extraction in the summary call (offline and with faithful fakes), erasure of extracted
facts, LLM calls with extraction on and off, the profile in context() and explain()."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, SummaryRequest, TieredMemory, WordCounter
from langmem_tiers.embedders.callable import CallableEmbedder
from langmem_tiers.errors import ConfigError, InvalidMessageError
from langmem_tiers.memory.context_flow import PROFILE_NEWEST
from langmem_tiers.memory.writes import DEDUPE_MATCHES
from langmem_tiers.semantic.types import ExtractedMemory, Triple
from langmem_tiers.summarizers.base import SummaryResult
from langmem_tiers.summarizers.extractive import ExtractiveSummarizer

from .conftest import SMALL_CONFIG, FailingSummarizer

DAY = 86_400.0


def open_memory(path: Path, session_id: str = "s1", user_id: str | None = "ada", **kwargs: Any) -> TieredMemory:
    kwargs.setdefault("config", SMALL_CONFIG)
    return TieredMemory.open(path, session_id=session_id, user_id=user_id, embedder=False,
                             counter=WordCounter(), **kwargs)


def chat(memory: TieredMemory, texts: list[str], at: float | None = None) -> None:
    """One exchange per text, with enough filler to push older turns out of the small window."""
    for i, text in enumerate(texts):
        when = None if at is None else at + i * 10
        memory.add("user", text, created_at=when)
        memory.add("assistant", "Noted. " + " ".join(f"filler{i}x{j}" for j in range(12)),
                   created_at=None if when is None else when + 1)


def evict_all(memory: TieredMemory, at: float | None = None) -> None:
    chat(memory, [f"small talk {i} about nothing much at all today" for i in range(6)], at)
    memory.flush()


# --- explicit keyed memories -------------------------------------------------------------------

def test_remember_with_key_supersedes_and_keeps_history(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        porto = memory.remember("Lives in Porto", key="home_city")
        time.sleep(0.01)
        lisbon = memory.remember("Lives in Lisbon", key="home_city")
        other = memory.remember("Likes green tea", kind="preference")
        current = memory.facts()
        assert [(f.id, f.text, f.key, f.source, f.valid_to) for f in current] == [
            (lisbon, "Lives in Lisbon", "home_city", "explicit", None),
            (other, "Likes green tea", None, "explicit", None)]
        history = {f.id: f for f in memory.facts(include_superseded=True)}
        assert history[porto].valid_to == pytest.approx(history[lisbon].valid_from)
        assert not history[porto].current
        assert [f.id for f in memory.facts(kinds=["preference"])] == [other]
        with pytest.raises(InvalidMessageError, match="snake_case"):
            memory.remember("x", key="Home City")
        with pytest.raises(ConfigError, match="kinds"):
            memory.facts(kinds="fact")  # type: ignore[arg-type]


def test_keys_are_scoped_to_the_user(tmp_path: Path) -> None:
    with open_memory(tmp_path, "s1", "ada") as ada, open_memory(tmp_path, "s2", "ada") as ada2, \
            open_memory(tmp_path, "s3", "bob") as bob, open_memory(tmp_path, "anon1", None) as anon1, \
            open_memory(tmp_path, "anon2", None) as anon2:
        ada.remember("Lives in Porto", key="home_city")
        bob.remember("Lives in Oslo", key="home_city")
        anon1.remember("Lives in Rome", key="home_city")
        ada2.remember("Lives in Lisbon", key="home_city")  # another session of the same user
        anon2.remember("Lives in Bern", key="home_city")  # an anonymous session is its own scope
        assert [f.text for f in ada.facts()] == ["Lives in Lisbon"]
        assert [f.text for f in bob.facts()] == ["Lives in Oslo"]
        assert [f.text for f in anon1.facts()] == ["Lives in Rome"]
        assert [f.text for f in anon2.facts()] == ["Lives in Bern"]


def test_search_ranks_superseded_below_current_and_labels_them(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        old = memory.remember("home city Porto by the river", key="home_city")
        new = memory.remember("home city Lisbon", key="home_city")
        hits = memory.search("home city Porto", k=5)
        assert [h.record_id for h in hits] == [new, old]  # Porto matches better, but it is the past
        assert "valid_to" in hits[1].metadata
        assert "valid_to" not in hits[0].metadata
        assert hits[1].valid_to == hits[1].metadata["valid_to"]
        assert hits[0].valid_to is None


async def test_async_remember_and_facts(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        await memory.aremember("Works at Acme", key="employer")
        await memory.aremember("Works at Globex", key="employer")
        assert [f.text for f in await memory.afacts()] == ["Works at Globex"]
        assert len(await memory.afacts(include_superseded=True)) == 2


# --- extraction in the summary call ------------------------------------------------------------

def test_offline_extraction_supersedes_and_keeps_provenance(tmp_path: Path) -> None:
    start = time.time() - 2 * DAY
    with open_memory(tmp_path) as memory:
        chat(memory, ["I live in Porto near the river.", "My cat is called Miso."], at=start)
        evict_all(memory, at=start + 100)
        facts = {f.key: f for f in memory.facts()}
        assert facts["location"].text == "I live in Porto near the river."
        assert isinstance(facts["location"].source, tuple)
        assert facts["location"].triple == \
            Triple("user", "lives_in", "Porto")
        said = [m for m in memory.messages() if m.text == "I live in Porto near the river."]
        assert facts["location"].source == (said[0].id,)
        chat(memory, ["Big news: I moved to Lisbon last week!"], at=start + DAY)
        evict_all(memory, at=start + DAY + 100)
        # The stored text is the statement's core (core_of drops the discourse filler "Big news").
        assert {f.key: f.text for f in memory.facts()}["location"] == "I moved to Lisbon last week!"
        history = [f for f in memory.facts(include_superseded=True) if f.key == "location"]
        assert [(f.text, f.current) for f in history] == [("I live in Porto near the river.", False),
                                                          ("I moved to Lisbon last week!", True)]
        assert history[0].valid_to == history[1].valid_from


def test_a_fact_said_again_is_merged_not_duplicated(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        chat(memory, ["My cat is called Miso."])
        evict_all(memory)
        chat(memory, ["My cat is called Miso."])
        evict_all(memory)
        cats = [f for f in memory.facts(include_superseded=True) if f.key == "cat_name"]
        assert len(cats) == 1
        assert isinstance(cats[0].source, tuple)
        assert len(cats[0].source) == 2


def test_a_fact_said_again_in_another_session_is_found_among_many_alike(tmp_path: Path) -> None:
    """Unkeyed memories are deduped against their keyword matches only (``dedupe_matches``), not every
    memory of the user: the twin is found among more look-alikes than the matches read."""
    said = "I bought a red bicycle on Monday."
    with open_memory(tmp_path, session_id="s1") as memory:
        chat(memory, [said, *(f"I bought a blue lamp{i} on Monday." for i in range(3 * DEDUPE_MATCHES))])
        evict_all(memory)
        before = memory.facts()
    with open_memory(tmp_path, session_id="s2") as memory:
        # Said again in a fold with two new facts: the fold's one search finds the twin among its matches.
        chat(memory, ["I bought a green kettle on Friday.", "Did I tell you? " + said,
                      "My sister Ana works as a nurse in Boston."])
        evict_all(memory)
        after = memory.facts()
    assert [f.text for f in before].count(said) == 1
    assert len(before) == 1 + 3 * DEDUPE_MATCHES
    new = [f.text for f in after if f.id not in {b.id for b in before}]
    assert sorted(new) == ["I bought a green kettle on Friday.", "My sister Ana works as a nurse in Boston."]
    assert [f.text for f in after].count(said) == 1  # merged into the first, not stored again


async def test_async_path_extracts_in_the_summary_call(tmp_path: Path) -> None:
    fake = StructuredFake("good")
    with open_memory(tmp_path, summarizer=fake) as memory:
        await memory.aadd("user", "My favourite colour is teal.")
        await memory.aadd("assistant", "Nice.")
        for i in range(6):
            await memory.aadd("user", f"small talk {i} about nothing much at all today")
            await memory.aadd("assistant", "Noted. " + " ".join(f"filler{i}x{j}" for j in range(12)))
        await memory.aflush()
        assert [f.text for f in await memory.afacts()] == ["The user's favourite colour is teal"]


def test_extraction_off_stores_no_memories(tmp_path: Path) -> None:
    with open_memory(tmp_path, config=SMALL_CONFIG.with_changes(extract_memories=False)) as memory:
        chat(memory, ["My cat is called Miso."])
        evict_all(memory)
        assert memory.summary
        assert memory.facts() == []


class StructuredFake:
    """A faithful fake of an LLM summarizer with extraction: one call returns summary and memories.

    ``mode``: "good" (a keyed memory citing the first user message), "broken" (extraction failed,
    summary fine), "text" (an LLM that ignores extraction), "bad-ids" (cites unknown messages).
    """

    def __init__(self, mode: str = "good") -> None:
        self.mode = mode
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> str | SummaryResult:
        self.calls += 1
        text = (request.previous_summary + " | " if request.previous_summary else "") + \
            " ".join(m.text.split()[0] for m in request.messages)
        text = " ".join(text.split()[-max(request.max_tokens - 5, 1):])
        if not request.wants_memories or self.mode == "text":
            return text
        if self.mode == "broken":
            return SummaryResult(text, (), extraction_error="JSON was cut off")
        users = [m for m in request.messages if m.role == "user" and "favourite" in m.text]
        ids = (users[0].id or 0,) if users and self.mode == "good" else (10**9,)
        memory = ExtractedMemory("The user's favourite colour is teal", "preference", "favorite_color",
                                 Triple("user", "favorite_color", "teal"), 0.9, ids)
        return SummaryResult(text, (memory,) if users else ())

    async def asummarize(self, request: SummaryRequest) -> str | SummaryResult:
        return self.summarize(request)


@pytest.mark.parametrize(("mode", "expected"), [
    ("good", {"The user's favourite colour is teal"}),
    ("broken", {"My favourite colour is teal."}),  # extraction failed: the offline extractor ran
    ("text", {"My favourite colour is teal."}),
    ("bad-ids", set()),  # a memory citing no message of the call is not stored (no provenance, no memory)
])
def test_summarizer_extraction_and_its_failures(tmp_path: Path, mode: str, expected: set[str]) -> None:
    fake = StructuredFake(mode)
    with open_memory(tmp_path, summarizer=fake) as memory:
        chat(memory, ["My favourite colour is teal."])
        evict_all(memory)
        assert memory.summary  # the summary is never blocked by extraction
        assert {f.text for f in memory.facts()} == expected


def test_a_failed_summary_stores_no_memory_and_loses_nothing(tmp_path: Path) -> None:
    failing = FailingSummarizer()
    with open_memory(tmp_path, summarizer=failing) as memory:
        chat(memory, ["My cat is called Miso."])
        chat(memory, [f"small talk {i} about nothing much at all today" for i in range(6)])
        assert failing.calls
        assert memory.facts() == []
        assert memory.stats().pending_summary_messages > 0
        memory.summarizer = ExtractiveSummarizer()
        memory._drivers.summarizer = memory.summarizer  # the outage ends
        memory.flush()
        assert [f.key for f in memory.facts()] == ["cat_name"]


def test_llm_calls_per_100_turns_are_the_same_with_extraction_on_and_off(tmp_path: Path) -> None:
    calls = {}
    for on in (False, True):
        fake = StructuredFake("good")
        config = SMALL_CONFIG.with_changes(extract_memories=on)
        with open_memory(tmp_path / str(on), summarizer=fake, config=config) as memory:
            for i in range(100):
                memory.add("user", f"turn {i}: my favourite colour is teal and " + "word " * 10)
                memory.add("assistant", "reply " * 12)
            memory.flush()
            calls[on] = fake.calls
            assert bool(memory.facts()) is on
    print(f"\nsummarizer calls per 100 turns: extraction off {calls[False]}, on {calls[True]}")
    assert calls[True] == calls[False] > 0


# --- erasure ----------------------------------------------------------------------------------

def test_erasure_covers_extracted_facts_and_their_triples(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        chat(memory, ["My cat is called Miso.", "I live in Porto."])
        evict_all(memory)
        facts = {f.key: f for f in memory.facts()}
        assert set(facts) >= {"cat_name", "location"}
        # forget(fact) erases the fact alone; the conversation stays.
        before = len(memory.messages())
        assert memory.forget(facts["location"].id) == 1
        assert "location" not in {f.key for f in memory.facts()}
        assert len(memory.messages()) == before
        # forget(turn) erases its messages and the facts that came only from them, triple included.
        turn = next(h for h in memory.search("cat called Miso", k=5, kinds=["turn"]))
        memory.forget(turn.record_id)
        assert "cat_name" not in {f.key for f in memory.facts(include_superseded=True)}
        assert memory.search("Miso", k=5) == []
        memory.remember("Prefers tea", kind="preference")
        chat(memory, ["My dog is called Rex."])
        evict_all(memory)
        memory.clear(keep_memories=True)  # extracted facts go with their messages; remember()ed stay
        assert [f.text for f in memory.facts()] == ["Prefers tea"]
        memory.forget("user")
        assert memory.facts() == []


# --- the profile in context() ------------------------------------------------------------------

def memory_text(memory: TieredMemory, query: str) -> str:
    ctx = memory.context(query=query)
    return "\n".join(m.text for m in ctx.messages if m.metadata.get("langmem_tiers") == "memory")


def test_profile_delivers_current_facts_dated_and_history_only_when_asked(tmp_path: Path) -> None:
    with open_memory(tmp_path, "monday") as monday:
        monday.remember("Lives in Porto", key="home_city")
        monday.remember("Lives in Lisbon", key="home_city")
        monday.remember("Prefers aisle seats", kind="preference")
    with open_memory(tmp_path, "tuesday") as today:
        today.add("user", "Where do I live?")
        text = memory_text(today, "Where do I live?")
        assert "Lives in Lisbon" in text
        assert "Porto" not in text
        assert time.strftime("[since %Y-%m-%d]", time.gmtime()) in text
        past = memory_text(today, "Where did I live before?")
        assert "previously" in past
        assert "Lives in Porto" in past
        ctx = today.context(query="Where do I live?")
        assert ctx.tokens.profile > 0
        assert [p.text.split(") ", 1)[1] for p in ctx.profile] == ["Lives in Lisbon"]  # related to the question
        explained = ctx.explain()
        assert "profile" in explained.splitlines()[0]
        assert "Lives in Lisbon" in explained
        assert "aisle" not in memory_text(today, "Where do I live?")
    with open_memory(tmp_path, "wednesday") as fresh:
        assert len(fresh.context().profile) == 2  # no query (no user message either): every current fact
    with open_memory(tmp_path, "tuesday", config=SMALL_CONFIG.with_changes(profile_related_only=False)) as persona:
        assert len(persona.context(query="Where do I live?").profile) == 2  # unrelated facts fill the share


def test_the_profile_of_a_long_history_reads_the_matches_and_the_newest_memories(tmp_path: Path) -> None:
    """context() reads a user's keyed memories, the question's keyword matches and the newest
    ``PROFILE_NEWEST`` unkeyed ones, not every memory: an old fact still reaches a question about it,
    and a context() without a question shows the newest facts."""
    with open_memory(tmp_path, "old") as old:
        # The most important fact: a profile that read every memory would show it first without a question.
        old.remember("Likes green tea with honey", kind="preference", importance=0.95)
        old.remember("Lives in Porto", key="home_city")
    for day in range(3):
        with open_memory(tmp_path, f"day{day}") as memory:
            for i in range(PROFILE_NEWEST // 2):
                memory.remember(f"Saw the comet number {day}x{i} from the balcony")
    with open_memory(tmp_path, "today") as today:
        asked = [p.text for p in today.context(query="Which tea do I like?").profile]
        unasked = [p.text for p in today.context().profile]
        home = [p.text for p in today.context(query="Where do I live?").profile]
    assert [line.split(") ", 1)[1] for line in asked] == ["Likes green tea with honey"]
    assert unasked[0].endswith(f"Saw the comet number 2x{PROFILE_NEWEST // 2 - 1} from the balcony")
    assert not any("green tea" in line for line in unasked)  # older than the newest read: recall's to find
    assert [line.split(") ", 1)[1] for line in home] == ["Lives in Porto"]  # keyed: always read


def test_a_memory_of_an_old_session_of_turns_reaches_a_handle_that_read_the_user_before(tmp_path: Path) -> None:
    """context() reads the profile and the pinned memories only from the sessions its journal's listing
    says hold one (ScopeListing.memories, kept across calls): a fact remembered later in an old session
    of turns, and a turn pinned in another, each through another handle, still reach it."""
    for session in ("old", "older"):
        with open_memory(tmp_path, session) as old:
            chat(old, [f"I keep my bike in the garden shed, says the {session} session"])
            evict_all(old)
            assert old.facts() == []  # turns only
    question = "Where do I live?"
    with open_memory(tmp_path, "live") as live:
        live.add("user", question)
        assert (live.context(query=question).profile, live.context(query=question).pinned) == ((), ())
        with open_memory(tmp_path, "old") as old:
            old.remember("Lives in Lisbon", key="home_city")
        assert [p.text.split(") ", 1)[1] for p in live.context(query=question).profile] == ["Lives in Lisbon"]
        with open_memory(tmp_path, "older") as older:
            [turn] = older.search("bike garden shed older", kinds=["turn"])[:1]
            assert "older session" in turn.text
            assert older.pin(turn.record_id)
        assert live.context(query=question).pinned == (turn.text,)  # pinned: in every context of the user
        with open_memory(tmp_path, "older") as older:
            assert older.pin(turn.record_id, pinned=False)
        assert live.context(query=question).pinned == ()


def test_profile_stays_within_its_share_and_reports_what_it_left_out(tmp_path: Path) -> None:
    config = SMALL_CONFIG.with_changes(profile_tokens=30)
    with open_memory(tmp_path, config=config) as memory:
        for i in range(10):
            memory.remember(f"Fact number {i} about the user and their many hobbies", importance=0.1 + i / 20)
        memory.add("user", "hobbies?")
        ctx = memory.context(query="hobbies")
        assert 0 < ctx.tokens.profile <= 30
        assert "Fact number 9" in ctx.profile[0].text  # most important first when relevance ties
        assert any(o.tier == "profile" for o in ctx.left_out)
    off = SMALL_CONFIG.with_changes(profile_tokens=0)
    with open_memory(tmp_path, config=off) as memory:
        assert memory.context(query="hobbies").profile == ()
    with pytest.raises(ConfigError, match="profile_tokens"):
        MemoryConfig(profile_tokens=5000)


def test_a_fact_in_the_profile_leaves_its_turn_to_recall(tmp_path: Path) -> None:
    """The engine keeps one hit per turn: the extracted fact must not cost the model its source turn."""
    with open_memory(tmp_path) as memory:
        chat(memory, ["My locker combination is 4812-alpha, please remember it."])
        evict_all(memory)
        memory.add("user", "What was my locker combination?")
        ctx = memory.context()
        assert [p.text.split(") ", 1)[1] for p in ctx.profile] == ["My locker combination is 4812-alpha"]
        assert any(h.kind == "turn" and "4812-alpha" in h.text for h in ctx.recalled)
        assert all(h.kind == "turn" for h in ctx.recalled)  # the fact is not repeated in recall


def test_context_searches_once_even_when_a_fact_took_its_turns_place(tmp_path: Path) -> None:
    """When the profile shows a fact that took its turn's place among the hits (here: one hit asked for,
    and the fact, the question's own words, ranks first), the turn comes from the one search's
    candidates: one search, one embedding of the question, and one read of the user's sessions for the
    profile, the pinned memories and the search."""
    embedded: list[str] = []

    def vectors(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return [[float((hash(t) >> s) & 1) + 0.5 for s in range(16)] for t in texts]

    config = dataclasses.replace(SMALL_CONFIG, recall_k=1)
    embedder = CallableEmbedder(vectors, dimension=16, key="test:count16")
    with TieredMemory.open(tmp_path, session_id="s1", user_id="ada", config=config, counter=WordCounter(),
                           embedder=embedder) as memory:
        chat(memory, ["My locker combination is 4812-alpha, please remember it."])
        evict_all(memory)
        memory.flush()
        assert memory.recall is not None
        searches: list[Any] = []
        real = memory.recall.ranked_flow

        def counted(query: str, *args: Any, **kwargs: Any) -> Any:
            searches.append(query)
            return real(query, *args, **kwargs)

        memory.recall.ranked_flow = counted  # type: ignore[method-assign]
        reads: list[Any] = []
        journal = memory.journal

        def spying(name: str) -> Any:
            real_read = getattr(journal, name)

            def spy(*args: Any) -> Any:
                reads.append(name)
                return real_read(*args)

            return spy

        for name in ("namespaces", "scope_listing", "scope_versions"):
            setattr(journal, name, spying(name))
        embedded.clear()
        question = "My locker combination is 4812-alpha"
        ctx = memory.context(question, budget=200)
        assert [p.text.split(") ", 1)[1] for p in ctx.profile] == [question]
        assert [h.kind for h in ctx.recalled] == ["turn"]
        assert "4812-alpha, please remember it" in ctx.recalled[0].text
        assert searches == [question]  # the turn was not searched for again
        assert embedded == [question]
        # The user's sessions read once, with their versions: the profile, the pinned memories, the search
        # and its in-process index's freshness check share that one read.
        assert reads == ["scope_listing"]
