"""where_match admits exactly the rows Chroma's own filter admits, for every shape it claims to understand;
ChromaStore.query's unfiltered-first path answers as the filtered query, and never crosses tenants."""

from __future__ import annotations

import doctest
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from langmem_tiers.errors import RecallError
from langmem_tiers.recall import vector_store, where_match
from langmem_tiers.recall.vector_store import ChromaStore
from langmem_tiers.recall.where_match import matcher

FIELDS = {
    "ns": [1, 2, 3, 7],
    "kind": ["turn", "fact", "1", "True"],
    "flag": [True, False],
    "score": [1.0, 2.5, 7.0],
    "journal": ["j1", "j2", "$and"],
}


def _rows(rng: random.Random, n: int) -> list[dict[str, Any]]:
    # Some fields left out: a row without the field never matches it.
    return [{f: rng.choice(values) for f, values in FIELDS.items() if rng.random() < 0.85} for _ in range(n)]


def _condition(rng: random.Random) -> dict[str, Any]:
    field = rng.choice(list(FIELDS))
    # Values of other fields too: 1 against True, 7 against 7.0, "1" against 1.
    pool = [v for values in FIELDS.values() for v in values]
    shape = rng.randrange(3)
    if shape == 0:
        return {field: rng.choice(pool)}
    if shape == 1:
        return {field: {"$eq": rng.choice(pool)}}
    return {field: {"$in": rng.sample(pool, rng.randint(1, 4))}}


