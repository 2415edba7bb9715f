"""Context assembly: one token budget shared by every tier. Pure, no I/O.

Priorities, highest first: the current user turn (always kept), pinned
memories, the session's working state (within ``working_tokens``), the rolling
summary, the profile (the user's current facts and preferences, best first,
within ``profile_tokens``), older window turns (newest first), recalled records
(best first, within ``recall_tokens``). When the budget is short the lowest
priority goes first, and every omission is reported with its reason.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, TypeVar

from langmem_tiers.config import MemoryConfig
from langmem_tiers.errors import ConfigError
from langmem_tiers.journal.base import Namespace
from langmem_tiers.memory_types.skills import track_record
from langmem_tiers.memory_types.working import WORKING_HEADER, WorkingLine
from langmem_tiers.messages import Message
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.semantic.profile import ProfileLine
from langmem_tiers.tokens import REPLY_PRIMING, TokenCounter
from langmem_tiers.window import split_turns

MEMORY_HEADER = "Memory of this conversation (from langmem-tiers):"
# The metadata entry (key, value) that marks the memory message; langmem_tiers.integration recognizes it.
MEMORY_MARK = ("langmem_tiers", "memory")
PINNED_HEADER = "Pinned facts:"
SUMMARY_HEADER = "Summary of earlier conversation:"
RECALL_HEADER = "Recalled from earlier conversations:"
PROFILE_HEADER = "What the user has told you about themselves (current; dated):"


@dataclass(frozen=True)
class TierTokens:
    """Tokens each tier takes in the assembled context (``total`` includes message framing)."""

    pinned: int
    summary: int
    recall: int
    window: int
    total: int
    budget: int
    profile: int = 0
    working: int = 0


@dataclass(frozen=True)
class Omission:
    """Something that did not make it into the context, and why."""

    tier: str
    reason: str
    tokens: int
    ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Context:
    """The messages to send, and an account of how the budget was spent.

    ``summary``, ``pinned`` and ``recalled`` are the parts of the memory message
    (the first message, marked ``metadata={"langmem_tiers": "memory"}``), for adapters
    that deliver them their own way.
    """

    messages: tuple[Message, ...]
    tokens: TierTokens
    left_out: tuple[Omission, ...]
    recalled: tuple[RecallHit, ...]
    summary: str
    truncated: tuple[int, ...] = ()
    pinned: tuple[str, ...] = ()
    profile: tuple[ProfileLine, ...] = ()
    working: tuple[WorkingLine, ...] = ()

    def to_openai(self) -> list[dict[str, Any]]:
        """The messages in the OpenAI chat-completions format."""
        out = []
        for m in self.messages:
            data: dict[str, Any] = {"role": m.role, "content": m.to_dict()["content"]}
            if m.name:
                data["name"] = m.name
            if m.tool_calls:
                data["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls
                ]
            if m.tool_call_id:
                data["tool_call_id"] = m.tool_call_id
            out.append(data)
        return out

    def explain(self) -> str:
        """A short human-readable account: tokens per tier and what was left out."""
        t = self.tokens
        lines = [
            (f"{t.total}/{t.budget} tokens: pinned {t.pinned}, working {t.working} ({len(self.working)} keys), "
             f"profile {t.profile} ({len(self.profile)} facts), "
             f"summary {t.summary}, recall {t.recall} ({len(self.recalled)} hits), window {t.window}")
        ]
        lines += [f"working: {w.text}" for w in self.working]
        lines += [f"profile: {line}" for p in self.profile for line in p.text.splitlines()]
        lines += [f"left out {o.tier} ({o.tokens} tokens): {o.reason}" for o in self.left_out]
        if self.truncated:
            lines.append(f"truncated to fit (whole in the journal): messages {list(self.truncated)}")
        return "\n".join(lines)


@dataclass(frozen=True)
class WindowMessage:
    """A window message with its token count, as :func:`assemble` takes the window."""

    message: Message
    tokens: int


def assemble(
    *,
    window: Sequence[WindowMessage],
    summary: str,
    pinned: Sequence[str],
    hits: Sequence[RecallHit],
    config: MemoryConfig,
    counter: TokenCounter,
    budget: int | None = None,
    omitted: Sequence[Omission] = (),
    session: Namespace | None = None,
    profile: Sequence[ProfileLine] = (),
    working: Sequence[WorkingLine] = (),
) -> Context:
    """Fit the tiers into ``budget`` (default ``config.context_tokens``).

    ``session`` is the namespace asking: hits from its other sessions are labelled as such.
    ``profile`` is the user's facts, best first (:func:`langmem_tiers.semantic.profile.profile_lines`);
    they are kept in that order within ``config.profile_tokens``. ``working`` is the session's
    working state, newest first, kept in that order within ``config.working_tokens``.
    """
    budget = config.context_tokens if budget is None else budget
    if budget <= REPLY_PRIMING:
        raise ConfigError(f"budget ({budget}) must be larger than the reply priming ({REPLY_PRIMING} tokens)")
    left_out = list(omitted)
    turns = _turns(window)
    current = turns[-1] if turns else []
    older = turns[:-1]
    current, truncated = _fit_current(current, budget - REPLY_PRIMING, config, counter)

    window_tokens = sum(w.tokens for t in older for w in t) + sum(w.tokens for w in current)
    state, dropped_state = _within_share(working, config.working_tokens, counter, "working")
    left_out += dropped_state
    facts, dropped_facts = _within_share(profile, config.profile_tokens, counter, "profile")
    left_out += dropped_facts
    # What the profile takes, not its whole share: two short facts leave the rest of it to recall.
    share = recall_share(config, budget, window_tokens, counter.count_text(summary) if summary else 0,
                         counter.count_text("\n".join(pinned)) if pinned else 0, _lines_tokens(facts, counter),
                         _lines_tokens(state, counter))
    hits, dropped, recalled = _hits_within_share(hits, session, share, counter,
                                                 exact=share <= config.recall_tokens)
    left_out += dropped
    pinned_lines, summary_text = list(pinned), summary

    def fitted(lines: Sequence[str]) -> tuple[Message | None, int]:
        """The memory message with these recall lines, and the request's tokens with it."""
        memory = _memory_message(pinned_lines, summary_text, lines, config, [p.text for p in facts],
                                 [w.text for w in state])
        # The window's messages come with their counts (counted once, when added): only the memory
        # message is counted here, instead of every message of the window on every call.
        return memory, (counter.count_message(memory) if memory else 0) + window_tokens + REPLY_PRIMING

    # Recall is the lowest priority: its worst hits leave first, while the rest stays whole.
    rendered: dict[int, tuple[list[str], Message | None, int]] = {}

    def fits(n: int) -> bool:
        lines = recalled if n == len(hits) else recall_lines(hits[:n], session)
        rendered[n] = (lines, *fitted(lines))
        return rendered[n][2] <= budget

    keep = longest_fitting(len(hits), fits)
    left_out += [Omission("recall", "over budget", counter.count_text(h.text), (h.record_id,)) for h in hits[keep:]]
    hits = hits[:keep]
    recalled, memory, total = rendered[keep]
    # Still over budget with no recall at all: the other tiers leave, the oldest turns, then the summary,
    # then pinned facts.
    while total > budget:
        if facts:
            fact = facts.pop()
            left_out.append(Omission("profile", "over budget", counter.count_text(fact.text), (fact.record_id,)))
        elif older:
            turn = older.pop(0)
            left_out.append(Omission("window", "over budget (oldest turn first)", sum(w.tokens for w in turn),
                                     tuple(w.message.id or 0 for w in turn)))
            window_tokens -= sum(w.tokens for w in turn)
        elif summary_text:
            left_out.append(Omission("summary", "over budget", counter.count_text(summary_text)))
            summary_text = ""
        elif state:
            entry = state.pop()
            left_out.append(Omission("working", "over budget", counter.count_text(entry.text), (entry.record_id,)))
        elif pinned_lines:
            line = pinned_lines.pop()
            left_out.append(Omission("pinned", "over budget", counter.count_text(line)))
        else:
            break  # only the current turn is left: over budget by the oversize policy "keep"
        memory, total = fitted(recalled)
    messages = ([memory] if memory else []) + [w.message for t in older for w in t] + [w.message for w in current]
    tokens = TierTokens(
        pinned=counter.count_text("\n".join(pinned_lines)) if pinned_lines else 0,
        summary=counter.count_text(summary_text) if summary_text else 0,
        recall=counter.count_text("\n".join(recalled)) if recalled else 0,
        window=window_tokens,
        total=total,
        budget=budget,
        profile=counter.count_text("\n".join(p.text for p in facts)) if facts else 0,
        working=_lines_tokens(state, counter),
    )
    return Context(tuple(messages), tokens, tuple(left_out), tuple(hits), summary_text, truncated,
                   tuple(pinned_lines), tuple(facts), tuple(state))


