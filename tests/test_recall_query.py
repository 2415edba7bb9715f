"""Query analysis and the query-time recall switches (issue 19).

Pure rules first (salient terms, time windows, time intent); then each switch on a small
hand-made haystack where the right record needs it, through the public API with the real
local embedder, SQLite and embedded Chroma: off, the record is not first; on, it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langmem_tiers import TieredMemory, WordCounter
from langmem_tiers.config import MemoryConfig
from langmem_tiers.errors import ConfigError
from langmem_tiers.recall.engine import diversified, leads_first
from langmem_tiers.recall.fusion import FusionParams, ScoreParts
from langmem_tiers.recall.options import RecallOptions
from langmem_tiers.recall.query import (
    _TIME_EXPRESSION,
    analyze,
    feedback_terms,
    has_time_expression,
    salient_terms,
    time_window,
)

from .support.clock import FakeClock

# Wednesday 2027-01-13 12:00 UTC: a fixed "now" for every relative expression below.
NOW = datetime(2027, 1, 13, 12, tzinfo=timezone.utc).timestamp()
DAY = 86400.0
OFF = RecallOptions()


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


# --- pure rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "want"), [
    ("What did Zoltan recommend?", ("zoltan",)),
    ("Who is Maria's brother and where does he live?", ("maria",)),
    ('Which song did I call "Blue Lagoon Nights"?', ("blue", "lagoon", "nights")),
    ("How many of the 12 boxes came from Oslo in 2021?", ("oslo", "12", "2021")),
    ("When did we meet last Tuesday in March?", ()),  # calendar words are not names
    ("What did I say about the wedding?", ()),
])
def test_salient_terms(query: str, want: tuple[str, ...]) -> None:
    assert salient_terms(query) == want


@pytest.mark.parametrize(("query", "start", "end"), [
    ("what did I eat yesterday", "2027-01-12", "2027-01-13"),
    ("anything today?", "2027-01-13", "2027-01-14"),
    ("what happened last week", "2027-01-04", "2027-01-11"),  # the previous Monday-to-Monday week
    ("plans from last month", "2026-12-01", "2027-01-01"),
    ("the trip last year", "2026-01-01", "2027-01-01"),
    ("what did we do in May 2023", "2023-05-01", "2023-06-01"),
    ("who won in 2021", "2021-01-01", "2022-01-01"),
    ("the call 3 days ago", "2027-01-09", "2027-01-12"),
    ("the party two weeks ago", "2026-12-26", "2027-01-03"),
    ("my garden in May", "2026-05-01", "2026-06-01"),  # the latest May not after now
])
def test_time_window(query: str, start: str, end: str) -> None:
    window = time_window(query, NOW)
    assert window is not None
    assert (_day(window[0]), _day(window[1])) == (start, end)


@pytest.mark.parametrize("query", ["what is my dog's name", "I may come later", "the March of progress"])
def test_no_time_window(query: str) -> None:
    assert time_window(query, NOW) is None


@pytest.mark.parametrize(("query", "asks"), [
    ("When did Ana move?", True), ("what date is the exam", True), ("How long ago did we meet?", True),
    ("Where did Ana move?", False), ("What did Ana say?", False),
])
def test_asks_when(query: str, asks: bool) -> None:
    assert analyze(query, NOW).asks_when is asks


@pytest.mark.parametrize(("text", "dated"), [
    ("I adopted her last Friday", True), ("we moved two weeks ago", True), ("see you in June", True),
    ("born on 3/14/1990", True), ("back in 2019 we lived there", True), ("the exam is on may 5", True),
    ("I may come by", False), ("I like green tea", False), ("the march was loud", False),
])
def test_has_time_expression(text: str, dated: bool) -> None:
    assert has_time_expression(text) is dated


_PIECES = ["last", "Friday", "MAY", "may", "5", "2019", "3/14", "ago", "two weeks", "MarCh", "the", "this",
           "Week", "sept", "September", "tonight", "Yesterday", "x", ",", ".", "\n", " ", "İ", "ſ", "K", "é"]


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map(" ".join))
def test_has_time_expression_matches_as_the_case_blind_pattern_does(text: str) -> None:
    # ASCII text takes a faster path (lower-cased, then a case-sensitive pattern); the answer is the same.
    assert has_time_expression(text) is bool(_TIME_EXPRESSION.search(text))


def test_feedback_terms() -> None:
    """Names of any top hit and content words two hits share, never a query word, at most ``limit``."""
    texts = ["user: my sister Mia moved to Lisbon last year", "Now she says Lisbon is sunny. She took up pottery",
             "Pottery classes are on Tuesdays, Ana said"]
    assert feedback_terms("What did Ana's sister do after the move?", texts) == ("mia", "lisbon", "pottery")
    assert feedback_terms("Where does Mia live?", texts, limit=1) == ("lisbon",)
    assert feedback_terms("anything", []) == ()


@pytest.mark.parametrize("changes", [
    {"recall_salient_weight": -1.0}, {"recall_time_boost": float("nan")}, {"recall_when_boost": True},
    {"recall_session_weight": "1"}, {"recall_session_top": 0}, {"recall_session_top": 1.5},
    {"recall_feedback_weight": -0.5}, {"recall_feedback_docs": 0}, {"recall_neighbor_weight": -1.0},
    {"recall_neighbor_docs": 0}, {"recall_neighbor_docs": True}, {"recall_depth": 0}, {"recall_depth": 2.5},
    {"recall_diversity": -0.3}, {"recall_diversity": float("inf")},
])
def test_bad_switches_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="recall_"):
        MemoryConfig(**changes)


def test_options_follow_the_config() -> None:
    cfg = MemoryConfig(recall_salient_weight=0.7, recall_time_boost=2.0, recall_when_boost=0.3,
                       recall_session_weight=0.4, recall_session_top=5, recall_neighbor_weight=0.25,
                       recall_neighbor_docs=7, recall_depth=2)
    assert RecallOptions.from_config(cfg) == RecallOptions(0.7, 2.0, 0.3, 0.4, 5, neighbor_weight=0.25,
                                                           neighbor_docs=7, depth=2)
    assert RecallOptions.from_config(MemoryConfig()) == RecallOptions(
        salient_weight=MemoryConfig.recall_salient_weight, time_boost=MemoryConfig.recall_time_boost,
        when_boost=MemoryConfig.recall_when_boost, session_weight=MemoryConfig.recall_session_weight,
        session_top=MemoryConfig.recall_session_top, neighbor_weight=MemoryConfig.recall_neighbor_weight,
        neighbor_docs=MemoryConfig.recall_neighbor_docs, depth=MemoryConfig.recall_depth)


def test_an_opened_memory_recalls_with_its_own_config(tmp_path: Path) -> None:
    """open() hands the memory's recall switches to its recall index (a user's values, not the defaults)."""
    cfg = MemoryConfig(recall_salient_weight=0.7, recall_time_boost=0.0, recall_when_boost=0.0)
    with TieredMemory.open(tmp_path, session_id="s", user_id="u", config=cfg, counter=WordCounter(),
                           embedder=False) as memory:
        assert memory.recall is not None
        assert memory.recall.options == RecallOptions.from_config(cfg)
        assert memory.recall.options != RecallOptions.from_config(MemoryConfig())


@pytest.mark.parametrize("changes", [
    {"recall_rrf_k": 0}, {"recall_rrf_k": 1.5}, {"recall_keyword_weight": -1.0},
    {"recall_vector_weight": float("nan")}, {"recall_keyword_weight": 0.0, "recall_vector_weight": 0.0},
])
def test_bad_fusion_settings_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        MemoryConfig(**changes)


def test_an_opened_memory_fuses_with_its_own_weights(tmp_path: Path) -> None:
    cfg = MemoryConfig(recall_rrf_k=10, recall_keyword_weight=2.0, recall_vector_weight=0.5)
    with TieredMemory.open(tmp_path, session_id="s", user_id="u", config=cfg, counter=WordCounter(),
                           embedder=False) as memory:
        assert memory.recall is not None
        assert memory.recall.params == FusionParams(rrf_k=10, keyword_weight=2.0, vector_weight=0.5)
        memory.add("user", "The vault code word is Zanzibar.")
        memory.add("assistant", "Noted.")
        memory.add("user", "Thanks")
        (hit,) = memory.search("Zanzibar", k=1)
        # A keyword-only memory: the hit's fused score is its keyword rank under these weights.
        assert hit.parts["keyword_rank"] == 1
        assert hit.parts["rrf"] == pytest.approx(2.0 / (10 + 1))


# --- hand-made haystacks, real parts ---------------------------------------------------------

CONFIG = MemoryConfig(context_tokens=2000, window_tokens=200, summary_tokens=60, recall_tokens=600,
                      background_index=False, profile_tokens=0, extract_memories=False)


@pytest.fixture
def memory(tmp_path: Path, local_embedder: Any) -> Iterator[TieredMemory]:
    mem = TieredMemory.open(tmp_path, session_id="asking", user_id="u", config=CONFIG, embedder=local_embedder,
                            counter=WordCounter())
    mem.clock = FakeClock(NOW)
    yield mem
    mem.close()


def fill(memory: TieredMemory, sessions: Sequence[tuple[str, float, Sequence[tuple[str, str]]]]) -> None:
    """Each session: its id, its time, and (user, assistant) turns added one minute apart."""
    for sid, start, turns in sessions:
        other = memory.for_session(sid, user_id="u")
        for i, (user, assistant) in enumerate(turns):
            other.add("user", user, created_at=start + 120 * i)
            other.add("assistant", assistant, created_at=start + 120 * i + 60)
        other.add("user", "bye", created_at=start + 120 * len(turns))  # closes the last turn
        other.flush()
        other.close()


def top(memory: TieredMemory, query: str, options: RecallOptions, k: int = 1) -> list[str]:
    memory.recall.options = options  # type: ignore[union-attr]
    return [h.text for h in memory.search(query, k=k, scope="user")]


def test_time_window_finds_last_weeks_turn(memory: TieredMemory) -> None:
    fill(memory, [
        ("older", NOW - 40 * DAY, [("We went hiking in the hills and hiking was fun", "Hiking in the hills, nice")]),
        ("target", NOW - 7 * DAY, [("I walked the coastal trail near the lighthouse", "Lovely walk")]),
        ("newer", NOW - 1 * DAY, [("Hiking again soon, where should we go hiking?", "Maybe the hills")]),
    ])
    query = "Where did I go hiking last week?"
    assert "coastal" not in top(memory, query, OFF)[0]
    assert "coastal" in top(memory, query, RecallOptions(time_boost=2.0))[0]


def test_when_question_prefers_the_dated_turn(memory: TieredMemory) -> None:
    fill(memory, [
        ("s1", NOW - 20 * DAY, [("Dana got her kitten last Friday", "Congratulations to her")]),
        ("s2", NOW - 5 * DAY, [("Dana wants to adopt a cat, Dana loves the cat at the shelter", "Cute cat")]),
    ])
    query = "When did Dana adopt the cat?"
    assert "Friday" not in top(memory, query, OFF)[0]
    assert "Friday" in top(memory, query, RecallOptions(when_boost=1.0))[0]


def test_salient_name_that_dense_and_bm25_miss(memory: TieredMemory) -> None:
    filler = [(f"I recommend reading a good book, this book recommendation is a book I read {i}",
               "Books are great to read") for i in range(6)]
    fill(memory, [
        ("books", NOW - 10 * DAY, filler),
        ("target", NOW - 20 * DAY, [("Zoltan mentioned the lighthouse trail on Sunday", "Sounds nice")]),
    ])
    query = "Which book did Zoltan recommend me to read?"
    assert "Zoltan" not in top(memory, query, OFF)[0]
    assert "Zoltan" in top(memory, query, RecallOptions(salient_weight=2.0))[0]


def test_feedback_follows_the_first_hop(memory: TieredMemory) -> None:
    """The answer names neither Ana nor a sister: the first round finds who the sister is, the second her hobby."""
    filler = [(f"Ana went to the market on day {i} and Ana bought bread", "Fresh bread is good") for i in range(5)]
    fill(memory, [
        ("family", NOW - 30 * DAY, [("Ana told me her sister is called Mireille", "Nice name, Mireille")]),
        ("market", NOW - 10 * DAY, filler),
        ("target", NOW - 20 * DAY, [("Mireille has taken up wheel throwing at the studio", "Clay is fun")]),
    ])
    query = "What new pastime has Ana's sister taken up?"
    assert "wheel throwing" not in " ".join(top(memory, query, OFF, k=2))
    assert "wheel throwing" in " ".join(top(memory, query, RecallOptions(feedback_weight=3.0), k=2))


def test_neighbors_bring_the_reply_next_to_the_matching_turn(memory: TieredMemory) -> None:
    """The question's words are in one turn; its answer is in the next turn of that session, which
    shares none of them: only the neighbor list ranks it, right behind the turns that matched (here
    the one lead asked for)."""
    filler = [(f"planning-{i}", NOW - (10 + i) * DAY, [(text, "I see")]) for i, text in enumerate([
        "Which restaurant on the trip to Lisbon was open late?", "The trip to Porto had a restaurant strike",
        "Tom said the best restaurant trip was Porto", "I like the restaurant on the corner best",
        "Did you like the trip? The restaurant was fine"])]
    fill(memory, [
        ("trip", NOW - 20 * DAY, [("Which restaurant did you like best on the trip to Porto?", "Let me think"),
                                  ("Casa Azul, the one with the blue door by the bridge", "Great pick")]),
        *filler,
    ])
    query = "Which restaurant did I like best on the trip to Porto?"
    assert "Casa Azul" not in " ".join(top(memory, query, OFF, k=2))
    on = top(memory, query, RecallOptions(neighbor_weight=3.0, neighbor_docs=1), k=2)  # passes every filler
    assert "Porto" in on[0]
    assert "Casa Azul" in on[1]


def test_leads_keep_their_places() -> None:
    """``leads_first``: the first round's best keep their order at the top; the rest keep the new order."""
    parts = ScoreParts(None, None, 0.0, 0.0, 0.0, 0.0)  # the order is what is tested
    fused = [(c, parts) for c in ["n2", "n1", "a", "p", "b"]]
    assert [c for c, _ in leads_first(fused, ["p", "a"])] == ["p", "a", "n2", "n1", "b"]
    assert [c for c, _ in leads_first(fused, [])] == ["n2", "n1", "a", "p", "b"]


