"""``TieredMemoryRetriever``: episodic recall as LangChain ``Document``s."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langmem_tiers import RecallHit, TieredMemory
from pydantic import ConfigDict, Field


def hit_to_document(hit: RecallHit) -> Document:
    """One recall hit as a ``Document``; metadata holds the score, its parts and provenance."""
    ns = hit.namespace
    metadata: dict[str, Any] = {
        "record_id": hit.record_id,
        "kind": hit.kind,
        "score": hit.score,
        "score_parts": dict(hit.parts),
        "session_id": ns.session_id,
        "user_id": ns.user_id,
        "agent_id": ns.agent_id,
        "created_at": hit.created_at,
        "message_ids": list(hit.message_ids),
        "importance": hit.importance,
        "pinned": hit.pinned,
        "tags": list(hit.tags),
    }
    if hit.metadata:
        metadata["metadata"] = dict(hit.metadata)
    return Document(page_content=hit.text, metadata=metadata, id=str(hit.record_id))


class TieredMemoryRetriever(BaseRetriever):
    """Hybrid (keyword + vector, recency and importance weighted) recall over a memory.

    Searches recall records (turns and explicit memories: facts, preferences, ...) of
    the memory's namespace at ``scope``: ``"session"``, ``"agent"`` (every session of
    this user with this agent) or ``"user"`` (every session of this user). Without
    ``scope`` the memory's ``config.recall_scope`` applies, the same reach as
    ``context()``; a memory without a user searches only its own session.

    Example:
        >>> import tempfile
        >>> from langmem_tiers import TieredMemory
        >>> memory = TieredMemory.open(tempfile.mkdtemp(), session_id="s1", embedder=False)
        >>> _ = memory.remember("Ada prefers green tea", kind="preference")
        >>> retriever = TieredMemoryRetriever(memory=memory, k=2)
        >>> [d.metadata["kind"] for d in retriever.invoke("what tea does Ada like?")]
        ['preference']
        >>> memory.close()
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: TieredMemory
    """The memory to search."""
    k: int = Field(default=4, ge=0)
    """Number of documents to return (override per call: ``invoke(query, k=2)``)."""
    scope: Literal["session", "agent", "user"] | None = None
    """How far beyond this session to search; ``None``: the memory's ``config.recall_scope``."""
    kinds: list[str] | None = None
    """Only these record kinds (``"turn"``, ``"fact"``, ...); ``None`` for all."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = self.memory.search(
            query,
            kwargs.get("k", self.k),
            scope=self._scope(kwargs),
            kinds=kwargs.get("kinds", self.kinds),
        )
        return [hit_to_document(h) for h in hits]

    def _scope(self, kwargs: dict[str, Any]) -> str:
        scope = kwargs.get("scope", self.scope)
        return self.memory.config.recall_scope if scope is None else str(scope)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = await self.memory.asearch(
            query,
            kwargs.get("k", self.k),
            scope=self._scope(kwargs),
            kinds=kwargs.get("kinds", self.kinds),
        )
        return [hit_to_document(h) for h in hits]