def _turns(window: Sequence[WindowMessage]) -> list[list[WindowMessage]]:
    from langmem_tiers.journal.base import WindowEntry

    by_id = {id(w): w for w in window}
    entries = [WindowEntry(id(w), w.message.role, w.tokens) for w in window]
    return [[by_id[e.id] for e in turn] for turn in split_turns(entries)]


def _fit_current(current: list[WindowMessage], room: int, config: MemoryConfig,
                 counter: TokenCounter) -> tuple[list[WindowMessage], tuple[int, ...]]:
    size = sum(w.tokens for w in current)
    if size <= room:
        return current, ()
    if config.oversize_policy == "error":
        raise ConfigError(
            f"the current turn has {size} tokens, more than the budget allows ({room}): raise context_tokens, "
            "or set oversize_policy='truncate' (the journal keeps the message whole)"
        )
    if config.oversize_policy == "keep":
        return current, ()
    fitted, truncated = list(current), []
    # Truncate the largest text messages first until the turn fits.
    for index in sorted(range(len(fitted)), key=lambda i: -fitted[i].tokens):
        over = sum(w.tokens for w in fitted) - room
        if over <= 0:
            break
        w = fitted[index]
        if not isinstance(w.message.content, str) or not w.message.content:
            continue
        keep = max(w.tokens - over, 0)
        new = replace(w.message, content=_truncate_text(w.message, keep, counter))
        fitted[index] = WindowMessage(new, counter.count_message(new))
        truncated.append(w.message.id or 0)
    size = sum(w.tokens for w in fitted)
    if size > room:
        raise ConfigError(
            f"the current turn needs {size} tokens even after truncating its texts, more than the budget "
            f"allows ({room}): raise context_tokens or the budget passed to context()"
        )
    return fitted, tuple(truncated)


