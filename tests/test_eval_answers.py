"""Answer-level evaluation in the harness: answer_recall of what is delivered, and --answer --judge.

Tiny hand-made files in the official LoCoMo and LongMemEval formats, where each answer is
known to be in the haystack or not; the LLM side runs against the real loopback
chat-completions server (tests/support/openai_server.py) through the real openai client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.errors import ConfigError
from langmem_tiers.eval.__main__ import build_parser, main
from langmem_tiers.eval.datasets import Question, load_locomo, load_longmemeval
from langmem_tiers.eval.metrics import Delivered
from langmem_tiers.eval.qa import DEFAULT_JUDGE_PROMPT, parse_judgement
from langmem_tiers.eval.runner import main_eval, score_answer
from tests.support.openai_server import FakeOpenAIServer, HTTPError, RecordedRequest, Reply

DESCRIPTION = "Ann would like gentle suggestions that build on the painting classes she already takes."


def locomo_answers() -> list[dict[str, Any]]:
    """One conversation; per question, whether its gold answer is in the haystack is known."""
    turns = [
        ("Ann", "I adopted a golden retriever puppy named Biscuit."),
        ("Bob", "Congrats! I have been to Lisbon 15 times for work."),
        ("Ann", "We got married in 2022, in a tiny chapel."),
        ("Bob", "I started painting classes on Tuesdays."),
    ]
    conversation: dict[str, Any] = {
        "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": s, "dia_id": f"D1:{i + 1}", "text": t} for i, (s, t) in enumerate(turns)],
    }
    qa = [
        # In the haystack: delivered, found.
        {"question": "What is the name of Ann's dog?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
        # "5" must not match "15": not found.
        {"question": "How many times has Bob been to Lisbon?", "answer": "5", "evidence": ["D1:2"], "category": 1},
        # An integer gold answer, matched as a number.
        {"question": "When did Ann get married?", "answer": 2022, "evidence": ["D1:3"], "category": 2},
        # A description: excluded and counted.
        {"question": "What would Ann like?", "answer": DESCRIPTION, "evidence": ["D1:4"], "category": 3},
        # Category 5 is not scored at all (loader), so neither answer_recall nor QA sees it.
        {"question": "What did Bob adopt?", "adversarial_answer": "a puppy", "evidence": ["D1:1"], "category": 5},
    ]
    return [{"sample_id": "conv-answers", "conversation": conversation, "qa": qa}]


def lme_item(qid: str, qtype: str, question: str, answer: Any, said: str) -> dict[str, Any]:
    return {
        "question_id": qid, "question_type": qtype, "question": question,
        "question_date": "2023/06/01 (Thu) 10:00", "answer": answer, "answer_session_ids": ["answer_a"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 13:05"],
        "haystack_session_ids": ["filler", "answer_a"],
        "haystack_sessions": [
            [{"role": "user", "content": "Can you give me a recipe for banana bread?"},
             {"role": "assistant", "content": "Mash ripe bananas, mix flour, sugar and butter, bake an hour."}],
            [{"role": "user", "content": said, "has_answer": True},
             {"role": "assistant", "content": "Good to know, thanks for telling me."}],
        ],
    }


LME_ANSWERS = [
    lme_item("ku", "knowledge-update", "Where do I live now?", "Lisbon",
             "I moved from Porto to Lisbon last month, I live there now."),
    lme_item("ms", "multi-session", "How many plants do I have?", 3, "I now have 13 plants on the balcony."),
    lme_item("pref", "single-session-preference", "Any tips for my commute?",
             "The user would prefer tips that suit a cyclist commuting in the rain.", "I cycle to work."),
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_answers.json"
    path.write_text(json.dumps(locomo_answers()), encoding="utf-8")
    return path


@pytest.fixture
def lme_file(tmp_path: Path) -> Path:
    path = tmp_path / "lme_answers.json"
    path.write_text(json.dumps(LME_ANSWERS), encoding="utf-8")
    return path


# --- the gold answer reaches the loaders ---------------------------------------------------------


def test_loaders_keep_the_gold_answer_as_text(locomo_file: Path, lme_file: Path) -> None:
    [hay] = load_locomo(locomo_file)
    assert [q.answer for q in hay.questions] == ["Biscuit", "5", "2022", DESCRIPTION, None]
    assert [h.questions[0].answer for h in load_longmemeval(lme_file)][:2] == ["Lisbon", "3"]
    assert load_longmemeval(lme_file)[0].questions[0].date == "2023/06/01 (Thu) 10:00"


# --- answer_recall in the harness ----------------------------------------------------------------


def test_answer_recall_locomo(locomo_file: Path) -> None:
    result = main_eval("locomo", locomo_file, [5], "bm25-turns", None, None, None)
    # Everything fits the budget, so what decides is the matching rule alone.
    assert result["overall"]["context_recall"] == 1.0
    by = result["by_category"]
    assert by["4"]["answer_recall"] == 1.0  # Biscuit
    assert by["1"]["answer_recall"] == 0.0  # 5 is not 15
    assert by["2"]["answer_recall"] == 1.0  # 2022, an integer in the file
    assert by["3"]["answer_recall"] is None  # the description is not scored...
    assert result["overall"]["answer_recall"] == round(2 / 3, 4)  # rounded as every mean of the JSON
    counts = result["counts"]["answer_recall"]
    assert counts["scored"] == 3
    assert counts["by_category"] == {"1": 1, "2": 1, "3": 0, "4": 1}
    assert counts["excluded"] == {"description answer": {"3": 1}}  # ...but counted
    assert counts["excluded_total"] == 1
    assert result["counts"]["questions_scored"] == 4  # the other metrics still score all four
    assert [(q["qid"], q["answer_recall"]) for q in result["questions"]] == [
        ("conv-answers/q0", 1.0), ("conv-answers/q1", 0.0), ("conv-answers/q2", 1.0), ("conv-answers/q3", None)]
    assert "5 does not match 15" in result["config"]["answer_recall_rule"]


def test_answer_recall_scores_what_is_delivered_not_what_is_stored() -> None:
    q = Question("q", "What is the name of Ann's dog?", "4", frozenset({"D1:1"}), answer="Biscuit")
    assert score_answer(q, Delivered("- [2023-05-08] Ann: my puppy Biscuit", frozenset(), 30, 1)) == (
        {"answer_recall": 1.0}, None)
    # Provenance is not enough: the answer's words must be in the text the model gets.
    assert score_answer(q, Delivered("- [2023-05-08] Ann: I adopted a puppy", frozenset({"D1:1"}), 30, 1)) == (
        {"answer_recall": 0.0}, None)
    assert score_answer(replace(q, answer=None), Delivered("", frozenset(), 3, 0)) == ({}, "no gold answer")
    assert score_answer(replace(q, answer=DESCRIPTION), Delivered(DESCRIPTION, frozenset(), 30, 1)) == (
        {}, "description answer")


@pytest.mark.parametrize(
    ("gold", "delivered", "found"),
    [
        ("5", "- [2023-05-08] Ann: we have 3 cats", False),  # a count never matches a date's digits
        ("8", "Sat 2023-05-08: hello", False),
        ("3", "- [2023-05-08] Ann: we have 3 cats", True),
        ("8 May 2023", "- [2023-05-08] Ann: we went to the lake", True),  # the date written out
        ("May 2023", "Mon 2023-05-08 Ann: we went", True),
        ("7 May 2023", "- [2023-05-08] Ann: we went yesterday", False),
        ("2022", "- [2023-05-08] Ann: we married in 2022", True),
    ],
)
def test_dates_count_as_dates_not_as_numbers(gold: str, delivered: str, found: bool) -> None:
    q = Question("q", "?", "2", frozenset({"D1:1"}), answer=gold)
    assert score_answer(q, Delivered(delivered, frozenset(), 10, 1))[0] == {"answer_recall": float(found)}


def test_answer_recall_longmemeval_per_type(lme_file: Path) -> None:
    result = main_eval("longmemeval", lme_file, [5], "bm25-turns", None, None, None)
    by = result["by_type"]
    assert by["knowledge-update"]["answer_recall"] == 1.0
    assert by["multi-session"]["answer_recall"] == 0.0  # 3 is not 13
    assert by["single-session-preference"]["answer_recall"] is None
    assert result["counts"]["answer_recall"]["excluded"] == {"description answer": {"single-session-preference": 1}}
    assert result["overall"]["answer_recall"] == 0.5


def test_before_and_after_the_semantic_tier_are_config_flags(lme_file: Path, tmp_path: Path,
                                                               local_embedder: Any) -> None:
    args = build_parser().parse_args(["longmemeval", "--data", "x", "--config", "extract_memories=false",
                                      "--config", "profile_tokens=0", "--config", "recall_uses_spare=True"])
    assert args.config == [("extract_memories", False), ("profile_tokens", 0), ("recall_uses_spare", True)]
    results = {}
    for label, overrides in (("before", dict(args.config[:2])), ("after", {})):
        results[label] = main_eval("longmemeval", lme_file, [5], "ours", 2, None, None,
                                   embedder=lambda: local_embedder, config_overrides=overrides)
    before, after = results["before"]["config"], results["after"]["config"]
    assert (before["window"]["extract_memories"], before["window"]["profile_tokens"]) == (False, 0)
    assert (after["window"]["extract_memories"], after["window"]["profile_tokens"]) == (True, 300)
    assert before["overrides"] == {"extract_memories": False, "profile_tokens": 0}
    assert before["context_budget"] == after["context_budget"]  # like for like: the same total budget
    for result in results.values():
        # ours delivers the fact of session answer_a, so the answer is found; 13 is not 3.
        assert result["by_type"]["knowledge-update"]["answer_recall"] == 1.0
        assert result["by_type"]["multi-session"]["answer_recall"] == 0.0


# --- --answer --judge against the loopback chat-completions server ------------------------------

# question fragment -> (the word the context must hold, what the fake model then answers)
KNOWS = {"name of Ann's dog": ("Biscuit", "Biscuit"), "married": ("2022", "In 2022."),
         "Lisbon": ("Lisbon", "Five times."), "live now": ("Lisbon", "Lisbon")}


def fake_llm(request: RecordedRequest) -> Any:
    """A faithful fake: answers only from the Memories block it is sent; the judge compares gold and answer."""
    prompt = request.json["messages"][0]["content"]
    if prompt.startswith(DEFAULT_JUDGE_PROMPT.split("\n", 1)[0]):
        question = re.search(r"^Question: (.*)$", prompt, re.MULTILINE).group(1)  # type: ignore[union-attr]
        gold = re.search(r"^Gold answer: (.*)$", prompt, re.MULTILINE).group(1)  # type: ignore[union-attr]
        answer = re.search(r"^Generated answer: (.*)$", prompt, re.MULTILINE).group(1)  # type: ignore[union-attr]
        if "married" in question:
            return Reply("Hard to say, the answer seems close enough.")  # neither JSON nor a label
        label = "CORRECT" if gold.lower() in answer.lower() else "WRONG"
        return Reply("```json\n" + json.dumps({"reason": "compared", "label": label}) + "\n```")
    memories, _, question = prompt.partition("Question: ")
    if "Ann like" in question:
        return HTTPError(500)  # the server fails this one (after the client's retries)
    for key, (needed, answer) in KNOWS.items():
        if key in question and needed in memories:
            return Reply(answer)
    return Reply("I do not know.")


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(chat=fake_llm, api_key="sk-test") as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def test_answer_and_judge_end_to_end(locomo_file: Path, tmp_path: Path, llm: FakeOpenAIServer) -> None:
    out = tmp_path / "qa.json"
    code = main(["locomo", "--data", str(locomo_file), "--retriever", "bm25-turns", "--k", "5", "--answer",
                 "--judge", "--answer-model", "small-model", "--judge-model", "judge-model", "--llm-retries", "0",
                 "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    by = result["by_category"]
    assert by["4"]["qa_accuracy"] == 1.0  # Biscuit, from the delivered context
    assert by["1"]["qa_accuracy"] == 0.0  # "Five times." against gold 5: the judge says WRONG
    assert by["2"]["qa_accuracy"] is None  # the judge's reply was unreadable: not graded...
    assert by["3"]["qa_accuracy"] is None  # the answer call failed: not graded...
    assert result["overall"]["qa_accuracy"] == 0.5
    qa = result["qa"]
    assert qa["graded"] == 2
    assert qa["not_graded"] == {"2": {"judge: unreadable judgement": 1},  # ...and both counted
                                "3": {"answer: InternalServerError": 1}}
    assert (qa["answer_model"], qa["judge_model"]) == ("small-model", "judge-model")
    assert qa["base_url"] == llm.base_url + "/"
    usage = qa["usage"]
    assert (usage["answer"]["calls"], usage["answer"]["failed"]) == (4, 1)
    assert (usage["judge"]["calls"], usage["judge"]["failed"]) == (3, 1)
    assert qa["llm_calls"] == 7 == len(llm.bodies("chat"))
    assert qa["llm_tokens"] == sum(u["total_tokens"] for u in usage.values()) > 0
    # What was sent: the delivered context to the answerer, JSON mode and temperature 0 to the judge.
    bodies = llm.bodies("chat")
    answers = [b for b in bodies if b["model"] == "small-model"]
    judges = [b for b in bodies if b["model"] == "judge-model"]
    assert "Ann: I adopted a golden retriever puppy named Biscuit." in answers[0]["messages"][0]["content"]
    assert all(b["temperature"] == 0.0 for b in bodies)
    assert all(b["response_format"] == {"type": "json_object"} for b in judges)
    assert not any("response_format" in b for b in answers)
    rows = {q["qid"]: q for q in result["questions"]}
    assert rows["conv-answers/q0"]["answer"] == "Biscuit"
    assert rows["conv-answers/q0"]["correct"] is True
    assert rows["conv-answers/q3"]["qa_error"] == "answer: InternalServerError"
    assert "sk-test" not in out.read_text()  # the key never reaches the results


def test_a_failed_request_is_retried_and_a_slow_one_times_out(lme_file: Path, tmp_path: Path,
                                                              llm: FakeOpenAIServer) -> None:
    llm.push(HTTPError(503, retry_after=0.01), Reply("Lisbon"))  # the first answer: 503, then the retry
    llm.push(Reply('{"label": "CORRECT"}'))  # its judgement
    llm.push(Reply("three", delay=3.0), Reply("three", delay=3.0))  # the second answer, twice: too slow
    out = tmp_path / "qa.json"
    code = main(["longmemeval", "--data", str(lme_file), "--retriever", "bm25-turns", "--limit", "2",
                 "--answer", "--judge", "--llm-retries", "1", "--llm-timeout", "0.5", "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["by_type"]["knowledge-update"]["qa_accuracy"] == 1.0
    assert result["qa"]["not_graded"] == {"multi-session": {"answer: APITimeoutError": 1}}
    # The retry is the client's: one call counted, two requests sent for it.
    assert result["qa"]["usage"]["answer"]["calls"] == 2
    assert len(llm.bodies("chat")) == 5


def test_answer_without_judge_answers_but_does_not_grade(lme_file: Path, tmp_path: Path,
                                                         llm: FakeOpenAIServer) -> None:
    result = main_eval_cli(["longmemeval", "--data", str(lme_file), "--retriever", "bm25", "--limit", "2",
                            "--answer"], tmp_path)
    assert "qa_accuracy" not in result["overall"]
    assert result["qa"]["judge_model"] is None
    assert [q["answer"] for q in result["questions"]] == ["Lisbon", "I do not know."]
    assert result["qa"]["usage"]["judge"]["calls"] == 0


def main_eval_cli(argv: list[str], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "result.json"
    assert main([*argv, "--json", str(out)]) == 0
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_no_key_is_one_clear_line_and_exit_2_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # The data path does not exist: the key is checked first, before loading or ingesting anything.
    code = main(["locomo", "--data", "/nonexistent/locomo.json", "--answer", "--judge"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "OPENAI_API_KEY" in err
    assert "--answer" in err


def test_judge_needs_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["locomo", "--data", "/nonexistent/locomo.json", "--judge"]) == 2
    assert "--judge grades the answers of --answer" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"label": "CORRECT"}', True),
        ('{"reason": "same city", "label": "WRONG"}', False),
        ('{"label": " correct "}', True),
        ('```json\n{"label": "WRONG"}\n```', False),
        ('Sure! {"reason": "same date", "label": "CORRECT"} Hope this helps.', True),
        ("Both name Biscuit. CORRECT", True),
        ("WRONG", False),
        ("CORRECT or WRONG, hard to say", None),
        ('{"label": "PARTIAL"}', None),
        ('{"verdict": "CORRECT"}', True),  # no label key: the one label word still decides
        ("", None),
        (None, None),
        ("the answer is correct", None),  # lowercase prose is not a label
    ],
)
def test_parse_judgement_is_robust(reply: str | None, verdict: bool | None) -> None:
    assert parse_judgement(reply) is verdict


def test_offset_runs_a_benchmark_in_shards(lme_file: Path) -> None:
    """``--offset N --limit M``: questions N+1..N+M, so a long run can be split and its shards compared."""
    whole = main_eval("longmemeval", lme_file, [5], "bm25", None, None, None)
    shards = [main_eval("longmemeval", lme_file, [5], "bm25", 1, None, None, offset=i) for i in range(3)]
    assert [q["qid"] for s in shards for q in s["questions"]] == [q["qid"] for q in whole["questions"]]
    assert [s["config"]["offset"] for s in shards] == [0, 1, 2]
    assert build_parser().parse_args(["longmemeval", "--data", "x", "--offset", "3"]).offset == 3
    with pytest.raises(SystemExit):
        build_parser().parse_args(["longmemeval", "--data", "x", "--offset", "-1"])


def test_haystacks_by_index_run_as_one(lme_file: Path) -> None:
    """``--haystacks 2,0``: those questions of the file, scored as one run (a held-apart half's mean in one
    command, not a hand-weighted mean of shards); with --offset / --limit it is refused."""
    whole = main_eval("longmemeval", lme_file, [5], "bm25", None, None, None)
    half = main_eval("longmemeval", lme_file, [5], "bm25", None, None, None, indices=[2, 0])
    expected = [whole["questions"][2]["qid"], whole["questions"][0]["qid"]]
    assert [q["qid"] for q in half["questions"]] == expected
    assert half["config"]["haystacks"] == [2, 0]
    assert half["counts"]["questions_scored"] == 2
    assert build_parser().parse_args(["longmemeval", "--data", "x", "--haystacks", "1,3"]).haystacks == [1, 3]
    for bad in ("1,x", ","):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["longmemeval", "--data", "x", "--haystacks", bad])
    with pytest.raises(ConfigError, match="leave out limit and offset"):
        main_eval("longmemeval", lme_file, [5], "bm25", None, None, None, indices=[0], offset=1)
    with pytest.raises(ConfigError, match=r"outside 0\.\.2"):
        main_eval("longmemeval", lme_file, [5], "bm25", None, None, None, indices=[3])


def test_each_question_carries_its_figures(lme_file: Path) -> None:
    """Per-question rows hold every figure the means are made of, so two runs compare question by question."""
    result = main_eval("longmemeval", lme_file, [5], "bm25", None, None, None)
    rows = result["questions"]
    assert all({"session_recall_all@5", "context_tokens"} <= set(q["scores"]) for q in rows)
    for name in ("session_recall_all@5", "context_tokens"):
        mean = sum(q["scores"][name] for q in rows) / len(rows)
        assert mean == pytest.approx(result["overall"][name], abs=0.05)  # the means are rounded (tokens: 0.1)
