"""Probe for issue 19's "richer keys": would indexing keys beside each turn's text change what recall finds?

    .venv/bin/python benchmarks/recall_keys_probe.py --keys date -- locomo \
        --data ../shared/data/locomo/locomo_dev.json --retriever ours --offset 0 --limit 1 --json OUT.json

Everything after ``--`` is the evaluation's own command line (``python -m langmem_tiers.eval``);
``--keys`` chooses what each turn record's keyword index holds besides its text:

* ``off``: the text alone (the product as it is; the probe's baseline).
* ``facts``: the offline extractor's keys of the turn's sentences (``langmem_tiers.semantic.extract``):
  the key ("location"), the words a question uses for it (``semantic.profile.KEY_WORDS``: "live
  city where ...") and the relation ("lives in"). LongMemEval's paper reports +9.4% recall from
  facts indexed beside each session (extracted by an LLM).
* ``kinds``: ``facts`` plus a few words for the kind of each personal statement the extractor keeps
  ("like enjoy favorite prefer" for a preference).
* ``date``: the record's date in words ("Monday 8 May 2023").
* ``all``: ``kinds`` and ``date``.

This is a probe, not a product switch: it measures the cheapest form of the idea before the
journal grows a field for it. It replaces, in this process only, the function that builds a stored
record row, so that a turn's keyword terms (the column the SQLite index reads instead of the text
when set; ``records.terms``) are its text followed by its keys; the text delivered, the vectors and
everything else stay as they are. Keys fused into the text's field, not a separate weighted field:
if this moved nothing, a weighted field of the same words could only move it by its weight.
SQLite journal, plaintext, embedded Chroma only (the evaluation's default). It prints how many turn
records got keys.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import Counter
from typing import Any

from langmem_tiers.journal import sql_core
from langmem_tiers.journal.base import NewRecord
from langmem_tiers.journal.encryption import RowCodec
from langmem_tiers.semantic.extract import extract_sentence
from langmem_tiers.semantic.profile import KEY_WORDS
from langmem_tiers.specifics import split_sentences

MODES = ("off", "facts", "kinds", "date", "all")
KIND_WORDS = {"preference": "like likes love enjoy favorite prefer", "relation": "family friend", "event": "plan"}


def turn_keys(text: str, created_at: float, mode: str) -> str:
    """The words ``mode`` indexes beside a turn record's text ("" when none)."""
    words: list[str] = []
    if mode in ("facts", "kinds", "all"):
        for line in text.split("\n"):
            body = line.split(": ", 1)[1] if ": " in line else line  # "speaker: what was said"
            for sentence in split_sentences(body):
                memory = extract_sentence(sentence)
                if memory is None:
                    continue
                if memory.key:
                    words += [memory.key.replace("_", " "), KEY_WORDS.get(memory.key, "")]
                if memory.triple:
                    words.append(memory.triple.relation.replace("_", " "))
                if mode in ("kinds", "all"):
                    words.append(KIND_WORDS.get(memory.kind, ""))
    if mode in ("date", "all") and created_at:
        day = dt.datetime.fromtimestamp(created_at, dt.timezone.utc)
        words.append(f"{day:%A} {day.day} {day:%B %Y}")
    return " ".join(w for w in words if w)


def install(mode: str, counts: Counter[str]) -> None:
    """Make every plaintext turn record stored from now on index its keys beside its text."""
    plain = sql_core.record_values  # type: ignore[attr-defined]  # imported there from rows

    def record_values(record: NewRecord, codec: RowCodec, ns_id: int) -> tuple[Any, ...]:
        row = plain(record, codec, ns_id)
        if codec.cipher is not None or record.kind != "turn":
            return row
        counts["turn records"] += 1
        keys = turn_keys(record.text, record.created_at, mode)
        if not keys:
            return row
        counts["with keys"] += 1
        return (*row[:-1], f"{record.text}\n{keys}")  # the last column is records.terms

    sql_core.record_values = record_values  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", choices=MODES, required=True)
    parser.add_argument("eval_args", nargs=argparse.REMAINDER, help="-- then the evaluation's arguments")
    args = parser.parse_args()
    eval_args = args.eval_args[1:] if args.eval_args[:1] == ["--"] else args.eval_args
    counts: Counter[str] = Counter()
    if args.keys != "off":
        install(args.keys, counts)
    from langmem_tiers.eval.__main__ import main as eval_main

    status = eval_main(eval_args)
    print(f"keys={args.keys}: {dict(counts) or 'none indexed'}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