def _truncate_text(message: Message, target_tokens: int, counter: TokenCounter) -> str:
    text = str(message.content)
    marker = f"\n[... truncated to fit the context; message {message.id} is whole in the journal ...]\n"
    lo, hi = 0, len(text)
    best = marker
    while lo <= hi:  # the longest head+tail (half each) whose message fits
        mid = (lo + hi) // 2
        candidate = text[: mid // 2] + marker + text[len(text) - mid // 2:] if mid else marker
        if counter.count_message(replace(message, content=candidate)) <= target_tokens:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


MEMORY_FRAMING_TOKENS = 40  # headers and framing of the memory message, reserved before recall fills the rest


def recall_share(config: MemoryConfig, budget: int, window_tokens: int, summary_tokens: int,
                 pinned_tokens: int, profile_tokens: int, working_tokens: int = 0) -> int:
    """Recall's share of the budget: ``recall_tokens``, or more when the other tiers leave budget unused.

    With ``config.recall_uses_spare`` (default), what the window, summary, pinned facts, working
    state and profile (``working_tokens``, ``profile_tokens``: what they take) leave of the one
    budget goes to recall too: a fresh session (empty window and summary) asking about last week
    gets the whole budget for what it recalls, not just ``recall_tokens``.
    """
    if not config.recall_uses_spare:
        return config.recall_tokens
    spare = (budget - REPLY_PRIMING - MEMORY_FRAMING_TOKENS - window_tokens - summary_tokens - pinned_tokens
             - working_tokens - profile_tokens)
    return max(config.recall_tokens, spare)


def _hits_within_share(hits: Sequence[RecallHit], session: Namespace | None, share: int,
                       counter: TokenCounter, *, exact: bool) -> tuple[list[RecallHit], list[Omission], list[str]]:
    """The hits that fit ``share`` in rank order, and their lines (:func:`recall_lines`).

    The fill estimates each hit's cost (a turn whose conversation and day already have a kept turn costs
    only its text: it is shown under that turn's label). With ``exact`` (the share is recall's own cap,
    ``recall_tokens``) the lines it picked are then counted, and the worst kept hits leave while they pass
    the share (the joins and "..." lines the estimate leaves out). A larger share is the budget's spare,
    which :func:`assemble`'s fit of the whole budget already holds exactly: counting the section there too
    would tokenize the largest part of the context a third time.
    """
    kept, dropped, used = [], [], 0
    labelled: set[tuple[Namespace, str]] = set()
    for h in hits:
        key = _group_key(h, session)
        cost = counter.count_text(h.text) + 1 if key in labelled else counter.count_text(_hit_line(h, session))
        if used + cost <= share:
            kept.append(h)
            used += cost
            if key is not None:
                labelled.add(key)
        else:
            dropped.append(Omission("recall", f"over the recall share ({share} tokens)", cost, (h.record_id,)))
    if not exact:
        return kept, dropped, recall_lines(kept, session)
    rendered: dict[int, list[str]] = {}

    def fits(n: int) -> bool:
        rendered[n] = recall_lines(kept[:n], session)
        return counter.count_text("\n".join(rendered[n])) <= share

    keep = longest_fitting(len(kept), fits)
    dropped += [Omission("recall", f"over the recall share ({share} tokens)", counter.count_text(h.text),
                         (h.record_id,)) for h in kept[keep:]]
    return kept[:keep], dropped, rendered[keep]


def longest_fitting(n: int, fits: Callable[[int], bool]) -> int:
    """The largest ``m <= n`` for which ``fits(m)`` (the best ``m`` hits fit), or 0 when none does.

    What ``m`` hits take grows with ``m``, and a fill by estimate is rarely more than a hit or two over:
    ``n`` is tried first (one rendering when everything fits), then ``n - 1``, ``n - 3``, ``n - 7``...
    and the last gap halved, so a large overshoot costs a few renderings, not one per hit dropped.
    """
    if fits(n) or n == 0:
        return n
    over, step = n, 1  # over: a count that does not fit
    while True:
        under = max(over - step, 0)
        if fits(under):
            break
        if under == 0:
            return 0
        over, step = under, 2 * step
    while over - under > 1:
        mid = (under + over) // 2
        if fits(mid):
            under = mid
        else:
            over = mid
    return under


def _group_key(hit: RecallHit, session: Namespace | None) -> tuple[Namespace, str] | None:
    """Turns of one conversation with one label (day, and "another conversation") share one; other
    kinds (facts, memories, skills) keep a line each."""
    return (hit.namespace, _hit_label(hit, session)) if hit.kind == "turn" else None


def recall_lines(hits: Sequence[RecallHit], session: Namespace | None = None) -> list[str]:
    """The recall section's lines for ``hits`` (best first), as ``context()`` writes them.

    Each hit is dated (with the weekday); a turn from another conversation than ``session`` is marked so,
    and a superseded memory says since when. Turns of one conversation and day share one line under one
    label, in the order they were said ("..." where turns between them are not shown): the label costs its
    tokens once, and the model reads the exchange in order. Groups, and the hits of other kinds (facts,
    memories, skills: a line each), keep the order of their best hit.
    """
    groups: dict[object, list[RecallHit]] = {}
    for h in hits:
        groups.setdefault(_group_key(h, session) or h.record_id, []).append(h)
    lines = []
    for members in groups.values():
        members = sorted(members, key=lambda h: (h.created_at, h.record_id))
        lines.append(group_line(_hit_line(members[0], session), [
            (h.text, bool(before.message_ids and h.message_ids and min(h.message_ids) == max(before.message_ids) + 1))
            for before, h in pairwise(members)]))
    return lines


def group_line(first: str, rest: Sequence[tuple[str, bool]]) -> str:
    """One group's line: its first member's labelled line, then each later member's text, in the order
    they were said, after a ``...`` line where it does not follow the one before (what lies between is
    not shown). The evaluation's baselines write their groups with it too (``eval.delivery``)."""
    return "\n".join([first, *(text if follows else "...\n" + text for text, follows in rest)])


_Line = TypeVar("_Line", ProfileLine, WorkingLine)


def _within_share(lines: Sequence[_Line], share: int, counter: TokenCounter,
                  tier: str) -> tuple[list[_Line], list[Omission]]:
    """The lines that fit ``share`` in their order (a line that does not fit is left out, later
    shorter ones may still fit), and an omission per line left out."""
    kept: list[_Line] = []
    dropped: list[Omission] = []
    used = 0
    for line in lines:
        cost = counter.count_text(line.text)
        if used + cost <= share:
            kept.append(line)
            used += cost
        else:
            dropped.append(Omission(tier, f"over the {tier} share ({share} tokens)", cost, (line.record_id,)))
    return kept, dropped


def share_taken(lines: Sequence[_Line], share: int, counter: TokenCounter) -> int:
    """The tokens that the lines :func:`assemble` keeps within ``share`` take (what the working state or
    the profile leave of the budget is what recall may fill: ``recall_k`` sizes its search by it)."""
    return _lines_tokens(_within_share(lines, share, counter, "")[0], counter)


def _lines_tokens(lines: Sequence[WorkingLine] | Sequence[ProfileLine], counter: TokenCounter) -> int:
    return counter.count_text("\n".join(w.text for w in lines)) if lines else 0


def _hit_line(hit: RecallHit, session: Namespace | None = None) -> str:
    """One recalled memory, dated (with the weekday) and, when it comes from another of the
    user's conversations, labelled so: the model can tell "last Tuesday, in another
    conversation" from "earlier today"."""
    label = _hit_label(hit, session)
    label = f"[{label}] " if label else ""
    if hit.kind != "turn":
        label += f"({hit.kind}) "
    record = track_record(hit.metadata) if hit.kind == "skill" and hit.metadata else ""
    return f"- {label}{hit.text}" + (f" [{record}]" if record else "")


def _hit_label(hit: RecallHit, session: Namespace | None) -> str:
    """What goes between the brackets of a hit's line: its day, another conversation, superseded since."""
    when = dt.datetime.fromtimestamp(hit.created_at, dt.timezone.utc).strftime("%a %Y-%m-%d") \
        if hit.created_at else ""
    if session is not None and hit.namespace != session and hit.kind == "turn":
        when = f"{when}, another conversation" if when else "another conversation"
    valid_to = hit.metadata.get("valid_to") if hit.metadata else None
    if isinstance(valid_to, int | float):
        # A superseded memory: the model must not take it for the current value.
        until = dt.datetime.fromtimestamp(valid_to, dt.timezone.utc).strftime("%Y-%m-%d")
        when = f"{when}, no longer true since {until}" if when else f"no longer true since {until}"
    return when


def _memory_message(pinned: Sequence[str], summary: str, hit_lines: Sequence[str],
                    config: MemoryConfig, profile: Sequence[str] = (), working: Sequence[str] = ()) -> Message | None:
    sections = []
    if pinned:
        sections.append(PINNED_HEADER + "\n" + "\n".join(f"- {p}" for p in pinned))
    if working:
        sections.append(WORKING_HEADER + "\n" + "\n".join(working))
    if profile:
        sections.append(PROFILE_HEADER + "\n" + "\n".join(profile))
    if summary:
        sections.append(SUMMARY_HEADER + "\n" + summary)
    if hit_lines:
        sections.append(RECALL_HEADER + "\n" + "\n".join(hit_lines))
    if not sections:
        return None
    return Message(config.summary_role, MEMORY_HEADER + "\n\n" + "\n\n".join(sections),
                   metadata=dict([MEMORY_MARK]))
