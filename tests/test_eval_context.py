"""context_recall, equal-token delivery, whole-turn baselines, odd messages and layouts of the evaluation harness.

Tiny hand-made haystacks in the official formats, where the right answer is known.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers import Message
from langmem_tiers.eval.__main__ import build_parser
from langmem_tiers.eval.datasets import DatasetMessage, Haystack, Question, load_longmemeval, turns_of
from langmem_tiers.eval.delivery import deliver_ranked, fill_budget, unit_line
from langmem_tiers.eval.metrics import Delivered, TextIndex, named_messages, present_messages
from langmem_tiers.eval.ours import OursRetriever, ours_config, skip_reason
from langmem_tiers.eval.ranking import BM25Retriever, DenseRetriever, HybridRetriever, rrf
from langmem_tiers.eval.runner import main_eval, score_context
from langmem_tiers.tokens import REPLY_PRIMING, TiktokenCounter

DAY = 1683554160.0  # 2023-05-08


def msg(key: str, text: str, role: str = "user", session: str = "s1", index: int = 0,
        name: str | None = None, has_answer: bool = False) -> DatasetMessage:
    return DatasetMessage(key, session, index, role, name, text, DAY + index * 30.0, has_answer)


def index_of(*messages: DatasetMessage) -> dict[str, DatasetMessage]:
    return {m.key: m for m in messages}


class HashEmbedder:
    """Deterministic bag-of-words vectors, for the plumbing of the dense baselines only."""

    key = "test:hash-64"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dimension
            for word in text.lower().replace("?", " ").replace(".", " ").replace(":", " ").split():
                vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


# --- the matching rule ---------------------------------------------------------------------------


def test_present_needs_the_whole_text_and_for_a_common_text_the_provenance() -> None:
    messages = index_of(
        msg("fact", "I adopted a golden retriever named Biscuit."),
        msg("thanks", "Thanks!", role="assistant", index=1),
        msg("thanks2", "Thanks! See you on Friday.", index=2),  # makes "Thanks!" ambiguous
        msg("long", " ".join(f"word{i}" for i in range(40)), role="assistant", index=3),
    )
    index = TextIndex(messages)
    assert not index.ambiguous("fact")
    assert index.ambiguous("thanks")
    assert not index.ambiguous("thanks2")
    # Case and line breaks do not decide; a chunk holding half of "long" is not the message.
    text = "- [2023-05-08] user: i ADOPTED a golden\nretriever   named Biscuit.\nassistant: Thanks!\n" + " ".join(
        f"word{i}" for i in range(20))
    anonymous = Delivered(text, frozenset(), 50, 2)
    assert present_messages(anonymous, index, messages) == {"fact"}
    named = Delivered(text, frozenset({"thanks", "long"}), 50, 2)
    assert present_messages(named, index, messages) == {"fact", "thanks"}
    # The lenient count takes a part named by provenance (one chunk of "long") as delivered.
    assert named_messages(named, index, messages) == {"fact", "thanks", "long"}
    # Provenance alone is not presence: the text must be there.
    assert present_messages(Delivered("nothing here", frozenset(messages), 5, 1), index, messages) == set()


def test_score_context_longmemeval_session_and_message_variants() -> None:
    a0 = msg("A#0", "I bought a red bicycle in Utrecht.", session="A", has_answer=True)
    a1 = msg("A#1", "Enjoy the canals on it.", role="assistant", session="A", index=1)
    b0 = msg("B#0", "I sold my red bicycle last week.", session="B", has_answer=True)
    c0 = msg("C#0", "Give me a banana bread recipe.", session="C")
    hay = Haystack("q", ((a0, a1), (b0,), (c0,)), (), index_of(a0, a1, b0, c0))
    q = Question("q", "What happened to my bicycle?", "knowledge-update", frozenset({"A#0", "B#0"}),
                 frozenset({"A", "B"}))
    index = TextIndex(hay.messages)
    # Session A reaches the model through its reply only; session B not at all.
    scores = score_context("longmemeval", hay, q, Delivered("assistant: Enjoy the canals on it.", frozenset(), 30, 1),
                           index)
    assert scores["context_session_recall_any"] == 1.0
    assert scores["context_session_recall_all"] == 0.0
    assert scores["context_message_recall_any"] == 0.0
    assert scores["context_message_recall_all"] == 0.0
    assert scores["context_tokens"] == 30.0
    both = Delivered("I bought a red bicycle in Utrecht.\nI sold my red bicycle last week.", frozenset(), 40, 2)
    scores = score_context("longmemeval", hay, q, both, index)
    assert scores["context_session_recall_all"] == 1.0
    assert scores["context_message_recall_all"] == 1.0


# --- equal-token delivery ------------------------------------------------------------------------


def exact_total(delivered: Delivered, counter: TiktokenCounter) -> int:
    return counter.count_message(Message("system", delivered.text)) + REPLY_PRIMING


def test_fill_budget_takes_units_in_rank_order_until_the_next_does_not_fit() -> None:
    counter = TiktokenCounter.for_model(None)
    short1 = msg("a", "The wifi password is tangerine-42.")
    long_ = msg("b", "A long story about the weather and the garden. " * 20, index=1)
    short2 = msg("c", "My dentist is Dr. Okafor.", index=2)
    messages = index_of(short1, long_, short2)
    ranked = [("a",), ("b",), ("c",)]
    alone, full = fill_budget(ranked[:1], messages, 10_000, counter)
    assert not full
    assert alone.keys == {"a"}
    budget = alone.tokens + 40  # room for another short line, not for the long one
    delivered, full = fill_budget(ranked, messages, budget, counter)
    assert full
    # "c" would fit, but the ranking is what is measured: nothing after the unit that did not fit.
    assert delivered.keys == {"a"}
    assert delivered.units == 1
    assert delivered.tokens == exact_total(delivered, counter) <= budget
    assert "tangerine-42" in delivered.text
    assert "[2023-05-08]" in delivered.text
    everything, full = fill_budget(ranked, messages, 10_000, counter)
    assert not full
    assert everything.keys == {"a", "b", "c"}
    assert everything.tokens == exact_total(everything, counter)
    # The budget is exact: one token less than everything needs leaves the last unit out.
    trimmed, full = fill_budget(ranked, messages, everything.tokens - 1, counter)
    assert full
    assert trimmed.keys == {"a", "b"}
    assert trimmed.tokens <= everything.tokens - 1


def test_fill_budget_writes_one_label_per_session_and_day_as_our_context_does() -> None:
    """Units of one session and day share a label, in the order said ("..." over a gap); groups keep rank order."""
    counter = TiktokenCounter.for_model(None)
    a0 = msg("a0", "I adopted a cat named Miso.", session="A")
    a1 = msg("a1", "Lovely name.", role="assistant", session="A", index=1)
    a2 = msg("a2", "We painted the kitchen blue.", session="A", index=2)
    a5 = msg("a5", "Miso hid under the bed.", session="A", index=5)
    b0 = msg("b0", "I sold the car.", session="B")
    messages = index_of(a0, a1, a2, a5, b0)
    ranked = [("a2",), ("b0",), ("a0", "a1"), ("a5",)]
    delivered, full = fill_budget(ranked, messages, 10_000, counter)
    assert not full
    assert delivered.units == 4
    assert delivered.text.endswith(
        "- [2023-05-08] user: I adopted a cat named Miso.\nassistant: Lovely name.\nuser: We painted the kitchen blue."
        "\n...\nuser: Miso hid under the bed.\n- [2023-05-08] user: I sold the car.")
    assert delivered.tokens == exact_total(delivered, counter)
    # The budget stays exact with grouped lines: one token less than all four need leaves the last out.
    trimmed, full = fill_budget(ranked, messages, delivered.tokens - 1, counter)
    assert full
    assert trimmed.keys == {"a0", "a1", "a2", "b0"}
    assert trimmed.tokens <= delivered.tokens - 1


def test_deliver_ranked_asks_deep_enough_to_fill_the_budget() -> None:
    counter = TiktokenCounter.for_model(None)
    messages = index_of(*(msg(f"m{i}", f"fact number {i} about item {i}", index=i) for i in range(100)))
    depths: list[int] = []

    def query(depth: int) -> list[tuple[str, ...]]:
        depths.append(depth)
        return [(f"m{i}",) for i in range(min(depth, 100))]

    delivered = deliver_ranked(query, messages, 100_000, counter)
    assert depths == [64, 256]
    assert delivered.units == 100
    small = deliver_ranked(query, messages, 200, counter)
    assert 0 < small.units < 64
    assert small.tokens <= 200


def test_unit_line_reads_like_a_recall_line() -> None:
    messages = index_of(msg("u", "Where is my passport?", name="Ann"),
                        msg("r", "In the top drawer.", role="assistant", index=1, name="Bob"))
    assert unit_line(("u", "r"), messages) == "- [2023-05-08] Ann: Where is my passport?\nBob: In the top drawer."
    assert unit_line(("missing",), messages) is None


# --- whole-turn baselines ------------------------------------------------------------------------


SESSION = (
    msg("D1:1", "Morning! Ready for the trip?", role="assistant", name="Bob"),
    msg("D1:2", "I packed my blue kayak for Lake Bled.", name="Ann", index=1),
    msg("D1:3", "Great, Lake Bled is lovely in June.", role="assistant", name="Bob", index=2),
    msg("D1:4", "My brother Tomas is a violin teacher.", name="Ann", index=3),
    msg("D1:5", "Does he teach children?", role="assistant", name="Bob", index=4),
)


def test_turns_are_a_user_message_with_the_replies_after_it() -> None:
    assert [tuple(m.key for m in t) for t in turns_of(SESSION)] == [("D1:1",), ("D1:2", "D1:3"), ("D1:4", "D1:5")]


def test_turn_baselines_return_whole_turns() -> None:
    bm25 = BM25Retriever("turn")
    bm25.ingest([SESSION])
    assert bm25.query("kayak Lake Bled", 1) == [("D1:2", "D1:3")]
    # A reply's words find its whole turn.
    assert bm25.query("children", 1) == [("D1:4", "D1:5")]
    dense = DenseRetriever(HashEmbedder(), "turn")
    dense.ingest([SESSION])
    assert dense.query("violin teacher Tomas", 1) == [("D1:4", "D1:5")]
    assert sorted(dense.query("anything", 10)) == [("D1:1",), ("D1:2", "D1:3"), ("D1:4", "D1:5")]
    hybrid = HybridRetriever(HashEmbedder(), "turn")
    hybrid.ingest([SESSION])
    query = "Tomas violin"
    assert hybrid.query(query, 3) == rrf([bm25.query(query, 3), dense.query(query, 3)])[:3]
    assert hybrid.query(query, 1) == [("D1:4", "D1:5")]


def test_rrf_sums_reciprocal_ranks() -> None:
    a, b, c = ("a",), ("b",), ("c",)
    # b: 1/(k+2) + 1/(k+1) beats a: 1/(k+1) and c: 1/(k+2), for any k (RRF_K included).
    for k in (1, 20, 60):
        assert rrf([[a, b], [b, c]], k=k) == [b, a, c]
    assert rrf([[a, b], [b, c]]) == [b, a, c]
    # Ties keep the first ranking's order.
    assert rrf([[a], [c]]) == [a, c]


# --- odd messages are counted, never fatal -------------------------------------------------------


def lme_with_odd_messages() -> list[dict[str, Any]]:
    return [{
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "Which city had I moved to last month?",
        "answer": "Porto",
        "answer_session_ids": ["s2"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 13:05"],
        "haystack_session_ids": ["s1", "s2"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Recommend a sci-fi novel."},
                {"role": "assistant", "content": ""},  # real logs have these: accepted by the core
                "not a message",
                {"role": "assistant", "content": None},
            ],
            [
                {"role": "user", "content": "   "},  # the core refuses an empty user message
                {"role": "user", "content": "I moved to Porto last month.", "has_answer": True},
                {"role": "assistant", "content": "Porto is a lovely city."},
            ],
        ],
    }]


def test_odd_messages_are_counted_by_the_loader_and_the_run_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(lme_with_odd_messages()))
    [hay] = load_longmemeval(path)
    assert hay.skipped == {"message is not an object (str)": 1, "content is not a string (NoneType)": 1}
    assert hay.n_messages == 5
    result = main_eval("longmemeval", path, [1, 5], "bm25", None, tmp_path / "out.json", None)
    assert result["counts"]["not_ingested"] == hay.skipped
    assert result["counts"]["not_ingested_total"] == 2
    assert result["overall"]["message_recall_any@5"] == 1.0
    assert json.loads((tmp_path / "out.json").read_text())["counts"]["not_ingested_total"] == 2


def test_skip_reason_keeps_the_rule_not_the_value() -> None:
    from langmem_tiers.errors import InvalidMessageError

    assert skip_reason(InvalidMessageError("role must be one of user, assistant; got 'robot'")) == (
        "InvalidMessageError: role must be one of user, assistant")
    assert skip_reason(InvalidMessageError("message has 12345 characters, over max_message_chars (10)")) == (
        "InvalidMessageError: message has N characters, over max_message_chars (N)")


# --- ours: layouts, cross-session delivery, the budget -------------------------------------------


FACT = "My sister Zelda moved to Reykjavik to work as a glaciologist."


def locomo_cross_session() -> list[dict[str, Any]]:
    """The fact sits in session 1; sessions 2 and 3 are small talk; the question comes later."""
    small_talk = [
        "How was the weekend?", "Quiet, I baked some bread.", "Did the bread rise well?",
        "It did, the oven finally works.", "Any plans for the holidays?", "Maybe a short hike.",
    ]
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    dates = ["1:56 pm on 8 May, 2023", "10:04 am on 19 June, 2023", "9:00 am on 1 July, 2023"]
    for s in (1, 2, 3):
        conversation[f"session_{s}_date_time"] = dates[s - 1]
        texts = ([FACT, "That is a big move, good for her."] if s == 1 else []) + small_talk
        conversation[f"session_{s}"] = [
            {"speaker": "Ann" if i % 2 == 0 else "Bob", "dia_id": f"D{s}:{i + 1}", "text": text}
            for i, text in enumerate(texts)
        ]
    qa = [{"question": "Where does Ann's sister Zelda live now?", "answer": "Reykjavik",
           "evidence": ["D1:1"], "category": 4}]
    return [{"sample_id": "conv-cross", "conversation": conversation, "qa": qa}]


@pytest.fixture
def cross_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_cross.json"
    path.write_text(json.dumps(locomo_cross_session()))
    return path


def test_layout_option() -> None:
    parser = build_parser()
    assert parser.parse_args(["locomo", "--data", "x"]).layout == "sessions"
    args = parser.parse_args(["locomo", "--data", "x", "--layout", "single", "--limit-conversations", "2",
                              "--limit-questions", "3", "--config", "recall_k=12"])
    assert (args.layout, args.limit, args.limit_questions, args.config) == ("single", 2, 3, [("recall_k", 12)])
    with pytest.raises(SystemExit):
        parser.parse_args(["locomo", "--data", "x", "--layout", "threads"])


def test_layouts_ingest_as_applications_do(cross_file: Path, local_embedder: Any) -> None:
    from langmem_tiers.eval.datasets import load_locomo

    [hay] = load_locomo(cross_file)
    sessions = OursRetriever(local_embedder, layout="sessions")
    single = OursRetriever(local_embedder, layout="single")
    try:
        assert sessions.ingest(hay.sessions) == {}
        assert single.ingest(hay.sessions) == {}
        # sessions: one session per dataset session, all of one user; questions come from a fresh one.
        asking = sessions.memory
        assert asking.namespace.session_id == "eval-questions"
        assert asking.messages() == []
        first = asking.for_session("session_1")
        assert [m.text for m in first.messages()][:1] == [FACT]
        assert first.messages()[0].created_at == hay.messages["D1:1"].created_at
        assert first.namespace.user_id == asking.namespace.user_id
        first.close()
        # single: the whole haystack in the asking session.
        assert len(single.memory.messages()) == hay.n_messages
        # search(scope="user") from the fresh session finds the fact of session 1.
        assert ("D1:1", "D1:2") in sessions.query("Where does Zelda live?", 3)
    finally:
        sessions.close()
        single.close()


def test_ours_on_a_postgres_journal_recalls_across_sessions(cross_file: Path, local_embedder: Any) -> None:
    """journal_url: the journal on PostgreSQL (the vectors in the temporary folder's Chroma), the same
    questions answered from it."""
    from langmem_tiers.eval.datasets import load_locomo
    from langmem_tiers.journal.postgres import PostgresJournal
    from tests.support.postgres import postgres_url

    [hay] = load_locomo(cross_file)
    with postgres_url() as url:
        ours = OursRetriever(local_embedder, journal_url=url)
        try:
            assert ours.ingest(hay.sessions) == {}
            assert isinstance(ours.memory.journal, PostgresJournal)
            assert ("D1:1", "D1:2") in ours.query("Where does Zelda live?", 3)
            delivered = ours.context("Where does Zelda live?")
            assert "D1:1" in delivered.keys
            assert FACT in delivered.text
        finally:
            ours.close()
        assert ours.memory is None


def test_context_recall_across_sessions(cross_file: Path, local_embedder: Any) -> None:
    """The fact of session 1 reaches context() of a fresh session of the same user."""
    result = main_eval("locomo", cross_file, [5], "ours", None, None, None, embedder=lambda: local_embedder)
    assert result["config"]["layout"] == "sessions"
    assert result["overall"]["recall@5"] == 1.0
    assert result["overall"]["context_recall"] == 1.0
    assert 0 < result["overall"]["context_tokens"] <= 2048


def test_context_recall_misses_what_the_budget_leaves_out(cross_file: Path, local_embedder: Any) -> None:
    """search() still ranks the fact first, but a recall share too small for it delivers nothing of it."""
    result = main_eval("locomo", cross_file, [5], "ours", None, None, None, embedder=lambda: local_embedder,
                       config_overrides={"recall_tokens": 8, "recall_uses_spare": False})
    assert result["config"]["window"]["recall_tokens"] == 8
    assert result["overall"]["recall@5"] == 1.0
    assert result["overall"]["context_recall"] == 0.0


def test_an_odd_message_is_counted_by_ours_and_not_fatal(tmp_path: Path, local_embedder: Any) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(lme_with_odd_messages()))
    result = main_eval("longmemeval", path, [5], "ours", None, None, None, embedder=lambda: local_embedder,
                       config_overrides={"recall_k": 6})
    not_ingested = result["counts"]["not_ingested"]
    assert not_ingested.pop("InvalidMessageError: a user message needs non-empty content") == 1
    assert not_ingested == {"message is not an object (str)": 1, "content is not a string (NoneType)": 1}
    assert result["counts"]["questions_scored"] == 1
    assert result["overall"]["message_recall_any@5"] == 1.0


def test_ours_config_overrides_are_validated() -> None:
    from langmem_tiers.errors import ConfigError

    assert ours_config(recall_k=12).recall_k == 12
    with pytest.raises(ConfigError):
        ours_config(no_such_field=1)
    with pytest.raises(ConfigError):
        OursRetriever(HashEmbedder(), layout="threads")  # type: ignore[arg-type]


# --- the comparison table ------------------------------------------------------------------------


def test_report_leads_with_like_for_like(tmp_path: Path) -> None:
    from langmem_tiers.eval.report import by_group_markdown, comparison_rows, load_results

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(locomo_cross_session()))
    files = []
    for name in ("bm25", "bm25-turns"):
        files.append(tmp_path / f"{name}.json")
        main_eval("locomo", path, [1, 5], name, None, files[-1], None)
    header, rows = comparison_rows(load_results(files))
    # Delivery at equal tokens comes before the ranking columns; each row names its unit.
    assert header.index("context_recall") < header.index("budget") < header.index("recall@1")
    assert [(row[1], row[2]) for row in rows] == [("bm25-turns", "turn"), ("bm25", "message")]
    assert {row[header.index("budget")] for row in rows} == {"2048"}
    by_category = by_group_markdown(load_results(files), "context_recall")
    assert by_category.splitlines()[0] == "| retriever | unit | 4 | overall |"
