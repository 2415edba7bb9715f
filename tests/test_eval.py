"""Evaluation harness: loaders, metrics, retrievers and the runner on tiny files in the official formats."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.errors import ConfigError
from langmem_tiers.eval.datasets import (
    load_locomo,
    load_longmemeval,
    merge_haystacks,
    parse_evidence,
    parse_lme_date,
    parse_locomo_date,
)
from langmem_tiers.eval.metrics import evidence_recall, message_recall, percentile, session_recall
from langmem_tiers.eval.ranking import RRF_K
from langmem_tiers.eval.retrievers import (
    BM25Retriever,
    DenseRetriever,
    get_retriever,
    ours_available,
)
from langmem_tiers.eval.runner import main_eval

REPO = Path(__file__).resolve().parents[1]
REAL_LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
REAL_LME = REPO.parent / "shared" / "data" / "longmemeval" / "longmemeval_s_dev.json"

LOCOMO_SAMPLE: list[dict[str, Any]] = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Ann",
                    "dia_id": "D1:1",
                    "text": "I adopted a golden retriever puppy named Biscuit.",
                },
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats! I started learning the violin."},
                {
                    "speaker": "Ann",
                    "dia_id": "D1:3",
                    "text": "Look at this.",
                    "blip_caption": "a photo of a lighthouse at sunset",
                    "img_url": ["http://example.invalid/x.jpg"],
                },
            ],
            "session_2_date_time": "10:04 am on 19 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "My violin teacher moved to Lisbon."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Biscuit chewed my kayak paddle yesterday."},
            ],
            "session_3_date_time": "9:00 am on 1 July, 2023",
            "session_3": [],
        },
        "qa": [
            {
                "question": "What is the name of Ann's dog?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "What instrument does Bob play and where did his teacher move?",
                "answer": "violin; Lisbon",
                "evidence": ["D1:2; D2:1"],
                "category": 1,
            },
            {
                "question": "What did Ann photograph?",
                "answer": "a lighthouse",
                "evidence": ["D:1:3"],
                "category": 2,
            },
            {
                "question": "What did Biscuit chew?",
                "answer": "paddle",
                "evidence": ["D2:02", "D9:9"],
                "category": 3,
            },
            {
                "question": "What did Bob adopt?",
                "adversarial_answer": "a puppy",
                "evidence": ["D1:1"],
                "category": 5,
            },
            {"question": "Dangling evidence", "answer": "x", "evidence": ["D2:40"], "category": 4},
        ],
    }
]


def _lme_item(qid: str, qtype: str, question: str, answer_sessions: list[str]) -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": "x",
        "answer_session_ids": answer_sessions,
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 13:05", "2023/05/22 (Mon) 08:00"],
        "haystack_session_ids": ["s_filler", "answer_a", "answer_b"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "Can you give me a recipe for banana bread?"},
                {
                    "role": "assistant",
                    "content": "Mash three bananas, mix flour, sugar and butter, bake 60 min.",
                },
            ],
            [
                {
                    "role": "user",
                    "content": "I bought a red bicycle from a shop in Utrecht.",
                    "has_answer": True,
                },
                {"role": "assistant", "content": "Nice, enjoy riding it around the canals."},
            ],
            [
                {"role": "user", "content": "Tell me about Jupiter's moons."},
                {"role": "assistant", "content": "Io, Europa, Ganymede and Callisto are the largest."},
                {"role": "user", "content": "I sold my red bicycle last week.", "has_answer": True},
            ],
        ],
    }


LME_SAMPLE = [
    _lme_item("q1", "knowledge-update", "What happened to my red bicycle?", ["answer_a", "answer_b"]),
    _lme_item("q2", "single-session-user", "Where did I buy my bicycle?", ["answer_a"]),
    _lme_item("q3_abs", "single-session-user", "What colour is my car?", []),
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(LOCOMO_SAMPLE), encoding="utf-8")
    return path


@pytest.fixture
def lme_file(tmp_path: Path) -> Path:
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps(LME_SAMPLE), encoding="utf-8")
    return path


class HashEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close. For the plumbing tests only."""

    key = "test:hash-64"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dimension
            for word in text.lower().replace("?", " ").replace(".", " ").replace(",", " ").split():
                vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        (["D:11:26"], ["D11:26"]),
        (["D30:05"], ["D30:5"]),
        ("D2:1", ["D2:1"]),
        (["D1:3", "D1:3", "nonsense"], ["D1:3"]),
        ([], []),
    ],
)
def test_parse_evidence_is_lenient(raw: Any, expected: list[str]) -> None:
    assert parse_evidence(raw) == expected


