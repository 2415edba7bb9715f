"""What a "when" question spends testing candidates for a date (issue 15, eleventh step; not a timed test).

    .venv/bin/python benchmarks/time_expression.py --data ../shared/data/locomo/locomo_dev.json

1. Per text: LoCoMo's turns as recall records hold them ("Speaker: text" lines, two a turn), each tested
   by the case-blind pattern (``recall.query._TIME_EXPRESSION``) and by ``has_time_expression`` (lower-
   cased ASCII against a case-sensitive copy), in rotated order over ``--rounds`` rounds; the answers
   must be equal.
2. Per question: conversation ``--conversation`` ingested by the evaluation's ``ours`` retriever, then
   ``context()`` for its questions 10-109 asked as of the dataset's time; the recall engine's calls of
   ``has_time_expression`` counted and timed, per question that asks when.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from langmem_tiers.embedders.local import LocalEmbedder
from langmem_tiers.eval.datasets import load_locomo
from langmem_tiers.eval.ours import OursRetriever
from langmem_tiers.eval.runner import asked_at
from langmem_tiers.recall import engine, query


def turn_texts(data: Path) -> list[str]:
    texts = []
    for conversation in json.loads(data.read_text()):
        for key, session in conversation["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                texts += [f"{a['speaker']}: {a['text']}\n{b['speaker']}: {b['text']}"
                          for a, b in zip(session[::2], session[1::2])]
    return texts


def per_text(texts: list[str], rounds: int) -> dict[str, Any]:
    ways = {"case-blind pattern": lambda t: bool(query._TIME_EXPRESSION.search(t)),
            "has_time_expression": query.has_time_expression}
    took: dict[str, list[float]] = {name: [] for name in ways}
    answers: dict[str, list[bool]] = {}
    for r in range(rounds):
        for name in list(ways)[r % 2:] + list(ways)[:r % 2]:
            t = time.perf_counter()
            answers[name] = [ways[name](text) for text in texts]
            took[name].append((time.perf_counter() - t) / len(texts) * 1e6)
    return {"texts": len(texts), "same_answers": len({tuple(a) for a in answers.values()}) == 1,
            **{f"{name} us per text": round(statistics.median(v), 2) for name, v in took.items()}}


def per_question(data: Path, conversation: int) -> dict[str, Any]:
    hay = load_locomo(data)[conversation]
    retriever = OursRetriever(LocalEmbedder())
    retriever.ingest(hay.sessions)
    questions = hay.questions[10:110]
    retriever.ask_at(asked_at(hay, questions[0]))
    calls, seconds = 0, 0.0
    original = engine.has_time_expression

    def counted(text: str) -> bool:
        nonlocal calls, seconds
        t = time.perf_counter()
        try:
            return original(text)
        finally:
            calls += 1
            seconds += time.perf_counter() - t

    engine.has_time_expression = counted  # type: ignore[assignment]
    try:
        for q in questions:
            retriever.context(q.text)
    finally:
        engine.has_time_expression = original
        retriever.close()
    when = sum(query.analyze(q.text, 0.0).asks_when for q in questions)
    return {"conversation": conversation, "questions": len(questions), "asking_when": when,
            "tests per when-question": round(calls / max(when, 1), 1),
            "ms per when-question": round(seconds / max(when, 1) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="locomo_dev.json")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--conversation", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(per_text(turn_texts(args.data), args.rounds)))
    print(json.dumps(per_question(args.data, args.conversation)))


if __name__ == "__main__":
    main()
