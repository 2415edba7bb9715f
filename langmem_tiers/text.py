"""Word-level helpers shared by the keyword index and the extractive summarizer."""

from __future__ import annotations

import re

WORD = re.compile(r"\w+", re.UNICODE)

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just let me more most my myself
    no nor not now of off on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours yourself
    yourselves yes yeah ok okay oh hi hey hello thanks thank sure really like just also get got go going
    know think well much one it's i'm that's don't you're can't i've i'll s t d m ll re ve""".split()
)


def query_words(text: str) -> list[str]:
    """Distinct lowercase words of a query, stopwords dropped (all words if only stopwords are left).

    Dropping stopwords keeps keyword search fast on large journals: a word in every
    record matches every record, and bm25 gives it almost no weight anyway.

    Example:
        >>> query_words("What did I say about the Porto wedding?")
        ['say', 'porto', 'wedding']
    """
    words = list(dict.fromkeys(w.lower() for w in WORD.findall(text)))
    content = [w for w in words if w not in STOPWORDS]
    return content or words
