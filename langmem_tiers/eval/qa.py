"""QA accuracy: answer each question from the delivered context with a chat model, grade it with an LLM judge.

``python -m langmem_tiers.eval ... --answer --judge`` (needs ``OPENAI_API_KEY``; any
OpenAI-compatible server through ``OPENAI_BASE_URL``). The answering model reads only what
the retriever delivered for the question (ours: ``context()``; a baseline: its top units at
the same total tokens), so QA accuracy compares memories, not models. The judge follows the
LoCoMo judge used by mem0, Zep and Letta: given question, gold answer and generated answer,
a label CORRECT or WRONG, asked for as JSON and read robustly (:func:`parse_judgement`).

A call that fails (after the client's retries and timeout), an empty answer and an
unreadable judgement are counted by reason, never fatal: a long paid run always finishes
and reports what it could not grade.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from langmem_tiers.errors import ConfigError
from langmem_tiers.openai_clients import OpenAIClients

log = logging.getLogger(__name__)

# The small model mem0's published LoCoMo figures used for both roles; --answer-model / --judge-model change it.
DEFAULT_ANSWER_MODEL: Final = "gpt-4o-mini"
DEFAULT_JUDGE_MODEL: Final = "gpt-4o-mini"
DEFAULT_TIMEOUT_S: Final = 60.0
DEFAULT_RETRIES: Final = 3  # the openai client's own retries (429, 5xx, timeouts, dropped connections)
ANSWER_MAX_TOKENS: Final = 200
JUDGE_MAX_TOKENS: Final = 200

DEFAULT_ANSWER_PROMPT: Final = """\
You answer a question about earlier conversations, using only the memories below.

Memories (what the memory system delivered for this question):
{context}

{date_line}Question: {question}

Answer in as few words as possible: a name, a date, a number or a short phrase. When a memory \
dates an event relative to when it was said ("last week", "next month"), give the actual date or \
period from the memory's date. If the memories do not hold the answer, say that you do not know."""

DEFAULT_JUDGE_PROMPT: Final = """\
Label a generated answer to a question as CORRECT or WRONG.

The question asks about something said in earlier conversations. You get the question, the \
gold (ground truth) answer, usually short, and the generated answer. Grade generously: a longer \
generated answer is CORRECT when it states the same thing as the gold answer or touches on the \
same topic (gold "a shell necklace", generated "I think you brought back a necklace made of \
shells" is CORRECT). For dates and times, it is CORRECT when it refers to the same date or period, \
whatever the format ("May 7th" and "7 May 2023" agree) or a relative reference that resolves to \
it. It is WRONG when it contradicts the gold answer, names something else, or says it does not know.

Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

Reply with JSON only: {{"reason": "<one sentence>", "label": "CORRECT" or "WRONG"}}."""

_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_judgement(text: str | None) -> bool | None:
    """``True`` for CORRECT, ``False`` for WRONG, ``None`` when the reply says neither or both.

    Reads a JSON object with a ``label`` key (bare, in a code fence or inside prose), else the
    one label word the reply holds in capitals; case is ignored inside the JSON label.

    Example:
        >>> [parse_judgement(t) for t in ['{"label": "CORRECT"}', '```json\\n{"label":"wrong"}\\n```',
        ...                               'Same city. CORRECT', 'CORRECT or WRONG?', '{"label": "maybe"}', None]]
        [True, False, True, None, None, None]
    """
    if not text or not text.strip():
        return None
    for candidate in _json_candidates(text):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("label"), str):
            label = data["label"].strip().upper()
            return {"CORRECT": True, "WRONG": False}.get(label)
    words = set(_LABEL.findall(text))
    if len(words) == 1:
        return words == {"CORRECT"}
    return None


def _json_candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        out.append(text[start:end + 1])
    out.append(text.strip())
    return out