def _where(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    if depth < 2 and rng.random() < 0.5:
        op = rng.choice(["$and", "$or"])
        return {op: [_where(rng, depth + 1) for _ in range(rng.randint(1, 3))]}  # one clause: Chroma refuses it
    return _condition(rng)


def test_matcher_admits_what_chroma_admits(tmp_path: Path) -> None:
    rng = random.Random(5)
    rows = _rows(rng, 200)
    with ChromaStore.persistent(tmp_path) as store:
        ids = [f"r{i}" for i in range(len(rows))]
        vectors = np.random.default_rng(5).standard_normal((len(rows), 4)).tolist()
        store.upsert(ids, vectors, None, rows)
        compared = refused = 0
        for _ in range(600):
            flt = _where(rng)
            admits = matcher(flt)
            try:
                chroma = set(store._call("get", where=flt, include=[])["ids"])
            except RecallError:  # Chroma refuses it (mixed types in $in, one clause in $and): so must the matcher
                assert admits is None, flt
                refused += 1
                continue
            if admits is None:  # a float operand: left to Chroma
                continue
            ours = {i for i, meta in zip(ids, rows) if admits(meta)}
            assert ours == chroma, flt
            compared += 1
        assert compared > 150
        assert refused > 20


@pytest.mark.parametrize("where", [
    {"ns": {"$gt": 3}}, {"ns": {"$ne": 3}}, {"ns": {"$nin": [3]}}, {"$not": [{"ns": 3}]}, {"ns": {"$in": []}},
    {"ns": [1, 2]}, {"$and": []}, {"$and": [{"ns": {"$gt": 1}}, {"ns": 2}]}, {"ns": {"$eq": 1, "$in": [1]}},
    {"ns": None}, {}, {"ns": {"$in": [1, True]}}, {"ns": {"$in": [2, 1.0]}}, {"ns": {"$in": [1, "a"]}},
    {"$and": [{"ns": 1}]}, {"$or": [{"ns": 1}]}, {"ns": 1, "kind": "turn"}, {"ns": 2.5}, {"ns": {"$in": [2.0]}},
])
def test_shapes_it_does_not_know_are_left_to_chroma(where: dict[str, Any]) -> None:
    assert matcher(where) is None


def test_module_example_runs() -> None:
    result = doctest.testmod(where_match)
    assert result.attempted > 0
    assert result.failed == 0


def _calls(store: ChromaStore) -> list[dict[str, Any]]:
    """Instrument the store: the keyword arguments of each Chroma ``query`` call."""
    seen: list[dict[str, Any]] = []
    real = store._call

    def counted(method: str, **kwargs: Any) -> Any:
        if method == "query":
            seen.append(kwargs)
        return real(method, **kwargs)

    store._call = counted  # type: ignore[method-assign]
    return seen


def test_a_broad_filter_is_answered_from_the_unfiltered_nearest(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((400, 8)).astype(np.float32)
    ids = [f"v{i}" for i in range(400)]
    metas = [{"journal": "j", "ns": i % 20} for i in range(400)]
    with ChromaStore.persistent(tmp_path) as store:
        store.upsert(ids, vectors.tolist(), None, metas)
        calls = _calls(store)
        q = rng.standard_normal(8).astype(np.float32)
        where = {"$and": [{"journal": {"$eq": "j"}}, {"ns": {"$in": list(range(18))}}]}  # 90% of the rows
        hits = store.query(q.tolist(), 10, where)
        assert len(calls) == 1
        assert "where" not in calls[0]
        assert calls[0]["n_results"] == vector_store.WIDE_FACTOR * 10
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = unit @ (q / np.linalg.norm(q))
        inside = [i for i in np.argsort(-scores) if metas[i]["ns"] < 18][:10]
        assert [h.id for h in hits] == [ids[i] for i in inside]
        assert [h.id for h in hits] == [h.id for h in _filtered(store, q, 10, where)]


def _filtered(store: ChromaStore, q: Any, k: int, where: dict[str, Any]) -> list[Any]:
    return vector_store._hits(store._call("query", query_embeddings=[q.tolist()], n_results=k, where=where,
                                          include=["documents", "metadatas", "distances"]))


def test_a_narrow_filter_goes_to_chroma_and_is_remembered(tmp_path: Path) -> None:
    """Another tenant's rows are all nearer: the unfiltered nearest are theirs, none is returned, the
    filtered query answers, and the next query with that filter goes there at once."""
    with ChromaStore.persistent(tmp_path) as store:
        theirs = [f"t{i}" for i in range(60)]
        ours = [f"o{i}" for i in range(60)]
        store.upsert(theirs, [[1.0, 0.0, 0.01 * i] for i in range(60)], None, [{"ns": 1}] * 60)
        store.upsert(ours, [[0.0, 1.0, 0.01 * i] for i in range(60)], None, [{"ns": 2}] * 60)
        calls = _calls(store)
        hits = store.query([1.0, 0.0, 0.0], 5, {"ns": {"$in": [2]}})
        assert len(hits) == 5
        assert all(h.id.startswith("o") and h.metadata["ns"] == 2 for h in hits)
        assert ["where" in c for c in calls] == [False, True]
        calls.clear()
        again = store.query([1.0, 0.0, 0.0], 5, {"ns": {"$in": [2]}})
        assert [h.id for h in again] == [h.id for h in hits]
        assert ["where" in c for c in calls] == [True]
        calls.clear()
        # A filter it cannot test goes to Chroma's filter directly.
        assert all(h.metadata["ns"] == 2 for h in store.query([1.0, 0.0, 0.0], 5, {"ns": {"$gt": 1}}))
        assert ["where" in c for c in calls] == [True]


def test_too_few_admitted_rows_go_to_chroma_even_when_the_collection_is_small(tmp_path: Path) -> None:
    """Fewer admitted rows than k among the unfiltered answer: Chroma's filter answers, even where that answer
    held the whole collection (a short answer is not taken as proof that nothing more is stored)."""
    with ChromaStore.persistent(tmp_path) as store:
        store.upsert(["a", "b", "c"], [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]], None, [{"ns": 1}, {"ns": 2}, {"ns": 1}])
        calls = _calls(store)
        assert [h.id for h in store.query([1.0, 0.0], 5, {"ns": 1})] == ["a", "c"]
        assert ["where" in c for c in calls] == [False, True]