def test_dates() -> None:
    assert parse_locomo_date("1:56 pm on 8 May, 2023") == 1683554160.0
    assert parse_lme_date("2023/05/20 (Sat) 02:21") == 1684549260.0
    with pytest.raises(ConfigError):
        parse_locomo_date("yesterday")


def test_load_locomo(locomo_file: Path) -> None:
    [hay] = load_locomo(locomo_file)
    assert hay.hid == "conv-x"
    assert [len(s) for s in hay.sessions] == [3, 2]  # the empty session 3 is skipped
    first, second, image = hay.sessions[0]
    assert (first.role, first.name, first.text) == ("user", "Ann", "I adopted a golden retriever puppy named Biscuit.")
    assert first.line == "Ann: I adopted a golden retriever puppy named Biscuit."
    assert second.role == "assistant"
    assert image.text == "Look at this. [image: a photo of a lighthouse at sunset]"
    assert first.created_at == parse_locomo_date("1:56 pm on 8 May, 2023")
    assert second.created_at > first.created_at
    qs = {q.text: q for q in hay.questions}
    assert qs["What instrument does Bob play and where did his teacher move?"].gold_messages == {"D1:2", "D2:1"}
    assert qs["What did Ann photograph?"].gold_messages == {"D1:3"}
    assert qs["What did Biscuit chew?"].gold_messages == {"D2:2"}  # D9:9 does not resolve and is skipped
    assert qs["What did Bob adopt?"].excluded == "category 5 (adversarial)"
    assert qs["Dangling evidence"].excluded == "no evidence id resolves to a message"


def test_load_longmemeval(lme_file: Path) -> None:
    hays = load_longmemeval(lme_file)
    assert [h.hid for h in hays] == ["q1", "q2", "q3_abs"]
    q1 = hays[0].questions[0]
    assert q1.gold_sessions == {"answer_a", "answer_b"}
    assert q1.gold_messages == {"answer_a#0", "answer_b#2"}
    assert hays[0].messages["answer_b#2"].session_id == "answer_b"
    assert hays[2].questions[0].excluded == "abstention question"
    assert len(load_longmemeval(lme_file, limit=1)) == 1


def test_merged_haystacks_hold_each_session_once_oldest_first(tmp_path: Path) -> None:
    early = _lme_item("q4", "single-session-user", "What did I cook?", ["cooking"])
    early["haystack_dates"] = ["2023/05/25 (Thu) 12:00", "2023/05/01 (Mon) 09:00"]  # s_filler placed later
    early["haystack_session_ids"] = ["s_filler", "cooking"]
    early["haystack_sessions"] = [early["haystack_sessions"][0],
                                  [{"role": "user", "content": "I cooked a lentil soup.", "has_answer": True}]]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([*LME_SAMPLE, early]), encoding="utf-8")
    merged = merge_haystacks(load_longmemeval(path))
    # s_filler is in all four haystacks: once here; "cooking" is dated first, so it leads.
    assert [s[0].session_id for s in merged.sessions] == ["cooking", "s_filler", "answer_a", "answer_b"]
    assert [q.qid for q in merged.questions] == ["q1", "q2", "q3_abs", "q4"]
    assert set(merged.messages) == {m.key for s in merged.sessions for m in s}
    assert merged.n_messages == 8
    assert merged.questions[3].gold_messages == {"cooking#0"}
    assert merged.sessions[1][0].created_at == parse_lme_date("2023/05/20 (Sat) 02:21")  # its first haystack's date


def test_haystacks_whose_session_ids_clash_do_not_merge(tmp_path: Path) -> None:
    other = json.loads(json.dumps(LOCOMO_SAMPLE[0]))
    other["sample_id"] = "conv-y"
    other["conversation"]["session_1"][0]["text"] = "Another conversation's first line."
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([LOCOMO_SAMPLE[0], other]), encoding="utf-8")
    with pytest.raises(ConfigError, match="session 'session_1' differs between haystacks"):
        merge_haystacks(load_locomo(path))


def test_merged_run_asks_every_question_of_one_history(lme_file: Path) -> None:
    result = main_eval("longmemeval", lme_file, [1, 3], "bm25", None, None, None, merge=True)
    assert result["config"]["merged"] is True
    assert result["counts"]["questions_scored"] == 2
    assert result["counts"]["excluded"] == {"abstention question": 1}
    assert result["counts"]["haystacks"] == 1
    assert result["counts"]["messages"] == 7  # the three haystacks hold the same seven messages