@dataclass
class Usage:
    """What one role (answer or judge) spent: requests made (the client's own retries not counted),
    those that gave no usable reply by reason (a request error, an empty reply, an unreadable
    judgement), and the tokens the server reported."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "failed": sum(self.failed.values()), "failed_by_reason": dict(self.failed),
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass(frozen=True)
class QAOutcome:
    """One question: the model's answer and the judge's verdict (``None`` when not graded, see ``error``)."""

    answer: str | None
    correct: bool | None
    error: str | None = None


class QuestionAnswerer:
    """Answers questions from a delivered context and grades them, through the chat-completions API.

    Args:
        clients: the OpenAI clients (``OpenAIClients``: any compatible server through ``base_url``).
        answer_model: the model that answers from the context.
        judge_model: the model that grades; ``None`` answers without grading.
        answer_prompt / judge_prompt: templates with the fields of the defaults.
    """

    def __init__(self, clients: OpenAIClients, *, answer_model: str = DEFAULT_ANSWER_MODEL,
                 judge_model: str | None = DEFAULT_JUDGE_MODEL, answer_prompt: str = DEFAULT_ANSWER_PROMPT,
                 judge_prompt: str = DEFAULT_JUDGE_PROMPT) -> None:
        for name, model in (("answer_model", answer_model), ("judge_model", judge_model)):
            if model is not None and (not isinstance(model, str) or not model.strip()):
                raise ConfigError(f"{name} ({model!r}) must be a model name, e.g. {DEFAULT_ANSWER_MODEL}")
        self._clients = clients
        self.answer_model = answer_model
        self.judge_model = judge_model
        self.answer_prompt = answer_prompt
        self.judge_prompt = judge_prompt
        self.usage = {"answer": Usage(), "judge": Usage()}

    @classmethod
    def from_env(cls, *, judge: bool, answer_model: str = DEFAULT_ANSWER_MODEL,
                 judge_model: str = DEFAULT_JUDGE_MODEL, timeout: float = DEFAULT_TIMEOUT_S,
                 retries: int = DEFAULT_RETRIES, environ: Mapping[str, str] | None = None) -> QuestionAnswerer:
        """Built from ``OPENAI_API_KEY`` (required) and ``OPENAI_BASE_URL`` (optional)."""
        env = os.environ if environ is None else environ
        key = env.get("OPENAI_API_KEY", "").strip()
        if not key:
            raise ConfigError("--answer needs OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible "
                              "server): export it, or drop --answer/--judge for the offline metrics")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"llm timeout ({timeout!r}) must be a positive number of seconds")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"llm retries ({retries!r}) must be an integer >= 0")
        base_url = env.get("OPENAI_BASE_URL", "").strip() or None
        clients = OpenAIClients(api_key=key, base_url=base_url, timeout=float(timeout), max_retries=retries)
        return cls(clients, answer_model=answer_model, judge_model=judge_model if judge else None)

    def describe(self) -> dict[str, Any]:
        """The setup, for the result JSON (no key)."""
        url = urlsplit(str(self._clients.sync().base_url))
        host = url.hostname or ""
        netloc = f"{host}:{url.port}" if url.port else host  # never a user:password@ part
        return {"answer_model": self.answer_model, "judge_model": self.judge_model,
                "base_url": urlunsplit((url.scheme, netloc, url.path, "", ""))}

    def run(self, question: str, gold: str | None, context: str, date: str | None = None) -> QAOutcome:
        """Answer ``question`` from ``context``; grade it against ``gold`` when there is a judge."""
        prompt = self.answer_prompt.format(context=context.strip() or "(nothing)", question=question,
                                           date_line=f"Current date: {date}\n" if date else "")
        answer, error = self._complete("answer", self.answer_model, prompt, ANSWER_MAX_TOKENS, json_reply=False)
        if answer is None:
            return QAOutcome(None, None, f"answer: {error}")
        if self.judge_model is None:
            return QAOutcome(answer, None)
        if gold is None:
            return QAOutcome(answer, None, "no gold answer")
        reply, error = self._complete("judge", self.judge_model, self.judge_prompt.format(
            question=question, gold_answer=gold, generated_answer=answer), JUDGE_MAX_TOKENS, json_reply=True)
        if reply is None:
            return QAOutcome(answer, None, f"judge: {error}")
        verdict = parse_judgement(reply)
        if verdict is None:
            self.usage["judge"].failed["unreadable judgement"] += 1
            log.warning("unreadable judgement for %r: %r", question, reply[:200])
            return QAOutcome(answer, None, "judge: unreadable judgement")
        return QAOutcome(answer, verdict)

    def _complete(self, role: str, model: str, prompt: str, max_tokens: int,
                  json_reply: bool) -> tuple[str | None, str | None]:
        """The reply text, or ``(None, reason)``; the reason is counted in ``usage[role].failed``."""
        usage = self.usage[role]
        kwargs: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}],
                                  "temperature": 0.0, "max_tokens": max_tokens}
        if json_reply:
            kwargs["response_format"] = {"type": "json_object"}
        usage.calls += 1
        try:
            response = self._clients.sync().chat.completions.create(**kwargs)
            text = response.choices[0].message.content
            tokens = response.usage
        except Exception as e:  # one failed call (after the client's retries) must not end a long paid run
            reason = type(e).__name__
            usage.failed[reason] += 1
            log.warning("%s call failed: %s: %s", role, reason, str(e)[:200])
            return None, reason
        if tokens is not None:
            usage.prompt_tokens += int(getattr(tokens, "prompt_tokens", 0) or 0)
            usage.completion_tokens += int(getattr(tokens, "completion_tokens", 0) or 0)
        if not isinstance(text, str) or not text.strip():
            usage.failed["empty reply"] += 1
            return None, "empty reply"
        return text.strip(), None

    def close(self) -> None:
        self._clients.close()
