"""What the offline rolling summary keeps: a planted fact amid small talk, recent content after many
folds, degenerate input, near-duplicates; and the retention benchmark's scoring and generator."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from langmem_tiers import ExtractiveSummarizer, Message, SummaryRequest, WordCounter

WORDS = WordCounter()
SMALL_TALK = [
    ("How was your weekend?", "Pretty relaxing, thanks for asking."),
    ("The weather is so grey today.", "It has been a gloomy week."),
    ("I watched a funny video earlier.", "Those can really lift the mood."),
    ("Any plans for lunch?", "Maybe something light."),
    ("Haha, that is so true.", "Glad you agree!"),
]


def _benchmark() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "summary_retention.py"
    spec = importlib.util.spec_from_file_location("summary_retention_benchmark", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module while the class is built
    spec.loader.exec_module(module)
    return module


def _fold(previous: str, texts: list[str], cap: int, role: str = "user") -> str:
    messages = tuple(Message(role, t) for t in texts)
    return ExtractiveSummarizer().summarize(SummaryRequest(previous, messages, cap, WORDS.count_text))


def test_a_planted_fact_survives_80_turns_of_small_talk(make_memory: Any) -> None:
    memory = make_memory()
    memory.add("user", "Oh, by the way, my cat is called Miso.")
    memory.add("assistant", "What a sweet name!")
    for i in range(80):
        user, assistant = SMALL_TALK[i % len(SMALL_TALK)]
        memory.add("user", user)
        memory.add("assistant", assistant)
    assert memory.stats().pending_summary_messages == 0
    assert memory.window()[0].id > 2  # the fact scrolled out long ago
    assert "Miso" in memory.summary
    assert WORDS.count_text(memory.summary) <= memory.config.summary_tokens


def test_the_summary_rolls_recent_content_in_and_old_chit_chat_out() -> None:
    summary = ""
    for fold in range(30):
        summary = _fold(summary, [f"Chatting about topic{fold} and the weather{fold} again today.",
                                  f"Another remark on subject{fold} for the record."], cap=40)
        assert 0 < WORDS.count_text(summary) <= 40
    assert "topic29" in summary or "subject29" in summary  # the newest turns are represented
    # The first page did not freeze.
    assert "topic0 " not in summary
    assert "subject0 " not in summary


def test_facts_stay_while_chit_chat_rolls_and_older_facts_get_compressed() -> None:
    summary = _fold("", ["Oh, before I forget, my locker code at the gym is 4471, in case I ask later."], cap=60)
    assert "my locker code at the gym is 4471, in case I ask later" in summary  # room: full wording
    for fold in range(20):
        summary = _fold(summary, [f"Nice chat number{fold} about nothing much really.",
                                  f"We talked about clouds{fold} and other things."], cap=25)
    assert "4471" in summary
    assert "in case I ask later" not in summary  # compressed to the clause that holds the value
    assert "clouds19" in summary or "number19" in summary


@pytest.mark.parametrize("text", ["x " * 500, "y" * 5000, "!!! ??? ...", "ok"])
def test_degenerate_input_still_gives_a_summary_within_the_cap(text: str) -> None:
    for cap in (1, 5, 50):
        summary = _fold("", [text], cap=cap)
        assert summary.strip()
        assert WORDS.count_text(summary) <= cap


def test_degenerate_turns_never_stay_pending(make_memory: Any) -> None:
    memory = make_memory()
    for _ in range(12):
        memory.add("user", "x " * 500)
        memory.add("assistant", "x " * 500)
    memory.flush()
    assert memory.stats().pending_summary_messages == 0
    assert memory.summary.strip()


def test_near_duplicates_are_kept_once() -> None:
    first = _fold("", ["My cat is called Miso.", "Message 41: the train left from platform 12 again."], cap=200)
    second = _fold(first, ["my cat is called Miso!", "Message 7: the train left from platform 3 again.",
                           "Oh and my cat is called Miso, as I said."], cap=200)
    assert second.lower().count("miso") == 1
    assert second.count("the train left") == 1
    assert "Message 7" in second  # the newest instance of a template is the one kept


def test_retention_scores_the_fraction_of_key_values_found() -> None:
    bench = _benchmark()
    summary = "- user: my cat is called Miso. I live in Porto.\n- assistant: noted, 15 items"
    assert bench.retention(summary, ["Miso", "Porto", "Lisbon"]) == pytest.approx(2 / 3)
    assert bench.retention(summary, ["miso"]) == 1.0  # case does not matter
    assert bench.retention(summary, ["5"]) == 0.0  # whole words: "5" is not "15"
    assert bench.contains_value("the rent is due by the 25th.", "25th")
    assert bench.contains_value("see you on October\n18", "October 18")
    with pytest.raises(ValueError):
        bench.retention(summary, [])


def test_benchmark_conversations_are_seeded_varied_and_plant_ten_kinds() -> None:
    bench = _benchmark()
    turns, facts = bench.conversation("numbers", 0)
    assert len(turns) == bench.TURNS == 320
    assert sorted(f.kind for f in facts) == sorted(bench.FACTS)
    assert len(facts) == 10
    users = [u for u, _ in turns]
    for fact in facts:
        assert fact.value in fact.text
        assert users.index(fact.text) < bench.PLANT_BEFORE
    assert bench.conversation("numbers", 0) == (turns, facts)
    assert bench.conversation("numbers", 1) != (turns, facts)
    assert len(set(users)) > 200  # the numbers filler is varied, not one sentence repeated
    status = [u for u, _ in bench.conversation("status", 0)[0]]
    assert len(set(status)) < 60  # status talk is highly repetitive: 42 lines and the 10 facts
    assert max(status.count(s) for s in set(status)) >= 5


def test_a_summary_in_the_previous_format_is_read_and_rewritten() -> None:
    legacy = ("- [2024-03-14] bob: My sister Alice moves to Lisbon on 12 May.\n"
              "- [2024-03-15] user: Please book a train ticket to Porto for 3 people on Friday.")
    summary = _fold(legacy, ["I moved to Braga last week."], cap=200)
    assert summary.splitlines()[:2] == ["[2024-03-14]", "- bob: My sister Alice moves to Lisbon on 12 May."]
    assert "[2024-03-15]\n- user: Please book a train ticket to Porto for 3 people on Friday." in summary
    assert "I moved to Braga last week." in summary


@pytest.mark.parametrize(("kwargs", "rule"), [({"tool_weight": -1.0}, "tool_weight (-1.0) must be a finite number"),
                                              ({"max_sentence_chars": 5}, "max_sentence_chars (5) must be")])
def test_bad_settings_are_refused(kwargs: dict[str, Any], rule: str) -> None:
    from langmem_tiers.errors import ConfigError

    with pytest.raises(ConfigError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        ExtractiveSummarizer(**kwargs)