def test_diversity_brings_the_other_answer_of_a_list(memory: TieredMemory) -> None:
    """Three turns say one thing in nearly the same words and outrank the one turn about something
    else: with diversity (maximal marginal relevance) that one takes the second place."""
    fill(memory, [
        *[(f"tennis-{day}", NOW - (9 - i) * DAY, [(f"Lena played tennis at her club on {day}", "Sounds fun")])
          for i, day in enumerate(["Monday", "Thursday", "Saturday"])],
        ("rowing", NOW - 6 * DAY, [("Lena goes rowing on the river at weekends", "Good exercise")]),
    ])
    query = "Which sport does Lena play at her club?"
    off = top(memory, query, OFF, k=2)
    assert all("tennis" in text for text in off)
    on = top(memory, query, RecallOptions(diversity=0.3), k=2)
    assert "tennis" in on[0]
    assert "rowing" in on[1]
    assert on[0] == off[0]  # the best candidate keeps the first place


def test_diversified_order() -> None:
    """Each place after the fixed ones goes to the best score less ``diversity`` x the nearest placed one."""
    parts = {c: ScoreParts(None, None, total, 0.0, 0.0, total) for c, total in
             [("1", 1.0), ("2", 0.95), ("3", 0.9), ("4", 0.5), ("5", 0.1)]}
    fused = list(parts.items())
    x, y = [1.0, 0.0], [0.0, 1.0]
    vectors = {1: x, 2: x, 3: y, 5: y}  # 2 repeats 1; 4 has no vector (never penalized)
    assert [c for c, _ in diversified(fused, vectors, 0.5, pool=4)] == ["1", "3", "4", "2", "5"]
    assert [c for c, _ in diversified(fused, vectors, 0.0, pool=4)] == ["1", "2", "3", "4", "5"]
    # A fixed lead stays first and counts as placed: 1 (unlike it) follows, then 4 before 2 (which repeats 1).
    lead_first = [fused[2], fused[0], fused[1], fused[3], fused[4]]
    assert [c for c, _ in diversified(lead_first, vectors, 0.5, pool=4, fixed=1)] == ["3", "1", "4", "2", "5"]


