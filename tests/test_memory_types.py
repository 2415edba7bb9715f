"""The memory types of issue 20 through the public API, sync and async, on SQLite and PostgreSQL:
expiry with an injected clock (no sleeps) and its sweep, working memory and its block in
context()/explain(), skills with triggers and outcomes, events in time, preferences by category,
and erasure of each. Keyword recall here; tests/test_memory_types_vectors.py adds the real
embedder and Chroma."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.errors import ConfigError, InvalidMessageError
from tests.support.clock import T0, FakeClock
from tests.support.postgres import postgres_url

from .conftest import SMALL_CONFIG, FailingSummarizer


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_url() as url:
        yield url


Opener = Callable[..., TieredMemory]


@pytest.fixture(params=["sqlite", "postgres"])
def open_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens keyword-only memories on a real SQLite journal or PostgreSQL server, ids unique per test,
    each with the same fake clock (``memory.clock``)."""
    path: Any = tmp_path if request.param == "sqlite" else request.getfixturevalue("pg_url")
    tag = uuid.uuid4().hex[:8]
    clock = FakeClock()
    opened: list[TieredMemory] = []

    def make(session: str = "s1", user: str | None = "ada", **kwargs: Any) -> TieredMemory:
        kwargs.setdefault("config", SMALL_CONFIG)
        kwargs.setdefault("embedder", False)
        kwargs.setdefault("counter", WordCounter())
        memory = TieredMemory.open(path, session_id=f"{session}-{tag}",
                                   user_id=f"{user}-{tag}" if user else None, **kwargs)
        memory.clock = clock
        opened.append(memory)
        return memory

    make.clock = clock  # type: ignore[attr-defined]
    yield make
    for memory in opened:
        memory.close()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def call(mode: str, target: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``target.name(...)``, or its ``a``-prefixed async twin run to completion."""
    if mode == "sync":
        return getattr(target, name)(*args, **kwargs)
    return asyncio.run(getattr(target, "a" + name)(*args, **kwargs))


def rows(memory: TieredMemory, ids: list[int]) -> list[int]:
    """The ids among ``ids`` still stored in the journal."""
    return [r.id for r in memory.journal.records(ids)]


# --- working memory ----------------------------------------------------------------------------

def test_working_memory_is_a_journaled_session_scratchpad(open_memory: Opener, mode: str) -> None:
    memory = open_memory("s1")
    first = call(mode, memory.working, "set", "plan_step", 2)
    second = call(mode, memory.working, "set", "plan_step", 3)
    call(mode, memory.working, "set", "goal", {"book": "flight", "to": "Lisbon"})
    assert call(mode, memory.working, "get", "plan_step") == 3
    assert call(mode, memory.working, "get", "missing", "none") == "none"
    assert call(mode, memory.working, "items") == {"goal": {"book": "flight", "to": "Lisbon"}, "plan_step": 3}
    # One row per key: the superseded value left the journal.
    assert rows(memory, [first, second]) == [second]

    # Durable: another handle (a restart) sees it; another session of the same user does not.
    again = open_memory("s1")
    assert call(mode, again.working, "get", "plan_step") == 3
    other = open_memory("s2")
    assert call(mode, other.working, "items") == {}
    call(mode, other.working, "set", "plan_step", 9)
    assert call(mode, memory.working, "get", "plan_step") == 3

    # A user key of the same name never supersedes it, and it is no fact and never recalled.
    call(mode, memory, "remember", "plan step is a user fact", key="plan_step")
    assert call(mode, memory.working, "get", "plan_step") == 3
    assert [f.kind for f in call(mode, memory, "facts")] == ["fact"]
    for handle in (memory, other):
        found = call(mode, handle, "search", "plan_step goal flight Lisbon", k=10, scope="user")
        assert [h.kind for h in found] == ["fact"]
    assert call(mode, memory, "search", "plan_step flight", k=10, kinds=["working"]) == []

    assert call(mode, memory.working, "delete", "plan_step") is True
    assert call(mode, memory.working, "delete", "plan_step") is False
    assert call(mode, memory.working, "items") == {"goal": {"book": "flight", "to": "Lisbon"}}
    assert rows(memory, [second]) == []


@pytest.mark.parametrize(("args", "error"), [
    (("Plan Step", 1), "snake_case"),
    (("plan", {1, 2}), "must be JSON"),
    (("plan", float("nan")), "must be JSON"),
    (("plan", "x" * 40_000), "over the limit"),
    (("plan", "a\x00b"), "NUL"),
])
def test_working_memory_refuses_bad_input(open_memory: Opener, args: tuple[Any, ...], error: str) -> None:
    memory = open_memory()
    with pytest.raises(InvalidMessageError, match=error):
        memory.working.set(*args)
    with pytest.raises(InvalidMessageError, match="ttl"):
        memory.working.set("plan", 1, ttl=0)
    assert memory.working.items() == {}


def test_working_state_block_in_context_and_explain(open_memory: Opener, mode: str) -> None:
    memory = open_memory("s1")
    call(mode, memory.working, "set", "plan_step", 3)
    call(mode, memory.working, "set", "booking_ref", "XK42")
    call(mode, memory, "add", "user", "What is next on the plan?")
    context = call(mode, memory, "context")
    head = context.messages[0].text
    assert "Working state of this session" in head
    assert head.index("booking_ref") < head.index("plan_step")  # newest first
    assert [w.key for w in context.working] == ["booking_ref", "plan_step"]
    assert context.tokens.working == WordCounter().count_text("\n".join(w.text for w in context.working))
    explained = context.explain()
    assert f"working {context.tokens.working} (2 keys)" in explained
    assert 'working: - booking_ref = "XK42"' in explained
    # The block is this session's only.
    other = open_memory("s2")
    call(mode, other, "add", "user", "What is next on the plan?")
    elsewhere = call(mode, other, "context")
    assert elsewhere.working == ()
    assert all("Working state" not in m.text and "XK42" not in m.text for m in elsewhere.messages)


def test_working_state_keeps_its_share_and_its_priority(open_memory: Opener) -> None:
    # An always-on profile (profile_related_only off): its fact is unrelated to the question.
    config = SMALL_CONFIG.with_changes(working_tokens=15, profile_related_only=False)
    memory = open_memory(config=config)
    for i in range(6):
        memory.working.set(f"step_{i}", f"value {i}")  # 5 words a line: three fit 15
    memory.add("user", "Where are we?")
    context = memory.context()
    assert [w.key for w in context.working] == ["step_5", "step_4", "step_3"]
    assert [o.reason for o in context.left_out if o.tier == "working"] == ["over the working share (15 tokens)"] * 3
    # A tight budget drops recall, profile, window and summary before the working state.
    memory.remember("Likes tea", kind="preference")
    assert memory.context().profile
    tight = memory.context(budget=context.tokens.total)
    assert [w.key for w in tight.working] == ["step_5", "step_4", "step_3"]
    assert tight.profile == ()
    assert [o.reason for o in tight.left_out if o.tier == "profile"] == ["over budget"]
    assert tight.tokens.total <= tight.tokens.budget
    tighter = memory.context(budget=context.tokens.total - 3)
    assert [w.key for w in tighter.working] == ["step_5", "step_4"]
    assert ("working", "over budget") in [(o.tier, o.reason) for o in tighter.left_out]
    # Off: no block, no read.
    off = open_memory("s9", config=SMALL_CONFIG.with_changes(working_tokens=0))
    off.working.set("plan", 1)
    off.add("user", "hello")
    assert off.context().working == ()


# --- expiry ------------------------------------------------------------------------------------

def test_expired_memories_are_never_delivered_nor_returned(open_memory: Opener, mode: str) -> None:
    # The whole profile, related to the question or not: every memory's expiry shows in it.
    memory = open_memory(config=SMALL_CONFIG.with_changes(profile_related_only=False))
    clock = memory.clock
    assert isinstance(clock, FakeClock)
    short = call(mode, memory, "remember", "Parked on level 3 of the garage", ttl=60)
    pinned = call(mode, memory, "remember", "Badge code 7731 for today", pinned=True, ttl=60)
    preference = call(mode, memory, "remember", "Prefers aisle seats this month", kind="preference", ttl=60)
    lasting = call(mode, memory, "remember", "Parked cars cost extra at the garage")
    call(mode, memory.working, "set", "garage_level", 3, ttl=60)
    call(mode, memory, "add", "user", "Where did I park in the garage?")

    def seen() -> dict[str, Any]:
        context = call(mode, memory, "context")
        return {"facts": {f.id for f in call(mode, memory, "facts")},
                "search": {h.record_id for h in call(mode, memory, "search", "parked garage badge aisle seats",
                                                      k=10, scope="user")},
                "pinned": context.pinned, "profile": {p.record_id for p in context.profile},
                "recalled": {h.record_id for h in context.recalled},
                "working": call(mode, memory.working, "items")}

    before = seen()
    assert {short, pinned, preference, lasting} <= before["facts"]
    assert {short, lasting} <= before["search"]
    assert before["pinned"] == ("Badge code 7731 for today",)
    assert before["profile"] == {short, preference, lasting}  # pinned ones have their own section
    assert before["working"] == {"garage_level": 3}

    clock.now += 59.9
    assert seen()["working"] == {"garage_level": 3}
    clock.now += 0.1  # expired from the instant clock() >= expires_at
    after = seen()
    assert after["facts"] == {lasting}
    assert after["search"] == {lasting}
    assert after["pinned"] == ()
    assert after["profile"] == {lasting}
    assert not {short, pinned, preference} & after["recalled"]
    assert after["working"] == {}
    # Filtered, not yet erased: cleanup() finds them (dry run), then erases them.
    assert rows(memory, [short, pinned, preference]) == [short, pinned, preference]
    found = memory.cleanup()
    assert {h.record_id for h in found} >= {short, pinned, preference}
    memory.cleanup(dry_run=False)
    assert rows(memory, [short, pinned, preference, lasting]) == [lasting]
    assert memory.search("garage level", k=5, kinds=["working"]) == []


def test_expire_sets_and_clears_an_expiry(open_memory: Opener, mode: str) -> None:
    memory = open_memory()
    clock = memory.clock
    assert isinstance(clock, FakeClock)
    fact = call(mode, memory, "remember", "The wifi password is hunter2")
    assert call(mode, memory, "expire", fact, 30) is True
    clock.now += 10
    assert call(mode, memory, "expire", fact, None) is True  # cleared: lives on
    clock.now += 100
    assert [f.id for f in call(mode, memory, "facts")] == [fact]
    assert call(mode, memory, "expire", fact, 5) is True
    clock.now += 5
    assert call(mode, memory, "facts") == []
    assert call(mode, memory, "expire", fact, 5) is False  # expired: gone for every reader
    assert call(mode, memory, "expire", 10**9, 5) is False
    with pytest.raises(InvalidMessageError, match="ttl"):
        call(mode, memory, "expire", fact, -1)
    # Another user's memory cannot be touched.
    bob = open_memory("b1", user="bob")
    theirs = bob.remember("Bob's secret")
    assert call(mode, memory, "expire", theirs, 30) is False


@pytest.mark.parametrize(("options", "error"), [
    ({"ttl": 0}, "ttl"), ({"ttl": float("inf")}, "ttl"), ({"ttl": "1h"}, "ttl"), ({"ttl": True}, "ttl"),
    ({"triggers": ["deploy"]}, "triggers are for kind='skill'"),
    ({"kind": "skill", "triggers": "deploy"}, "list of 1 to"),
    ({"kind": "skill", "triggers": []}, "list of 1 to"),
    ({"kind": "skill", "triggers": [" "]}, "non-empty phrase"),
    ({"category": ""}, "category"), ({"category": "x" * 65}, "category"),
    ({"metadata": {"expires_at": "tomorrow"}}, "expires_at"),
])
def test_remember_refuses_bad_typed_options(open_memory: Opener, options: dict[str, Any], error: str) -> None:
    memory = open_memory()
    options = dict(options)  # the table is shared by both backends
    kind = options.pop("kind", "fact")
    with pytest.raises(InvalidMessageError, match=error):
        memory.remember("text", kind, **options)
    assert memory.facts() == []


def test_the_periodic_sweep_erases_expired_memories(open_memory: Opener, mode: str) -> None:
    config = SMALL_CONFIG.with_changes(expiry_sweep_s=60)
    memory = open_memory(config=config)
    clock = memory.clock
    assert isinstance(clock, FakeClock)
    doomed = call(mode, memory, "remember", "A one-time code 5521", ttl=10)  # first write: the first sweep
    kept = call(mode, memory, "remember", "A lasting fact")
    state = call(mode, memory.working, "set", "step", 1, ttl=10)
    clock.now += 30
    call(mode, memory, "add", "user", "hello")  # 30 s since the last sweep: not due
    assert rows(memory, [doomed, kept, state]) == [doomed, kept, state]
    assert call(mode, memory, "facts") == [f for f in call(mode, memory, "facts") if f.id == kept]
    clock.now += 31
    call(mode, memory, "add", "user", "hello again")  # due: erased, with their index entries
    assert rows(memory, [doomed, kept, state]) == [kept]
    assert memory.stats().metrics.expired_erased == 2
    assert memory.stats().index_pending == 0
    # Handles of one process share the sweep: another session of the user is not swept again at once.
    twin = memory.for_session(f"twin-{uuid.uuid4().hex[:6]}")
    again = twin.remember("Another code", ttl=1)
    clock.now += 2
    twin.add("user", "hi")
    assert rows(memory, [again]) == [again]
    off = open_memory("s-off", user="carol", config=SMALL_CONFIG.with_changes(expiry_sweep_s=0))
    lone = off.remember("short lived", ttl=1)
    clock.now += 1000
    off.add("user", "x")
    assert rows(off, [lone]) == [lone]
    assert off.facts() == []


# --- skills ------------------------------------------------------------------------------------

def test_skills_rank_by_trigger_and_track_record(open_memory: Opener, mode: str) -> None:
    memory = open_memory()
    rollback = call(mode, memory, "remember", "Roll back with the previous image tag", kind="skill",
                    triggers=["deploy fails", "release broken"])
    logs = call(mode, memory, "remember", "Read the pod logs before anything else", kind="skill",
                triggers=["deploy fails", "pod crash"])
    call(mode, memory, "remember", "Rotate the API keys every quarter", kind="skill", triggers=["key rotation"])
    call(mode, memory, "remember", "The deploy pipeline runs on Fridays")  # a fact: never a skill hit

    hits = call(mode, memory, "skills_for", "the deploy fails with a crash loop", 5)
    assert {h.record_id for h in hits} == {rollback, logs}
    assert all(h.kind == "skill" and h.parts["trigger"] == 1.0 for h in hits)
    for _ in range(3):
        call(mode, memory, "record_outcome", logs, True)
    call(mode, memory, "record_outcome", rollback, False)
    hits = call(mode, memory, "skills_for", "the deploy fails with a crash loop", 5)
    assert [h.record_id for h in hits] == [logs, rollback]
    assert hits[0].parts["success"] == pytest.approx(4 / 5)
    assert hits[1].parts["success"] == pytest.approx(1 / 3)
    assert hits[0].metadata["uses"] == 3
    assert hits[0].metadata["successes"] == 3
    assert hits[0].score == pytest.approx((0.6 * 1.0 + 0.4 * hits[0].parts["relevance"]) * (0.5 + 0.8))
    assert call(mode, memory, "skills_for", "the quarterly key rotation", 1)[0].text.startswith("Rotate")
    assert call(mode, memory, "skills_for", "unrelated lunch plans", 3) == []
    assert call(mode, memory, "skills_for", "deploy fails", 0) == []

    fact = memory.facts(kinds=["fact"])[0].id
    with pytest.raises(ConfigError, match="not a live skill"):
        call(mode, memory, "record_outcome", fact, True)
    with pytest.raises(ConfigError, match="True or False"):
        call(mode, memory, "record_outcome", logs, 1)
    with pytest.raises(ConfigError, match="not a live skill"):
        open_memory("b", user="bob").record_outcome(logs, True)  # another user's skill


def test_skills_that_apply_open_the_recalled_section_of_context(open_memory: Opener, mode: str) -> None:
    memory = open_memory()
    skill = call(mode, memory, "remember", "Check the disk quota first", kind="skill", triggers=["upload fails"])
    call(mode, memory, "remember", "Retry with exponential backoff", kind="skill", triggers=["rate limit"])
    call(mode, memory, "record_outcome", skill, True)
    call(mode, memory, "add", "user", "My upload fails again, any idea?")
    context = call(mode, memory, "context")
    assert context.recalled[0].record_id == skill
    assert "(skill) Check the disk quota first [worked 1 of 1 times]" in context.messages[0].text
    assert "backoff" not in context.messages[0].text
    assert memory.stats().metrics.skills_delivered >= 1
    off = open_memory("s2", config=SMALL_CONFIG.with_changes(skills_k=0, recall_k=0))
    off.add("user", "My upload fails again")
    assert off.context().recalled == ()


# --- events ------------------------------------------------------------------------------------

def test_events_with_type_outcome_and_time(open_memory: Opener, mode: str) -> None:
    memory = open_memory()
    day = 86_400.0
    old = call(mode, memory, "record_event", "deploy", "Deployed v1 to production", "succeeded", T0 - 3 * day)
    new = call(mode, memory, "record_event", "deploy", "Deployed v2 to production", outcome="rolled back",
               at=T0 - 3600)
    outage = call(mode, memory, "record_event", "incident", "Database outage in production", at=T0 - 2 * day)
    by_type = call(mode, memory, "search", "production", k=10, kinds=["event"], where={"event_type": "deploy"})
    assert {h.record_id for h in by_type} == {old, new}
    assert {h.metadata["outcome"] for h in by_type} == {"succeeded", "rolled back"}
    recent = call(mode, memory, "search", "production", k=10, kinds=["event"], since=T0 - day)
    assert [h.record_id for h in recent] == [new]
    window = call(mode, memory, "search", "production outage", k=10, kinds=["event"], since=T0 - 2.5 * day,
                  until=T0 - day)
    assert [h.record_id for h in window] == [outage]
    # Without a query: the last 24 hours, and by type (the docs' one-liners).
    assert [f.id for f in call(mode, memory, "facts", kinds=["event"], since=T0 - day)] == [new]
    assert [f.text for f in call(mode, memory, "facts", kinds=["event"], where={"event_type": "incident"})] == [
        "incident: Database outage in production"]
    assert [f.valid_from for f in call(mode, memory, "facts", kinds=["event"])] == [T0 - 3 * day, T0 - 3600,
                                                                                     T0 - 2 * day]
    assert "(outcome: rolled back)" in next(f.text for f in memory.facts() if f.id == new)


@pytest.mark.parametrize(("args", "error"), [
    (("", "x"), "event_type"), (("deploy", " "), "description"), (("deploy", "x", ""), "outcome"),
    (("deploy", "x", None, "yesterday"), "at"), (("deploy", "x", None, float("nan")), "at"),
])
def test_record_event_refuses_bad_input(open_memory: Opener, args: tuple[Any, ...], error: str) -> None:
    memory = open_memory()
    with pytest.raises(InvalidMessageError, match=error):
        memory.record_event(*args)
    assert memory.facts() == []


# --- preferences by category -------------------------------------------------------------------

def test_preferences_by_category_are_keyed_and_superseded(open_memory: Opener, mode: str) -> None:
    memory = open_memory()
    call(mode, memory, "remember", "Prefers window seats", kind="preference", key="seat", category="travel")
    aisle = call(mode, memory, "remember", "Prefers aisle seats now", kind="preference", key="seat",
                 category="travel")
    veg = call(mode, memory, "remember", "Vegetarian", kind="preference", key="diet", category="food")
    spicy = call(mode, memory, "remember", "Likes spicy dishes", kind="preference", category="food")
    call(mode, memory, "remember", "Food blog author", category="food")  # a fact with a category
    food = call(mode, memory, "facts", kinds=["preference"], where={"category": "food"})
    assert [f.id for f in food] == [veg, spicy]
    assert [f.metadata.get("category") for f in food] == ["food", "food"]  # listed, not only searchable
    travel = call(mode, memory, "facts", include_superseded=True, kinds=["preference"],
                  where={"category": "travel"})
    assert [(f.text, f.current) for f in travel] == [("Prefers window seats", False), ("Prefers aisle seats now", True)]
    assert [f.id for f in call(mode, memory, "facts", kinds=["preference"], where={"category": "travel"})] == [aisle]
    hits = call(mode, memory, "search", "seats", k=5, where={"category": "travel"})
    assert hits[0].record_id == aisle
    with pytest.raises(ConfigError, match="where"):
        memory.facts(where="food")  # type: ignore[arg-type]


# --- erasure -----------------------------------------------------------------------------------

def test_erasure_covers_working_memory_skills_and_events(open_memory: Opener, mode: str) -> None:
    memory = open_memory("s1")
    skill = call(mode, memory, "remember", "Flush the cache after a schema change", kind="skill",
                 triggers=["schema change"])
    event = call(mode, memory, "record_event", "migration", "Ran the schema migration 42")
    entry = call(mode, memory.working, "set", "migration_step", 4)
    other = open_memory("s2")
    other_entry = call(mode, other.working, "set", "draft", "hello")
    other_event = call(mode, other, "record_event", "login", "Signed in from a new laptop")

    assert memory.forget(skill) == 1
    assert call(mode, memory, "skills_for", "schema change") == []
    assert memory.forget(entry) == 1
    assert call(mode, memory.working, "items") == {}
    assert memory.forget(event) == 1
    assert call(mode, memory, "search", "schema migration", k=5, scope="user") == []
    assert rows(memory, [skill, event, entry]) == []
    assert memory.stats().index_pending == 0

    call(mode, memory.working, "set", "migration_step", 5)
    memory.forget("session")  # this session: its working state goes, the other session's stays
    assert call(mode, memory.working, "items") == {}
    call(mode, memory.working, "set", "fresh_start", 1)  # the erased session starts afresh, as add() does
    assert call(mode, memory.working, "items") == {"fresh_start": 1}
    assert call(mode, other.working, "items") == {"draft": "hello"}
    other.forget("user")
    assert rows(memory, [other_entry, other_event]) == []
    assert call(mode, other.working, "items") == {}
    assert call(mode, other, "facts", kinds=["event"]) == []


def test_clear_session_erases_the_working_state_unless_memories_are_kept(open_memory: Opener) -> None:
    memory = open_memory()
    memory.working.set("step", 1)
    memory.clear(keep_memories=True)  # an adapter replacing the chat history keeps the task state
    assert memory.working.items() == {"step": 1}
    memory.clear()
    assert memory.working.items() == {}


# --- metrics -----------------------------------------------------------------------------------

def test_metrics_count_context_calls_tiers_and_summaries(open_memory: Opener, mode: str) -> None:
    memory = open_memory(config=SMALL_CONFIG.with_changes(profile_tokens=0))  # the fact comes by recall
    memory.remember("The invoice number is 1003")
    call(mode, memory, "add", "user", "What is the invoice number?")
    for _ in range(3):
        call(mode, memory, "context")
    call(mode, memory, "context", "weather tomorrow")  # no hit
    snapshot = memory.stats().metrics
    assert snapshot.context_calls == 4
    assert snapshot.calls_with_recall == 3
    assert snapshot.recall_hit_share == 0.75
    assert snapshot.tokens["window"].mean == snapshot.tokens["window"].p95 > 0  # the same window each call
    assert snapshot.tokens["recall"].p95 >= snapshot.tokens["recall"].mean > 0
    assert set(snapshot.tokens) == {"pinned", "working", "profile", "summary", "recall", "window", "total"}
    memory.metrics.reset()
    assert memory.stats().metrics.context_calls == 0
    assert memory.stats().metrics.recall_hit_share is None


def test_metrics_count_summaries_and_their_failures(open_memory: Opener) -> None:
    failing = FailingSummarizer()
    memory = open_memory(summarizer=failing)
    for i in range(8):
        memory.add("user", f"message {i} " + "word " * 20)
    assert memory.stats().metrics.summary_failures >= 1
    assert memory.stats().metrics.summaries == 0
    ok = open_memory("s2")
    for i in range(8):
        ok.add("user", f"message {i} " + "word " * 20)
    assert ok.stats().metrics.summaries >= 1
    assert ok.stats().metrics.summary_failures == 0


def test_index_lag_is_the_age_of_the_oldest_pending_record(open_memory: Opener) -> None:
    import time

    from langmem_tiers.journal.base import NewRecord

    memory = open_memory()
    assert memory.stats().index_lag_s is None
    ns_id = memory.journal.namespace_id(memory.namespace)
    assert ns_id is not None
    # Rows no indexer has drained yet (written past the memory, as another replica would).
    memory.journal.add_records(ns_id, [NewRecord("fact", "queued a while ago", created_at=time.time() - 30),
                                       NewRecord("fact", "queued now", created_at=time.time())])
    stats = memory.stats()
    assert stats.index_pending == 2
    assert stats.index_lag_s is not None
    assert 29 <= stats.index_lag_s < 120


def test_config_refuses_bad_shares() -> None:
    with pytest.raises(ConfigError, match="working_tokens"):
        MemoryConfig(working_tokens=-1)
    with pytest.raises(ConfigError, match="working_tokens"):
        MemoryConfig(context_tokens=4000, working_tokens=4000)
    with pytest.raises(ConfigError, match="skills_k"):
        MemoryConfig(skills_k=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="expiry_sweep_s"):
        MemoryConfig(expiry_sweep_s=-5)
