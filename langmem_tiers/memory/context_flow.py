"""What ``context()`` gathers before :func:`langmem_tiers.context.assemble` budgets it: the window
snapshot, pinned memories, the user's typed memories (profile, skills, working state), recall hits
sized to the budget the other tiers leave, and superseded memories labelled as past."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langmem_tiers.context import Context, Omission, WindowMessage, assemble, recall_share, share_taken
from langmem_tiers.errors import ConfigError
from langmem_tiers.flow import Blocking, Flow
from langmem_tiers.journal.base import Record, Scope, SessionState, WindowEntry
from langmem_tiers.memory import reads
from langmem_tiers.memory_types import expiry, fields, skills
from langmem_tiers.memory_types.working import WorkingLine, current_items, working_lines
from langmem_tiers.recall.engine import Ranked, SearchFilters
from langmem_tiers.recall.hits import RecallHit
from langmem_tiers.recall.request import RequestMemo, scope_listing
from langmem_tiers.semantic.profile import PROFILE_KINDS, ProfileLine, profile_lines, wants_history
from langmem_tiers.text import query_words
from langmem_tiers.tokens import TokenCounter, message_framing
from langmem_tiers.window import split_turns

if TYPE_CHECKING:
    from langmem_tiers.memory.tiered import TieredMemory

MAX_RECALL_K = 64  # hits asked for at most, however much spare budget recall may fill
MIN_HIT_TOKENS = 32  # a short turn (a question and a short reply): sizes the hits asked for a larger share
HIT_SIZE_TURNS = 4  # complete turns the window must hold to size a recalled turn by them
# Unkeyed profile memories a context() reads (typed_records): the question's best keyword matches, and the
# newest when unrelated ones may fill the profile. Its share (profile_tokens, 300 by default) holds a dozen
# or so lines; more only costs a longer read.
PROFILE_MATCHES = 64
PROFILE_NEWEST = 200


def context_flow(m: TieredMemory, query: str | None, budget: int | None) -> Flow[Context]:
    """``context()``: gather every tier, then assemble them within the budget."""
    if query is not None and not isinstance(query, str):
        raise ConfigError(f"query must be a string or None; got {type(query).__name__}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise ConfigError(f"budget must be an integer number of tokens or None; got {budget!r}")
    state, window, pending = yield Blocking(lambda: reads.snapshot(m))
    omitted = []
    if pending:
        reason = "evicted, waiting for the summarizer"
        if state.last_error:
            reason += f" (last error: {state.last_error})"
        omitted.append(Omission("pending", reason, 0, ()))
    hits: list[RecallHit] = []
    ranked: list[Ranked] = []  # the search's candidates, best first (a fact's turn is picked from them)
    pinned: list[str] = []
    # The user's namespaces, read once for all of this call's reads.
    memo = RequestMemo()
    now = m.clock()  # expiry is judged once per call (langmem_tiers.memory_types.expiry)
    if m.recall is not None and query is None:
        query = next((w.message.text for w in reversed(window) if w.message.role == "user"), None)
    # The user's memories that the profile, skills and working state can deliver.
    typed = expiry.live((yield Blocking(lambda: typed_records(m, query, memo))), now) if typed_kinds(m) else []
    working = working_lines(current_items(typed, m.namespace, now)) if m.config.working_tokens else []
    profile = []
    if m.config.profile_tokens:
        profile = profile_lines([r for r in typed if r.kind in PROFILE_KINDS], query, m.config.profile_related_only)
    if m.recall is not None:
        recall = m.recall
        # Pinned memories belong to the user: they appear in every one of the user's sessions.
        # Without a user id, every scope narrows to this session (Scope.matches).
        pinned_scope = Scope("user", m.namespace)
        pinned = [r.text for r in expiry.live((yield Blocking(lambda: recall.pinned(pinned_scope, memo))), now)]
        if query and m.config.recall_k and m.config.recall_tokens:
            exclude = frozenset(w.message.id for w in window if w.message.id is not None)
            k = recall_k(m, budget, state, window, pinned, working, profile)
            ranked = yield from recall.ranked_flow(query, k, Scope(m.config.recall_scope, m.namespace),
                                                   SearchFilters(exclude_message_ids=exclude, now=now), memo=memo)
            hits = [h for h in recall.select(ranked, k) if not h.pinned]
    if hits:
        hits = reads.label_past(hits)
        hits = recall_beside_profile(m, hits, profile, query, ranked)
    if m.config.skills_k and query:
        hits = skills.lead_with_skills(hits, typed, query, m.config.skills_k)
    context = assemble(window=window, summary=state.summary, pinned=pinned, hits=hits, config=m.config,
                       counter=m.counter, budget=budget, omitted=omitted, session=m.namespace,
                       profile=profile, working=working)
    m.metrics.observe_context(context)
    return context


def typed_kinds(m: TieredMemory) -> list[str]:
    """The kinds of the user's memories that the configured tiers deliver (none when every one is off)."""
    cfg = m.config
    return [*(PROFILE_KINDS if cfg.profile_tokens else ()), *((fields.SKILL_KIND,) if cfg.skills_k else ()),
            *((fields.WORKING_KIND,) if cfg.working_tokens else ())]


