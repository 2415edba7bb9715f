"""Ablations on one ingest (langmem_tiers.eval.ablate): variants, selection, and the run itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langmem_tiers.errors import ConfigError
from langmem_tiers.eval.ablate import BASE, markdown, parse_variant, run_ablation
from langmem_tiers.eval.datasets import load_locomo, load_longmemeval
from langmem_tiers.eval.runner import asked_at, select

from .test_eval import LME_SAMPLE, LOCOMO_SAMPLE


def test_parse_variant() -> None:
    assert parse_variant("when=recall_when_boost=0.5,recall_k=8") == (
        "when", {"recall_when_boost": 0.5, "recall_k": 8})


@pytest.mark.parametrize(("text", "match"), [
    ("when", "NAME=FIELD=VALUE"),
    ("=recall_k=3", "NAME=FIELD=VALUE"),
    ("base=recall_k=3", "unchanged configuration"),
    ("wide=window_tokens=512", "not a query-time field"),  # index-time: needs its own ingest
    ("bad=recall_k", "FIELD=VALUE"),
])
def test_parse_variant_refuses(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_variant(text)


def test_select_by_index(tmp_path: Path) -> None:
    assert select(["a", "b", "c"], [2, 0]) == ["c", "a"]
    assert select(["a", "b"], None) == ["a", "b"]
    with pytest.raises(ConfigError, match=r"outside 0\.\.1"):
        select(["a", "b"], [2])


def test_asked_at(tmp_path: Path) -> None:
    (tmp_path / "l.json").write_text(json.dumps(LOCOMO_SAMPLE), encoding="utf-8")
    [hay] = load_locomo(tmp_path / "l.json")
    newest = max(m.created_at for m in hay.messages.values())
    assert asked_at(hay, hay.questions[0]) == newest + 60.0  # LoCoMo: after the conversation
    (tmp_path / "m.json").write_text(json.dumps(LME_SAMPLE), encoding="utf-8")
    lme = load_longmemeval(tmp_path / "m.json")[0]
    assert lme.questions[0].date
    assert asked_at(lme, lme.questions[0]) > 0  # LongMemEval: its question date


def test_one_ingest_many_variants(tmp_path: Path, local_embedder: Any) -> None:
    (tmp_path / "l.json").write_text(json.dumps(LOCOMO_SAMPLE), encoding="utf-8")
    haystacks = load_locomo(tmp_path / "l.json")
    saved: list[dict[str, Any]] = []
    result = run_ablation("locomo", haystacks, {"salient": {"recall_salient_weight": 1.0},
                                                "k1": {"recall_k": 1}},
                          local_embedder, k=[1, 5], checkpoint=saved.append)
    assert list(result["variants"]) == [BASE, "salient", "k1"]
    scored = sum(q.excluded is None for h in haystacks for q in h.questions)
    for v in result["variants"].values():
        assert v["questions"] == scored
        assert 0.0 <= v["overall"]["context_recall"] <= 1.0
    assert result["variants"]["k1"]["changes"] == {"recall_k": 1}
    assert saved[-1]["variants"].keys() == result["variants"].keys()
    table = markdown(result)
    assert table.count("\n") == 2 + len(result["variants"]) - 1
    assert "| salient | recall_salient_weight=1.0 |" in table
