"""Griffe extension for the API reference: the docstrings' ``Example:`` sections are read as examples.

Google style allows ``Example:`` and ``Examples:``; griffe parses only the plural as runnable
examples (code blocks) and renders the singular as prose, where a doctest result such as
``['user', 'assistant']`` would be read as a Markdown link and fail the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