def test_switches_off_are_plain_fusion(memory: TieredMemory) -> None:
    fill(memory, [("s1", NOW - 3 * DAY, [("Dana adopted a cat last Friday", "Cute"),
                                         ("We hiked in May 2026", "Nice")])])
    memory.recall.options = OFF  # type: ignore[union-attr]
    hits = memory.search("When did Dana adopt the cat in May 2026?", k=5, scope="user")
    assert hits
    for h in hits:
        assert h.parts["boost"] == 1.0
        ranks = [r for r in (h.parts["keyword_rank"], h.parts["vector_rank"]) if r is not None]
        assert h.parts["rrf"] == pytest.approx(sum(1 / (memory.recall.params.rrf_k + r) for r in ranks))  # type: ignore[union-attr]


def test_all_switches_are_deterministic(tmp_path: Path, local_embedder: Any) -> None:
    sessions = [(f"s{n}", NOW - (30 - n) * DAY, [(f"Kim talked about trip {n} to Lyon with Sam last week",
                                                 f"Trip {n} noted"),
                                                (f"Kim bought {n} plants for the garden", "Nice plants")])
                for n in range(6)]
    on = RecallOptions(salient_weight=1.0, time_boost=1.0, when_boost=0.5, session_weight=0.5, session_top=2,
                       diversity=0.3)
    runs = []
    for folder in ("a", "b"):
        mem = TieredMemory.open(tmp_path / folder, session_id="asking", user_id="u", config=CONFIG,
                                embedder=local_embedder, counter=WordCounter())
        mem.clock = FakeClock(NOW)
        try:
            fill(mem, sessions)
            mem.recall.options = on  # type: ignore[union-attr]
            query = "When did Kim go to Lyon with Sam?"
            first = [(h.text, h.score) for h in mem.search(query, k=6, scope="user")]
            again = [(h.text, h.score) for h in mem.search(query, k=6, scope="user")]
            assert first == again
            assert len(first) == 6
            runs.append([t for t, _ in first])
        finally:
            mem.close()
    assert runs[0] == runs[1]  # the same haystack ingested twice ranks the same


