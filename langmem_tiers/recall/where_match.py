"""Chroma ``where`` filters tested in Python, for the shapes recall builds (pure).

:meth:`~langmem_tiers.recall.vector_store.ChromaStore.query` asks Chroma for the collection's nearest
vectors without a filter first and keeps those the filter admits: Chroma's filtered query of a broad
filter costs far more than its unfiltered one (145 ms against 3-5 ms for one user's scope of 1,000
sessions in a collection of 117k vectors, embedded). That is only right where this module admits exactly
what Chroma would, so :func:`matcher` understands a small part of the language, and for anything else
returns ``None`` (the store then asks Chroma's filter): ``$and`` and ``$or`` of field conditions, a field
given a value (equality), ``$eq``, and ``$in`` of values of one type (Chroma refuses mixed ones), where
the values are strings, booleans or integers (a float is left to Chroma, which matches a stored integer
against its integer part). They compare as Chroma stores them: strings with strings, booleans with
booleans, an integer with an equal stored number (``7`` finds ``7.0``, ``1`` never finds ``True``); a row
without the field never matches. ``$ne`` and ``$nin`` are left to Chroma (what they do with a missing field
is Chroma's to say), and so is any shape Chroma refuses (one clause under ``$and``, two keys in one
mapping). A property test holds this against Chroma's own filter (tests/test_where_match.py).

    >>> admits = matcher({"$and": [{"journal": {"$eq": "j1"}}, {"ns": {"$in": [3, 4]}}]})
    >>> admits({"journal": "j1", "ns": 4}), admits({"journal": "j1", "ns": 5}), admits({"ns": 4})
    (True, False, False)
    >>> matcher({"ns": {"$gt": 3}}) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Admits = Callable[[Mapping[str, Any]], bool]


def matcher(where: Mapping[str, Any]) -> Admits | None:
    """A test of a row's metadata equal to Chroma's for ``where``, or ``None`` where this module cannot tell."""
    if not isinstance(where, Mapping) or len(where) != 1:  # Chroma wants exactly one key at every level
        return None
    ((key, value),) = where.items()
    if key in ("$and", "$or"):
        if not isinstance(value, list) or len(value) < 2:  # Chroma refuses fewer than two clauses
            return None
        parts = [matcher(clause) for clause in value]
        if any(p is None for p in parts):
            return None
        tests = [p for p in parts if p is not None]
        if key == "$and":
            return lambda meta: all(t(meta) for t in tests)
        return lambda meta: any(t(meta) for t in tests)
    return _field(key, value)


def _field(name: str, condition: Any) -> Admits | None:
    if name.startswith("$"):
        return None
    if not isinstance(condition, Mapping):
        condition = {"$eq": condition}  # a field given a value: Chroma's equality
    if len(condition) != 1:
        return None
    ((op, operand),) = condition.items()
    if op == "$eq" and _scalar(operand):
        return lambda meta: name in meta and _same(meta[name], operand)
    # Chroma refuses a list of mixed types ([1, True], [2, 1.0], [1, "a"]): so does this, so that the query
    # goes to Chroma and fails as it always did.
    if op == "$in" and isinstance(operand, list) and operand and all(_scalar(v) for v in operand) \
            and len({type(v) for v in operand}) == 1:
        exact = {(_kind(v), v) for v in operand}  # by kind: 1 and True are different values here
        return lambda meta: name in meta and (_kind(meta[name]), meta[name]) in exact
    return None


def _scalar(value: Any) -> bool:
    """An operand this module compares as Chroma does: a string, a boolean or an integer. Not a float: Chroma
    matches a stored integer against a float operand's integer part (``2.5`` finds ``2``)."""
    return isinstance(value, (str, int))  # bool is an int


def _kind(value: Any) -> str:
    """What Chroma compares a value as: booleans apart from numbers, ints and floats alike."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _same(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b
