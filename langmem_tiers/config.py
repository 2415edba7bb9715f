"""Memory configuration: one frozen dataclass, validated when built."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from langmem_tiers.errors import ConfigError
from langmem_tiers.journal.base import DEFAULT_SUMMARY_HISTORY
from langmem_tiers.recall.fusion import FusionParams
from langmem_tiers.recall.options import RecallOptions

OversizePolicy = Literal["truncate", "keep", "error"]
RecallUnit = Literal["turn", "message"]
RecallScope = Literal["session", "user", "agent"]
SummaryRole = Literal["system", "user", "assistant"]
EmbeddedVectors = Literal["chroma", "sqlite"]


@dataclass(frozen=True)
class MemoryConfig:
    """Budgets and policies of one memory. Every rule is checked at construction.

    Args:
        model: chat model whose tokenizer counts tokens (``gpt-4o*``/``gpt-4.1``/``o*``
            use o200k_base, others cl100k_base); ``None`` means cl100k_base.
        encoding: force a tiktoken encoding, overriding ``model``.
        context_tokens: the whole budget ``context()`` fills (pinned + summary + recall + window).
        window_tokens: high-water mark of the window; crossing it evicts whole turns.
        window_low_ratio: eviction goes down to ``window_tokens * window_low_ratio``, so
            evicted turns reach the summarizer in batches instead of one per message.
        summary_tokens: hard cap of the rolling summary.
        recall_tokens: share of the budget for recalled episodes and memories.
        recall_k: how many recall hits ``context()`` asks for (scaled up with the share when
            ``recall_uses_spare`` gives recall more than ``recall_tokens``).
        recall_uses_spare: recall may also fill what the window, summary, pinned facts and
            profile leave of ``context_tokens`` (a fresh session's empty window), so the context
            uses the budget it was given; ``False`` keeps recall within ``recall_tokens``.
        summary_role: role of the message that carries the summary.
        summary_input_tokens: most tokens of evicted turns sent in one summarizer call.
        summary_history: how many saved versions of the rolling summary the journal keeps per
            session (newest first: :meth:`TieredMemory.summary_history`, the inspector's history);
            ``0`` keeps none. Erasing turns deletes every version that folded them and re-folds
            from the newest remaining one, so a longer history spares summarizer calls then.
        summary_retry_base_s / summary_retry_max_s: backoff after a summarizer failure.
        background_summary: run summaries on a worker thread so ``add()`` never waits.
        background_index: embed new recall records on a background thread (default), so neither
            ``add()`` nor a query waits for the embedder; a query still finds rows not embedded
            yet (keyword search, and an exact vector search over its scope's pending rows).
            ``False`` embeds them inside ``add()`` instead (deterministic scripts).
        oversize_policy: what ``context()`` does with a current turn larger than the window:
            ``truncate`` its longest texts (the journal keeps them whole), ``keep`` it over
            budget, or raise (``error``).
        max_message_chars: larger messages are refused with InvalidMessageError.
        index_batch_size: outbox rows embedded and written per batch.
        index_lease_s: how long an indexer holds the rows it claimed; rows of a replica that died
            are taken over by another after this. Keep it well above one batch's embedding time.
        recall_scope: where ``context()`` recalls from: ``"user"`` (default: every session
            of this user), ``"agent"`` (this user's sessions with this agent) or ``"session"``.
            Never another user's. A memory opened without a ``user_id`` recalls only its own
            session whatever this says.
        recall_unit: what one recall record holds: a whole evicted ``turn`` (the user
            message with the replies and tool results after it; default) or one ``message``.
        profile_tokens: share of the budget for the profile: the user's current facts and
            preferences (``remember()``ed and extracted), dated, most relevant to the query
            first. ``0`` turns the profile off. Within ``context_tokens``: when the budget is
            short the profile goes after recall and before the summary.
        profile_related_only: with a query, deliver only the profile's facts that share a word
            with it (or its key's question words: "where" finds ``location``), so facts unrelated to
            the question leave their tokens to recall; without a query, every fact by importance.
            On by default (chosen by issue 19's ablation rule, BENCHMARKS.md); ``False`` fills the
            share with unrelated facts too (an always-on persona). Every keyed fact is considered;
            of the unkeyed ones (most of what the offline extractor keeps), the question's best
            keyword matches and, to fill the share, the newest few hundred
            (``context_flow.PROFILE_NEWEST``): a long history's older facts reach the model through recall.
        extract_memories: fold extraction into the summary call: the summarizer returns the
            user's facts and preferences with the summary (no extra call; offline, the
            extractive summarizer's detector does it), stored as keyed, superseding memories.
        working_tokens: share of the budget for the session's working state (``memory.working``
            entries, newest first); ``0`` leaves it out of ``context()``. When the budget is short it
            goes after the summary and before pinned memories.
        skills_k: how many of the user's skills that apply to the query open the recalled
            section of ``context()`` (ranked as :mod:`langmem_tiers.memory_types.skills` says);
            ``0`` leaves skills to ordinary recall.
        recall_salient_weight: query analysis: RRF weight of a keyword search over just the query's
            names, numbers and quoted words, fused with the keyword and vector rankings (``0``: off).
        recall_time_boost: a record made inside the time window the query names ("yesterday",
            "last week", "in May 2023", "3 days ago", judged against the memory's clock) scores
            ``1 + recall_time_boost`` times higher (``0``: off).
        recall_when_boost: for a question that asks when, a record whose text says when (a date, a
            weekday, "two weeks ago") scores ``1 + recall_when_boost`` times higher (``0``: off).
        recall_session_weight: two-stage retrieval for user and agent scope: the
            ``recall_session_top`` sessions of the best first-stage candidates are searched again
            and those rankings fused with this RRF weight (``0``: off).
        recall_session_top: how many sessions that second stage searches.
        recall_feedback_weight: pseudo-relevance feedback: RRF weight of a second keyword search over
            the query plus the words the best first-round hits share (0: off).
        recall_feedback_docs: how many first-round hits feed it.
        recall_neighbor_weight: RRF weight of a rank list of the turns just before and after the best
            first-round turns, each in its session (0: off).
        recall_neighbor_docs: how many first-round hits have their neighbors ranked; those hits keep
            their places at the top, so a search for that many hits or fewer is not changed by it.
        recall_diversity: maximal marginal relevance among the best candidates: how much a candidate's
            similarity to a better one placed before it counts against it (0: off).
        recall_depth: how deep the keyword and vector rankings reach per hit asked for (at least 50
            candidates each); every candidate is read and fused, so this sets most of the cost of
            ``context()``'s deep search (it asks for up to 64 hits when recall may fill spare budget).
            These act when a query runs (see :mod:`langmem_tiers.recall.options`); their
            defaults are what the ablations of BENCHMARKS.md chose on held-apart data (issue 19):
            the time window and "when" boosts and the neighbor turns on, the names keyword ranking,
            the second stage and the feedback round off (each lowered recall@10 or the context's
            evidence on the tuning half).
        recall_rrf_k: the reciprocal rank fusion's damping constant: a candidate at rank ``r`` of a
            list adds ``weight / (recall_rrf_k + r)`` (20: chosen on held-apart data, see
            :class:`~langmem_tiers.recall.fusion.FusionParams`; smaller favours the first few ranks of
            each list).
        recall_keyword_weight: the RRF weight of the keyword (bm25) ranking.
        recall_vector_weight: the RRF weight of the vector ranking. These three also act when a query
            runs (:meth:`langmem_tiers.recall.fusion.FusionParams.from_config`).
        vector_cache_mb: the byte bound, in MiB, of this process's in-process vector indexes (one per
            recalled scope: exact float32 up to 20k vectors, int8 HNSW beyond; see
            :mod:`langmem_tiers.recall.scope_vectors`), all scopes together, least recently used out
            first. A scope that alone would exceed it is answered by the vector store's filtered query instead.
            The default (640) holds one million 384-d vectors as int8 HNSW (about 0.6 KB each), so a
            user with a million stored messages is searched in memory; lower it on a small machine.
        keyword_cache_mb: PostgreSQL only: the byte bound, in MiB, of this process's held keyword postings
            (a scope of more than 20k records that a search found over the keyword budget is ranked in the
            process, not by the server's statement; see :mod:`langmem_tiers.journal.postgres_postings`), all
            scopes together, least recently used out first. ``0`` keeps every search on the statement. SQLite
            ignores it (its FTS5 index is searched in the process anyway).
        embedded_vectors: where an embedded folder keeps its vectors: ``"chroma"`` (embedded Chroma,
            which holds its whole float32 index of the folder in this process, about 2 KB a vector)
            or ``"sqlite"`` (one SQLite file on disk, searched through the in-process indexes that
            ``vector_cache_mb`` bounds; see :mod:`langmem_tiers.recall.sqlite_vectors`). ``None``
            (default): whichever the folder already holds, Chroma for a new folder. A folder keeps
            its choice: asking for the other one is refused until its vectors are removed. Not used
            with ``chroma=`` (a server or client).
        expiry_sweep_s: the periodic sweep erases a user's expired memories at the first write
            after this many seconds since the last sweep (``0``: only ``cleanup()`` erases them;
            they are filtered out either way). See :mod:`langmem_tiers.memory_types.expiry`.
    """

    model: str | None = None
    encoding: str | None = None
    context_tokens: int = 4000
    window_tokens: int = 2000
    window_low_ratio: float = 0.6
    summary_tokens: int = 400
    recall_tokens: int = 800
    recall_k: int = 6
    recall_uses_spare: bool = True
    summary_role: SummaryRole = "system"
    summary_input_tokens: int = 6000
    summary_history: int = DEFAULT_SUMMARY_HISTORY
    summary_retry_base_s: float = 2.0
    summary_retry_max_s: float = 300.0
    background_summary: bool = False
    background_index: bool = True
    oversize_policy: OversizePolicy = "truncate"
    max_message_chars: int = 1_000_000
    index_batch_size: int = 64
    index_lease_s: float = 120.0
    recall_unit: RecallUnit = "turn"
    recall_scope: RecallScope = "user"
    profile_tokens: int = 300
    profile_related_only: bool = True
    extract_memories: bool = True
    working_tokens: int = 200
    skills_k: int = 2
    expiry_sweep_s: float = 300.0
    recall_salient_weight: float = 0.0
    recall_time_boost: float = 1.0
    recall_when_boost: float = 0.5
    recall_session_weight: float = 0.0
    recall_session_top: int = 3
    recall_feedback_weight: float = 0.0
    recall_feedback_docs: int = 3
    recall_neighbor_weight: float = 0.5
    recall_neighbor_docs: int = 5
    recall_diversity: float = 0.0
    recall_depth: int = 4
    recall_rrf_k: int = FusionParams.rrf_k
    recall_keyword_weight: float = FusionParams.keyword_weight
    recall_vector_weight: float = FusionParams.vector_weight
    vector_cache_mb: int = 640
    keyword_cache_mb: int = 256
    embedded_vectors: EmbeddedVectors | None = None

    def __post_init__(self) -> None:
        for name in ("context_tokens", "window_tokens", "summary_tokens", "summary_input_tokens",
                     "max_message_chars", "index_batch_size", "vector_cache_mb"):
            _positive(name, getattr(self, name))
        for name in ("recall_tokens", "recall_k", "profile_tokens", "working_tokens", "skills_k", "summary_history",
                     "keyword_cache_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} ({value!r}) must be an integer >= 0")
        if isinstance(self.index_lease_s, bool) or not isinstance(self.index_lease_s, (int, float)) \
                or not math.isfinite(self.index_lease_s) or self.index_lease_s <= 0:
            raise ConfigError(f"index_lease_s ({self.index_lease_s!r}) must be a positive number of seconds")
        for name in ("window_low_ratio", "summary_retry_base_s", "summary_retry_max_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                rule = " between 0 and 1 (exclusive)" if name == "window_low_ratio" else ""
                raise ConfigError(f"{name} ({value!r}) must be a finite number{rule}")
        if not 0.0 < self.window_low_ratio < 1.0:
            raise ConfigError(
                f"window_low_ratio ({self.window_low_ratio}) must be between 0 and 1 (exclusive): "
                "0.6 evicts down to 60% of window_tokens"
            )
        if self.window_tokens > self.context_tokens:
            raise ConfigError(
                f"window_tokens ({self.window_tokens}) must not exceed context_tokens "
                f"({self.context_tokens}): lower window_tokens or raise context_tokens"
            )
        if self.summary_tokens >= self.window_tokens:
            raise ConfigError(
                f"summary_tokens ({self.summary_tokens}) must be smaller than window_tokens "
                f"({self.window_tokens}): lower summary_tokens or raise window_tokens"
            )
        if self.window_tokens + self.summary_tokens + self.recall_tokens > self.context_tokens:
            raise ConfigError(
                f"window_tokens + summary_tokens + recall_tokens ({self.window_tokens} + "
                f"{self.summary_tokens} + {self.recall_tokens}) exceed context_tokens "
                f"({self.context_tokens}): raise context_tokens or lower one of the shares"
            )
        if self.profile_tokens >= self.context_tokens:
            raise ConfigError(
                f"profile_tokens ({self.profile_tokens}) must be smaller than context_tokens "
                f"({self.context_tokens}): lower profile_tokens (0 turns the profile off)"
            )
        if self.working_tokens >= self.context_tokens:
            raise ConfigError(
                f"working_tokens ({self.working_tokens}) must be smaller than context_tokens "
                f"({self.context_tokens}): lower working_tokens (0 leaves the working state out of context())"
            )
        if isinstance(self.expiry_sweep_s, bool) or not isinstance(self.expiry_sweep_s, (int, float)) \
                or not math.isfinite(self.expiry_sweep_s) or self.expiry_sweep_s < 0:
            raise ConfigError(f"expiry_sweep_s ({self.expiry_sweep_s!r}) must be a number of seconds >= 0 "
                              "(0 turns the periodic sweep off)")
        for name in ("extract_memories", "profile_related_only"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} ({getattr(self, name)!r}) must be True or False")
        if self.recall_unit not in ("turn", "message"):
            raise ConfigError(f"recall_unit ({self.recall_unit!r}) must be 'turn' or 'message'")
        if self.embedded_vectors not in (None, "chroma", "sqlite"):
            raise ConfigError(f"embedded_vectors ({self.embedded_vectors!r}) must be 'chroma', 'sqlite' or None "
                              "(whichever the folder holds)")
        if self.recall_scope not in ("session", "user", "agent"):
            raise ConfigError(f"recall_scope ({self.recall_scope!r}) must be 'session', 'user' or 'agent'")
        if self.summary_role not in ("system", "user", "assistant"):
            raise ConfigError(f"summary_role ({self.summary_role!r}) must be system, user or assistant")
        if self.oversize_policy not in ("truncate", "keep", "error"):
            raise ConfigError(
                f"oversize_policy ({self.oversize_policy!r}) must be truncate, keep or error"
            )
        RecallOptions.from_config(self)  # validates the recall_* query-time switches
        FusionParams.from_config(self)  # and the rank fusion's
        if self.summary_retry_base_s < 0 or self.summary_retry_max_s < self.summary_retry_base_s:
            raise ConfigError(
                f"summary retry backoff ({self.summary_retry_base_s}s .. {self.summary_retry_max_s}s) "
                "needs 0 <= summary_retry_base_s <= summary_retry_max_s"
            )

    @property
    def window_low_tokens(self) -> int:
        """Where eviction stops: ``window_tokens * window_low_ratio``, rounded down."""
        return int(self.window_tokens * self.window_low_ratio)

    def with_changes(self, **changes: Any) -> MemoryConfig:
        """A copy with some fields changed (validated again)."""
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ConfigError(f"unknown MemoryConfig field(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} ({value!r}) must be a positive integer")
