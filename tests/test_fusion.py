"""Rank fusion and score shaping: table-driven, pure functions."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langmem_tiers.errors import ConfigError
from langmem_tiers.recall.fusion import (
    Fusion,
    FusionParams,
    NearDuplicates,
    ScoreParts,
    fuse,
    jaccard,
    recency_weight,
    retention,
    rrf,
    set_jaccard,
    word_set,
)

DAY = 86400.0


@pytest.mark.parametrize(("lists", "k", "weights", "want"), [
    ([], 60, None, {}),
    ([["a"]], 60, None, {"a": 1 / 61}),
    ([["a", "b"], ["b", "c"]], 1, None, {"a": 1 / 2, "b": 1 / 3 + 1 / 2, "c": 1 / 3}),
    ([["a", "b"], ["b", "a"]], 60, None, {"a": 1 / 61 + 1 / 62, "b": 1 / 62 + 1 / 61}),
    ([["a", "b"], ["b"]], 1, [2.0, 0.0], {"a": 1.0, "b": 2 / 3}),
    ([["a", "a", "b"]], 1, None, {"a": 1 / 2, "b": 1 / 4}),  # repeats count once, at the best rank
    ([[], ["x"]], 10, [1.0, 0.5], {"x": 0.5 / 11}),
])
def test_rrf(lists: list[list[str]], k: int, weights: list[float] | None, want: dict[str, float]) -> None:
    got = rrf(lists, k=k, weights=weights)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value)


@pytest.mark.parametrize(("lists", "k", "weights"), [
    ([["a"]], 0, None),
    ([["a"]], True, None),
    ([["a"], ["b"]], 60, [1.0]),
    ([["a"]], 60, [-1.0]),
    ([["a"]], 60, [math.nan]),
])
def test_rrf_refuses(lists: list[list[str]], k: Any, weights: list[float] | None) -> None:
    with pytest.raises(ConfigError):
        rrf(lists, k=k, weights=weights)


@pytest.mark.parametrize(("age", "half_life", "want"), [
    (0.0, DAY, 1.0),
    (DAY, DAY, 0.5),
    (2 * DAY, DAY, 0.25),
    (-5.0, DAY, 1.0),  # clock skew
    (1e9, math.inf, 1.0),
    (math.inf, DAY, 0.0),
])
def test_recency_weight(age: float, half_life: float, want: float) -> None:
    assert recency_weight(age, half_life) == pytest.approx(want)


@pytest.mark.parametrize("half_life", [0.0, -1.0, math.nan])
def test_recency_weight_refuses(half_life: float) -> None:
    with pytest.raises(ConfigError):
        recency_weight(1.0, half_life)


@pytest.mark.parametrize(("importance", "age", "stability", "pinned", "want"), [
    (1.0, 0.0, DAY, False, 1.0),
    (0.0, 10 * DAY, DAY, False, 0.0),
    (1.0, 2 * DAY, DAY, False, math.exp(-1.0)),  # stability doubles at importance 1
    (0.5, 1.5 * DAY, DAY, False, 0.5 * math.exp(-1.0)),
    (0.8, 1000 * DAY, DAY, True, 0.8),  # pinned never decays
    (0.5, -DAY, DAY, False, 0.5),
])
def test_retention(importance: float, age: float, stability: float, pinned: bool, want: float) -> None:
    assert retention(importance, age, stability, pinned) == pytest.approx(want)


def test_important_memories_fade_slower() -> None:
    age = 3 * DAY
    assert retention(0.9, age, DAY, False) / 0.9 > retention(0.2, age, DAY, False) / 0.2


@pytest.mark.parametrize(("importance", "stability"), [(-0.1, DAY), (1.1, DAY), (0.5, 0.0), (math.nan, DAY)])
def test_retention_refuses(importance: float, stability: float) -> None:
    with pytest.raises(ConfigError):
        retention(importance, 0.0, stability, False)


@pytest.mark.parametrize(("a", "b", "want"), [
    ("I like tea", "i LIKE tea!", 1.0),
    ("tea", "coffee", 0.0),
    ("a b c d", "a b", 0.5),
    ("", "", 1.0),
    ("東京 に 行く", "東京 に 来る", 0.5),
])
def test_jaccard(a: str, b: str, want: float) -> None:
    assert jaccard(a, b) == pytest.approx(want)


@pytest.mark.parametrize("kwargs", [
    {"rrf_k": 0},
    {"rrf_k": 1.5},
    {"keyword_weight": -1.0},
    {"vector_weight": math.inf},
    {"keyword_weight": 0.0, "vector_weight": 0.0},
    {"recency_coef": -0.1},
    {"importance_coef": math.nan},
    {"recency_half_life_seconds": 0.0},
    {"stability_seconds": -1.0},
])
def test_fusion_params_refuse(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        FusionParams(**kwargs)


def test_fuse_plain_rrf_order_and_parts() -> None:
    params = FusionParams(rrf_k=1, recency_coef=0.0, importance_coef=0.0)
    result = fuse(["a", "b"], ["b", "c"], params=params)
    assert [i for i, _ in result] == ["b", "a", "c"]
    parts = dict(result)
    assert parts["b"] == ScoreParts(keyword_rank=2, vector_rank=1, rrf=pytest.approx(1 / 3 + 1 / 2),
                                    recency=1.0, importance=0.0, total=pytest.approx(1 / 3 + 1 / 2))
    assert parts["a"].vector_rank is None
    assert parts["a"].keyword_rank == 1
    assert parts["c"].keyword_rank is None


@pytest.mark.parametrize(("case", "kwargs", "first"), [
    # Same ranks everywhere (a and b tie on RRF); the shaping term decides.
    ("newer wins", {"ages": {"a": 30 * DAY, "b": 0.0}}, "b"),
    ("important wins", {"importances": {"a": 0.9, "b": 0.1}}, "a"),
    ("old but pinned beats old unpinned",
     {"ages": {"a": 60 * DAY, "b": 60 * DAY}, "importances": {"a": 0.8, "b": 0.8}, "pinned": {"b"}}, "b"),
    ("tie keeps vector order", {}, "b"),
])
def test_fuse_shaping(case: str, kwargs: dict[str, Any], first: str) -> None:
    result = fuse(["a", "b"], ["b", "a"], **kwargs)
    assert result[0][0] == first, case


def test_fuse_total_formula() -> None:
    params = FusionParams(rrf_k=60, recency_coef=0.5, recency_half_life_seconds=DAY,
                          importance_coef=2.0, stability_seconds=DAY)
    ((cid, p),) = fuse([], ["m"], ages={"m": DAY}, importances={"m": 0.5}, params=params)
    assert cid == "m"
    assert p.rrf == pytest.approx(1 / 61)
    assert p.recency == pytest.approx(0.5)
    assert p.importance == pytest.approx(0.5 * math.exp(-1 / 1.5))
    assert p.total == pytest.approx(p.rrf * (1 + 0.5 * 0.5) * (1 + 2.0 * p.importance))


def test_fuse_empty() -> None:
    assert fuse([], []) == []


def test_score_parts_are_frozen() -> None:
    ((_, p),) = fuse(["a"], [])
    with pytest.raises(AttributeError):
        p.total = 1.0  # type: ignore[misc]


def test_fuse_extra_lists_and_boosts() -> None:
    # Off (no extra list, no boost): the two-list fusion of before, every boost 1.
    plain = fuse(["a", "b"], ["b", "c"])
    assert [c for c, _ in plain] == ["b", "a", "c"]
    assert all(p.boost == 1.0 for _, p in plain)
    # A third list that ranks "c" first lifts it above "a"; a new id from it is scored too.
    k = FusionParams().rrf_k
    extra = dict(fuse(["a", "b"], ["b", "c"], extra=[(["c", "d"], 1.0)]))
    assert extra["c"].rrf == pytest.approx(1 / (k + 2) + 1 / (k + 1))
    assert extra["c"].total > extra["a"].total
    assert "d" in extra
    # A boost multiplies the total and is reported.
    boosted = dict(fuse(["a", "b"], ["b", "c"], boosts={"c": 3.0}))
    assert boosted["c"].boost == 3.0
    assert boosted["c"].total == pytest.approx(3.0 * dict(plain)["c"].total)


# Stopwords, speaker labels and words of several lengths, as real text mixes them (they sort to different places
# in a prefix).
_WORDS = st.sets(st.sampled_from(["a", "and", "the", "about", "user", "assistant", "w1", "w22", "word3", "w4",
                                  "porto", "lisbon", "x", "yy", "wedding", "z5"]), max_size=12).map(frozenset)


@settings(max_examples=300, deadline=None)
@given(sets=st.lists(_WORDS, max_size=25), threshold=st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.85, 0.9, 1.0, 1.2]))
def test_near_duplicates_find_exactly_the_pairs_every_comparison_finds(sets: list[frozenset[str]],
                                                                       threshold: float) -> None:
    # Prefix filtering compares few pairs; it must decide every set as comparing all kept ones would.
    near = NearDuplicates(threshold)
    kept: list[frozenset[str]] = []
    for words in sets:
        brute = any(set_jaccard(words, k) >= threshold for k in kept)
        assert near.keep(words) is not brute, (words, kept, threshold)
        if not brute:
            kept.append(words)


def test_near_duplicates_keep_a_near_copy_out_and_a_different_text_in() -> None:
    near = NearDuplicates(0.85)
    assert near.keep(word_set("user: we moved to Lisbon in May\nassistant: how is the new flat?"))
    assert not near.keep(word_set("user: we moved to Lisbon in May!\nassistant: How is the new flat?"))
    assert near.keep(word_set("user: my sister moved to Porto\nassistant: is she happy there?"))


_IDS = st.lists(st.sampled_from([f"r{i}" for i in range(12)]), max_size=10)  # repeats within a list too
_WEIGHT = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.7])


@settings(max_examples=300, deadline=None)
@given(keyword=_IDS, vector=_IDS, first=st.lists(st.tuples(_IDS, _WEIGHT), max_size=2),
       added=st.lists(st.lists(st.tuples(_IDS, _WEIGHT), min_size=1, max_size=2), max_size=3),
       ages=st.dictionaries(st.sampled_from([f"r{i}" for i in range(12)]), st.floats(0, 1e8)),
       importances=st.dictionaries(st.sampled_from([f"r{i}" for i in range(12)]), st.floats(0, 1)),
       pinned=st.sets(st.sampled_from([f"r{i}" for i in range(12)])),
       boosts=st.dictionaries(st.sampled_from([f"r{i}" for i in range(12)]), st.sampled_from([1.5, 2.0])))
def test_lists_added_to_a_fusion_rank_exactly_as_fusing_them_all(
        keyword: list[str], vector: list[str], first: list[tuple[list[str], float]],
        added: list[list[tuple[list[str], float]]], ages: dict[str, float], importances: dict[str, float],
        pinned: set[str], boosts: dict[str, float]) -> None:
    # A search's later rounds add lists (flow: the neighbors of its best); the ranking and every score
    # part must be fuse()'s of all the lists, to the bit (== on floats, no approx).
    shape: dict[str, Any] = {"ages": ages, "importances": importances, "pinned": pinned, "boosts": boosts}
    fusion = Fusion(keyword, vector, extra=first, **shape)
    lists = list(first)
    for more in added:
        fusion.add(more, **shape)
        lists += more
        assert fusion.ranked == fuse(keyword, vector, extra=lists, **shape)
