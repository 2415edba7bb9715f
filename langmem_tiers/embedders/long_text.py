"""Texts longer than a model's input: split into pieces, embed the pieces, pool them back.

No I/O here: an embedder supplies how to split one text (its tokenizer and limit) and
runs the model on :attr:`Pieces.texts`; :meth:`Pieces.pool` turns the piece vectors
back into one vector per text, the token-weighted mean of its pieces, L2-normalized
(the scheme of OpenAI's cookbook for long inputs). A text that fits is one piece and
keeps its vector unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# One text -> its pieces with their token counts (the weights of the mean).
Splitter = Callable[[str], list[tuple[str, int]]]


@dataclass(frozen=True)
class Pieces:
    """The pieces of a batch of texts, in order, with the text each belongs to."""

    texts: list[str]
    weights: list[int]
    owners: list[int]
    count: int

    @classmethod
    def of(cls, texts: Sequence[str], split: Splitter) -> Pieces:
        """Split each text with ``split``, weighting each piece by its token count (at least 1)."""
        pieces: list[str] = []
        weights: list[int] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            for piece, tokens in split(text):
                pieces.append(piece)
                weights.append(max(int(tokens), 1))
                owners.append(i)
        return cls(pieces, weights, owners, len(texts))

    @property
    def split_any(self) -> bool:
        """Whether any text was split into more than one piece."""
        return len(self.texts) != self.count

    def pool(self, vectors: Sequence[Sequence[float]]) -> list[list[float]]:
        """One vector per text from one vector per piece."""
        if len(vectors) != len(self.texts):
            raise ValueError(f"expected {len(self.texts)} piece vectors, got {len(vectors)}")
        if not self.split_any:
            return [[float(x) for x in v] for v in vectors]
        groups: list[list[tuple[Sequence[float], int]]] = [[] for _ in range(self.count)]
        for vector, weight, owner in zip(vectors, self.weights, self.owners):
            groups[owner].append((vector, weight))
        return [_weighted_mean(group) for group in groups]


def _weighted_mean(group: list[tuple[Sequence[float], int]]) -> list[float]:
    if len(group) == 1:
        return [float(x) for x in group[0][0]]
    total = sum(w for _, w in group)
    mean = [0.0] * len(group[0][0])
    for vector, weight in group:
        for j, x in enumerate(vector):
            mean[j] += float(x) * weight / total
    norm = math.sqrt(sum(x * x for x in mean))
    return [x / norm for x in mean] if norm > 0 else mean


def windows(count: int, limit: int, starts_word: Callable[[int], bool]) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of at most ``limit`` tokens covering ``count`` tokens.

    A cut prefers the start of a word (``starts_word(i)``) within the last half of a
    window, so a piece re-tokenizes as it did inside the whole text.
    """
    if limit < 1:
        raise ValueError(f"limit ({limit}) must be >= 1")
    out: list[tuple[int, int]] = []
    start = 0
    while start < count:
        end = min(start + limit, count)
        if end < count:
            cut = end
            while cut > start + limit // 2 and not starts_word(cut):
                cut -= 1
            if cut > start + limit // 2:
                end = cut
        out.append((start, end))
        start = end
    return out