def test_loaders_refuse_other_formats(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(ConfigError, match="JSON list"):
        load_locomo(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_longmemeval(tmp_path / "missing.json")


# --- metrics -----------------------------------------------------------------------------------


def test_metrics_count_k_in_units() -> None:
    units = [("a", "b"), ("c",), ("d",)]
    assert evidence_recall(units, {"b", "d"}, 1) == 0.5
    assert evidence_recall(units, {"b", "d"}, 3) == 1.0
    from langmem_tiers.eval.datasets import DatasetMessage

    pairs = [("a", "S1"), ("b", "S1"), ("c", "S2"), ("d", "S3")]
    messages = {k: DatasetMessage(k, s, 0, "user", None, k, 0.0) for k, s in pairs}
    assert session_recall(units, messages, {"S1", "S3"}, 2) == (1.0, 0.0)
    assert session_recall(units, messages, {"S1", "S3"}, 3) == (1.0, 1.0)
    assert message_recall(units, {"d"}, 2) == (0.0, 0.0)
    assert message_recall(units, {"b", "d"}, 2) == (1.0, 0.0)
    assert message_recall(units, {"b", "d"}, 3) == (1.0, 1.0)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0


# --- retrievers and runner -----------------------------------------------------------------------


def test_bm25_retriever(locomo_file: Path) -> None:
    [hay] = load_locomo(locomo_file)
    r = BM25Retriever()
    r.ingest(hay.sessions)
    assert r.query("violin teacher Lisbon", 2)[0] == ("D2:1",)
    assert r.query("zzzz qqqq", 5) == []


def test_dense_retriever_with_fake_embedder(locomo_file: Path) -> None:
    [hay] = load_locomo(locomo_file)
    r = DenseRetriever(HashEmbedder())
    r.ingest(hay.sessions)
    assert r.query("kayak paddle", 1) == [("D2:2",)]
    assert len(r.query("anything", 10)) == 5


def test_runner_locomo_json_shape(locomo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "locomo.json"
    result = main_eval("locomo", locomo_file, [1, 5], "bm25", None, out, None)
    assert json.loads(out.read_text()) == result
    assert set(result["overall"]) == {"recall@1", "recall@5", "context_recall", "context_recall_by_id",
                                      "context_tokens", "answer_recall"}
    assert set(result["by_category"]) == {"1", "2", "3", "4"}
    assert all(set(v) == set(result["overall"]) for v in result["by_category"].values())
    assert result["by_category"]["4"]["recall@5"] == 1.0  # "name of Ann's dog" -> D1:1
    # The gold answer in the delivered text: "violin; Lisbon" is not one run of words in any message.
    assert {c: v["answer_recall"] for c, v in result["by_category"].items()} == {"1": 0.0, "2": 1.0, "3": 1.0,
                                                                                  "4": 1.0}
    assert result["counts"]["answer_recall"]["scored"] == 4
    assert result["counts"]["questions_scored"] == 4
    assert result["counts"]["excluded"] == {
        "category 5 (adversarial)": 1,
        "no evidence id resolves to a message": 1,
    }
    assert result["counts"]["not_ingested"] == {}
    assert set(result["latency_ms"]) >= {"p50", "p95"}
    assert set(result["context_latency_ms"]) >= {"p50", "p95"}
    assert result["ingest_per_s"] > 0
    # Five short messages fit the 2048-token budget: everything is delivered.
    assert result["overall"]["context_recall"] == 1.0
    assert 0 < result["overall"]["context_tokens"] <= result["config"]["context_budget"] == 2048
    cfg = result["config"]
    assert (cfg["retriever"], cfg["k"], cfg["unit"], cfg["unit_kind"]) == ("bm25", [1, 5], "message", "message")
    assert "python" in cfg["versions"]
    assert {"model", "window"} <= set(cfg)


def test_runner_longmemeval_json_shape(lme_file: Path) -> None:
    spec = get_retriever("dense", HashEmbedder)
    from langmem_tiers.eval.runner import run_benchmark

    result = run_benchmark("longmemeval", load_longmemeval(lme_file), spec, [1, 3], progress=False)
    ranked = {
        f"{m}@{k}"
        for m in ("session_recall_any", "session_recall_all", "message_recall_any", "message_recall_all")
        for k in (1, 3)
    }
    delivered = {
        "context_session_recall_any",
        "context_session_recall_all",
        "context_message_recall_any",
        "context_message_recall_all",
        "context_message_recall_any_by_id",
        "context_message_recall_all_by_id",
        "context_tokens",
        "answer_recall",
    }
    assert set(result["overall"]) == ranked | delivered
    assert set(result["by_type"]) == {"knowledge-update", "single-session-user"}
    assert result["counts"]["questions_scored"] == 2
    assert result["counts"]["excluded"] == {"abstention question": 1}
    assert result["config"]["model"] == "test:hash-64"
    assert result["by_type"]["single-session-user"]["session_recall_any@3"] == 1.0


def test_hybrid_turns_reports_the_rrf_constant_it_runs_with() -> None:
    default = get_retriever("hybrid-turns", HashEmbedder)
    assert f"RRF k={RRF_K} " in default.unit
    assert default.factory().rrf_k == RRF_K  # type: ignore[attr-defined]
    given = get_retriever("hybrid-turns", HashEmbedder, baseline_rrf_k=60)
    assert "RRF k=60 " in given.unit
    assert given.factory().rrf_k == 60  # type: ignore[attr-defined]


def test_unknown_names_are_refused(locomo_file: Path) -> None:
    with pytest.raises(ConfigError, match="unknown"):
        get_retriever("nope")
    with pytest.raises(ConfigError, match="unknown"):
        main_eval("squad", locomo_file, [5], "bm25", None, None, None)
    with pytest.raises(ConfigError, match="k"):
        main_eval("locomo", locomo_file, [0], "bm25", None, None, None)


def test_module_cli(locomo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "langmem_tiers.eval",
            "locomo",
            "--data",
            str(locomo_file),
            "--k",
            "1,2",
            "--retriever",
            "bm25",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert {"recall@1", "recall@2", "context_recall"} <= set(json.loads(out.read_text())["overall"])
    assert "overall" in proc.stderr


def test_importing_the_harness_stays_light() -> None:
    code = (
        "import sys, langmem_tiers.eval, langmem_tiers.eval.__main__; "
        "bad = [m for m in ('langchain_core', 'llama_index', 'chromadb', 'sentence_transformers', 'torch') "
        "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- real model, framework baselines, ours ------------------------------------------------------


@pytest.mark.parametrize("name", ["dense", "langchain", "llamaindex"])
def test_embedding_baselines_with_the_local_model(name: str, locomo_file: Path) -> None:
    pytest.importorskip("sentence_transformers")
    result = main_eval("locomo", locomo_file, [1, 5], name, None, None, None)
    assert result["config"]["model"].startswith("st:")
    assert result["overall"]["recall@5"] == pytest.approx(1.0)  # 5 messages at most: everything is recalled
    assert result["by_category"]["4"]["recall@1"] == 1.0  # "name of Ann's dog" -> the Biscuit message first


def test_llamaindex_units_are_rounds(locomo_file: Path) -> None:
    pytest.importorskip("llama_index.core")
    [hay] = load_locomo(locomo_file)
    from langmem_tiers.eval.retrievers import make_embedder

    r = get_retriever("llamaindex", make_embedder).factory()
    r.ingest(hay.sessions)
    units = r.query("violin", 10)
    # Ann (user) opens a round, Bob (assistant) replies inside it.
    assert ("D1:1", "D1:2") in units
    assert sorted(k for u in units for k in u) == sorted(hay.messages)
    r.close()


def test_ours(locomo_file: Path) -> None:
    reason = ours_available()
    if reason is not None:
        pytest.skip(f"the core API is not there yet: {reason}")
    result = main_eval("locomo", locomo_file, [5], "ours", None, None, None)
    assert result["config"]["window"]["window_tokens"] == 256
    assert result["config"]["layout"] == "sessions"
    assert result["counts"]["not_ingested"] == {}
    assert 0.0 <= result["overall"]["recall@5"] <= 1.0


@pytest.mark.skipif(not REAL_LOCOMO.exists(), reason="../shared/data LoCoMo copy is not here")
def test_real_locomo_first_conversation() -> None:
    result = main_eval("locomo", REAL_LOCOMO, [5, 10], "bm25", 1, None, None)
    assert result["counts"]["haystacks"] == 1
    assert result["counts"]["questions_scored"] > 100
    assert set(result["by_category"]) == {"1", "2", "3", "4"}
    assert 0.2 < result["overall"]["recall@10"] <= 1.0


@pytest.mark.skipif(not REAL_LME.exists(), reason="../shared/data LongMemEval copy is not here")
def test_real_longmemeval_first_question() -> None:
    result = main_eval("longmemeval", REAL_LME, [5, 10], "bm25", 1, None, None)
    assert result["counts"]["haystacks"] == 1
    assert result["counts"]["messages"] > 100


def test_report_compares_result_files(locomo_file: Path, tmp_path: Path) -> None:
    from langmem_tiers.eval.report import load_results, to_markdown

    a = tmp_path / "a.json"
    main_eval("locomo", locomo_file, [1, 5], "bm25", None, a, None)
    md = to_markdown(load_results([a, a]))
    assert md.count("| locomo | bm25 |") == 2
    assert "recall@5" in md.splitlines()[0]
