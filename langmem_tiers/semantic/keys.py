"""Keys of memories: short snake_case names of what a memory is the value of ("home_city").

A key is scoped to the user (a session without a user id is its own scope): a new
memory with a key supersedes the user's current memory with that key.
"""

from __future__ import annotations

import re

from langmem_tiers.errors import InvalidMessageError

MAX_KEY_CHARS = 64
_KEY = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")
_SEPARATORS = re.compile(r"[\s\-./:]+")


def normalize_key(raw: str) -> str | None:
    """A lenient normal form for keys an extractor proposes: lowercase snake_case, or None.

    Example:
        >>> normalize_key("Home City"), normalize_key("favourite-food"), normalize_key("!!")
        ('home_city', 'favourite_food', None)
    """
    text = _SEPARATORS.sub("_", raw.strip().lower())
    text = re.sub(r"[^a-z0-9_]", "", text).strip("_")
    text = re.sub(r"_+", "_", text)[:MAX_KEY_CHARS].strip("_")
    return text or None


def check_key(key: object) -> str:
    """Validate a key given by the application (``remember(..., key=...)``); refuse, never repair."""
    if not isinstance(key, str) or not _KEY.match(key) or len(key) > MAX_KEY_CHARS:
        raise InvalidMessageError(
            f"key ({key!r:.80}) must be lowercase snake_case of letters and digits, at most {MAX_KEY_CHARS} "
            f"characters (e.g. 'home_city'): use {normalize_key(key) if isinstance(key, str) else None!r} or "
            "another name"
        )
    return key