def typed_records(m: TieredMemory, query: str | None, memo: RequestMemo | None = None) -> list[Record]:
    """The user's memories that this call's profile, skills and working state can deliver.

    Working items: this session's (they never leave it). Skills: all of the user's (few). Of the profile's
    kinds: every keyed memory (a user holds few keys: the values the profile is about, and their history)
    and, of the unkeyed ones, the question's best keyword matches (``PROFILE_MATCHES``: with
    ``profile_related_only``, the profile delivers only memories sharing a word with the question), plus the
    newest ``PROFILE_NEWEST`` when unrelated ones may fill it (no question, or ``profile_related_only``
    off). A long history's other memories are never read (the offline extractor kept a fact from about one
    turn in six of ``benchmarks/add_path.py``'s chat lines, and reading them all made ``context()`` grow
    with the history there); recall reaches them.
    """
    kinds = typed_kinds(m)
    profile_kinds = [k for k in kinds if k in PROFILE_KINDS]
    records = m.journal.scoped_records([m._ns_id], [fields.WORKING_KIND]) if fields.WORKING_KIND in kinds else []
    if fields.SKILL_KIND in kinds:
        records += reads.user_records(m, [fields.SKILL_KIND], memo)  # probes only the sessions holding one
    if profile_kinds:
        ns_ids = reads.user_ns_ids(m, memo, profile_kinds)
        question = query if query and query_words(query) else None
        # The listing user_ns_ids read (the memo holds it): a held index needs no read of its own.
        versions = scope_listing(m.journal, Scope("user", m.namespace), memo).versions if memo is not None else None
        matches = [h.record_id for h in m.journal.keyword_search(question, ns_ids, PROFILE_MATCHES, profile_kinds,
                                                                 versions)] if question else []
        # The keyed ones are read only where the listing says a keyed record is (ScopeListing.keyed): a user
        # of 10,000 sessions that each hold an unkeyed fact cost 10,000 probes of records_key before.
        profile = m.journal.scoped_records(reads.user_ns_ids(m, memo, profile_kinds, keyed_only=True),
                                           profile_kinds, unkeyed=matches)
        if question is None or not m.config.profile_related_only:
            read = {r.id for r in profile}
            profile += [r for r in reads.newest_unkeyed(m, ns_ids, profile_kinds, PROFILE_NEWEST, memo)
                        if r.id not in read]
        records += profile
    return records