def test_two_stage_reaches_the_rest_of_the_best_session(memory: TieredMemory) -> None:
    distractors = [(f"d{n}", NOW - (50 - n) * DAY,
                    [(f"After work I go sailing with neighbour {n}; what do you do after sailing?", "Boats")])
                   for n in range(4)]
    fill(memory, [
        *distractors,
        ("trip", NOW - 30 * DAY, [("Ravi and I went sailing on the lake, the sailing boat was red", "Fun"),
                                  ("Then we had dinner at the harbour pub and stayed the night", "Cozy")]),
    ])
    query = "What did Ravi and I do after sailing?"
    off = top(memory, query, OFF, k=2)
    on = top(memory, query, RecallOptions(session_weight=2.0, session_top=1), k=2)
    assert not any("harbour" in t for t in off)
    assert any("harbour" in t for t in on)


def test_a_later_fusion_round_ranks_as_fusing_anew_even_when_an_earlier_list_gains_a_candidate(tmp_path: Path
                                                                                              ) -> None:
    """The engine's later rounds add their lists to the fusion (fusion.Fusion.add). A candidate read
    between rounds that an earlier list already named (it was not loaded then) makes it fuse anew: the
    ranking is fuse()'s of every list over the candidates loaded by then, either way."""
    from langmem_tiers.journal.base import Namespace, NewRecord
    from langmem_tiers.journal.sqlite import SqliteJournal
    from langmem_tiers.recall.engine import RecallIndex, _Rounds
    from langmem_tiers.recall.fusion import fuse

    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    try:
        ns_id = journal.namespace_id(Namespace("s", "u")) or 0
        ids = [str(i) for i in journal.add_records(ns_id, [
            NewRecord("turn", f"turn {i} says when: May {i}" if i % 2 else f"turn {i}", (i,), importance=0.1 * i,
                      pinned=i == 3, created_at=1000.0 + 60 * i) for i in range(8)])]
        records = {str(r.id): r for r in journal.records([int(c) for c in ids])}
        index = RecallIndex(journal, None, None)
        analysis = analyze("when was it?", 5000.0)
        keyword, vector = ids[:4], [ids[6], *ids[2:5]]

        def scratch(extra: list[tuple[list[str], float]], by_id: dict[str, Any]) -> list[tuple[str, ScoreParts]]:
            return index._fuse(keyword, vector, extra, by_id, 5000.0, analysis, _Rounds())

        def by_id(*names: str) -> dict[str, Any]:
            return {c: records[c] for c in names}

        for late in (ids[7], ids[6]):  # 7 is new to every list; 6, in the vector list, was not loaded before
            rounds = _Rounds()
            extra: list[tuple[list[str], float]] = []
            loaded = by_id(*ids[:5])
            first = index._fuse(keyword, vector, extra, loaded, 5000.0, analysis, rounds)
            assert first == scratch(extra, loaded)
            extra.append(([ids[5], late], 0.5))
            loaded = {**loaded, **by_id(ids[5], late)}
            second = index._fuse(keyword, vector, extra, loaded, 5000.0, analysis, rounds)
            assert second == scratch(extra, loaded)
            assert late in {c for c, _ in second}
            if late == ids[6]:  # it carries its vector rank: fused anew, not added
                assert dict(second)[late].vector_rank == 1
        # Without the fall-back (the earlier list's new candidate ignored), the second round would differ.
        lists = [([ids[5], ids[6]], 0.5)]
        assert fuse(keyword, [c for c in vector if c != ids[6]], extra=lists) != fuse(keyword, vector, extra=lists)
    finally:
        journal.close()
