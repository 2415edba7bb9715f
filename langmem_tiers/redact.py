"""PII redaction applied before anything is persisted or indexed.

A redactor is any ``Callable[[str], str]``. :class:`PIIRedactor` is the built-in
one: e-mail addresses, phone numbers and payment card numbers (Luhn-checked, so
order numbers are left alone) become typed placeholders like ``[EMAIL]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from langmem_tiers.messages import TEXT_PART_TYPES, Message

Redactor = Callable[[str], str]

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){2,4}(?!\w)")


def luhn_ok(digits: str) -> bool:
    """True when ``digits`` passes the Luhn checksum used by payment cards."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class PIIRedactor:
    """Replace e-mails, phone numbers and card numbers with placeholders.

    Example:
        >>> PIIRedactor()("mail ada@example.com or call +44 20 7946 0958, card 4111 1111 1111 1111")
        'mail [EMAIL] or call [PHONE], card [CARD]'
    """

    def __init__(self, *, emails: bool = True, phones: bool = True, cards: bool = True) -> None:
        self.emails, self.phones, self.cards = emails, phones, cards

    def __call__(self, text: str) -> str:
        if self.emails:
            text = _EMAIL.sub("[EMAIL]", text)
        if self.cards:
            text = _CARD.sub(_card, text)
        if self.phones:
            text = _PHONE.sub(_phone, text)
        return text


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "[CARD]" if 13 <= len(digits) <= 19 and luhn_ok(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    # Dates (2024-05-01) and short codes are not phone numbers.
    return "[PHONE]" if len(digits) >= 9 else match.group()


def redact_message(message: Message, redactor: Redactor) -> Message:
    """The message with every text field passed through ``redactor``."""
    content: Any
    if isinstance(message.content, str):
        content = redactor(message.content)
    else:
        content = tuple(
            {**p, "text": redactor(p["text"])} if p.get("type") in TEXT_PART_TYPES else
            ({**p, "caption": redactor(p["caption"])} if isinstance(p.get("caption"), str) else p)
            for p in message.content
        )
    calls = tuple(replace(c, arguments=_redact_json(c.arguments, redactor)) for c in message.tool_calls)
    return replace(message, content=content, tool_calls=calls)


def _redact_json(arguments: str, redactor: Redactor) -> str:
    """Redact the string values of JSON arguments, keeping the JSON valid."""
    import json

    try:
        data = json.loads(arguments)
    except ValueError:
        return redactor(arguments)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return redactor(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return json.dumps(walk(data), ensure_ascii=False)