def recall_k(m: TieredMemory, budget: int | None, state: SessionState, window: Sequence[WindowMessage],
             pinned: Sequence[str], working: Sequence[WorkingLine] = (), profile: Sequence[ProfileLine] = ()) -> int:
    """Hits to ask for: ``recall_k``, scaled up when recall may use budget the other tiers leave (what
    :func:`~langmem_tiers.context.assemble` will give the working state and the profile is known here)."""
    cfg = m.config
    share = recall_share(cfg, cfg.context_tokens if budget is None else budget, sum(w.tokens for w in window),
                         state.summary_tokens, m.counter.count_text("\n".join(pinned)) if pinned else 0,
                         share_taken(profile, cfg.profile_tokens, m.counter),
                         share_taken(working, cfg.working_tokens, m.counter))
    if share <= cfg.recall_tokens:
        return cfg.recall_k
    # Enough hits to fill the larger share; the assembly cuts by tokens.
    return min(max(cfg.recall_k, math.ceil(share / hit_tokens(window, m.counter))), MAX_RECALL_K)


def hit_tokens(window: Sequence[WindowMessage], counter: TokenCounter) -> int:
    """The tokens a recalled turn is expected to take, which sizes the hits recall is asked for.

    One conversation's turns are alike in size, so the window's complete turns (all but the current)
    size the turns recall finds: the shorter quartile of their texts' tokens (a recalled turn is its
    messages' texts: the window's counts, kept since each add, less each message's framing), so that recall rather
    gets a few hits too many than leaves the share unfilled. Never below ``MIN_HIT_TOKENS``; that while
    the window holds fewer than ``HIT_SIZE_TURNS`` turns to judge by (a fresh session: recall is asked
    the most). Each hit asked makes every rank list read ``recall_depth`` candidates more, so asking for
    62 hits where 27 fit read, fused and selected twice the candidates it needed (BENCHMARKS.md, issue 15).
    """
    count = functools.cache(counter.count_text)  # the roles repeat: each is counted once per call
    turns = split_turns([WindowEntry(i, w.message.role, w.tokens - message_framing(w.message, count))
                         for i, w in enumerate(window)])
    sizes = sorted(sum(e.tokens for e in turn) for turn in turns[:-1])
    if len(sizes) < HIT_SIZE_TURNS:
        return MIN_HIT_TOKENS
    return max(MIN_HIT_TOKENS, sizes[len(sizes) // 4])


def recall_beside_profile(m: TieredMemory, hits: list[RecallHit], profile: Sequence[ProfileLine],
                          query: str | None, ranked: Sequence[Ranked]) -> list[RecallHit]:
    """The recall hits to deliver beside the profile.

    A current fact the profile shows is not repeated, and a superseded memory is recalled only
    when the query asks about the past (:func:`~langmem_tiers.semantic.profile.wants_history`).
    The recall engine keeps one hit per turn, so a fact extracted from a turn may have taken
    that turn's place: then the turn is recalled instead, in the fact's place, so the model still
    sees the conversation the fact came from. It is picked from the search's own candidates
    (``ranked``: each ranked list reached well past the hits), not searched for again.
    """
    shown = {p.record_id for p in profile}
    history = wants_history(query)
    kept = [h for h in hits if h.record_id not in shown and (history or "valid_to" not in h.metadata)]
    covered = {i for h in kept for i in h.message_ids}
    missing = {i for h in hits if h.record_id in shown for i in h.message_ids} - covered
    if not missing or m.recall is None:
        return kept
    have = {h.record_id for h in kept}
    back = m.recall.select([(r, parts) for r, parts in ranked if r.kind == "turn" and r.id not in have
                            and not missing.isdisjoint(r.message_ids)], len(hits))
    # In the place of the fact they stand for: the engine's order is the ranking.
    out: list[RecallHit] = []
    for h in hits:
        if h.record_id in have:
            out.append(h)
        elif h.record_id in shown:
            taken = {o.record_id for o in out}
            out += [t for t in back if set(t.message_ids) & set(h.message_ids) and t.record_id not in taken]
    return out[:len(hits)]  # never more hits than the engine gave
