"""TieredMemoryRetriever: langchain-tests' standard suite plus metadata checks."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langmem_tiers import TieredMemory

from langchain_langmem_tiers import TieredMemoryRetriever

FACTS = [
    "Ada prefers green tea in the morning.",
    "Ada's sister lives in Lisbon.",
    "Ada is allergic to peanuts.",
    "Ada drives a blue bicycle to work.",
    "Ada's favourite tea shop is Kato.",
]
_MEMORY: dict[str, TieredMemory] = {}


def _memory() -> TieredMemory:
    # One memory for the whole suite (the standard tests build the retriever many times).
    if "m" not in _MEMORY:
        memory = TieredMemory.open(tempfile.mkdtemp(), session_id="s", user_id="ada", embedder=False)
        for fact in FACTS:
            memory.remember(fact, "fact")
        _MEMORY["m"] = memory
    return _MEMORY["m"]


class TestTieredMemoryRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[TieredMemoryRetriever]:
        return TieredMemoryRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": _memory()}

    @property
    def retriever_query_example(self) -> str:
        return "Ada tea"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_documents_carry_score_parts_and_provenance(mode: str) -> None:
    retriever = TieredMemoryRetriever(memory=_memory(), k=2, scope="user")
    docs = (
        retriever.invoke("peanuts allergy") if mode == "sync" else await retriever.ainvoke("peanuts allergy")
    )
    assert isinstance(docs[0], Document)
    assert docs[0].page_content == "Ada is allergic to peanuts."
    meta = docs[0].metadata
    assert meta["kind"] == "fact"
    assert meta["session_id"] == "s"
    assert meta["user_id"] == "ada"
    assert meta["created_at"] > 0
    assert meta["score"] > 0
    assert meta["score_parts"]


def test_evicted_turns_are_retrievable_with_the_real_embedder(tmp_path) -> None:
    from lc_fakes import SMALL, conversation

    with TieredMemory.open(tmp_path, session_id="s", config=SMALL) as memory:
        memory.add("user", "My passport number is X99-314.")
        memory.add("assistant", "Noted.")
        for text in conversation(8):
            memory.add("user", text)
            memory.add("assistant", "ok")
        docs = TieredMemoryRetriever(memory=memory, k=3).invoke("what is my travel document id?")
        assert any("X99-314" in d.page_content for d in docs)
        # Evicted turns come back (a fact extracted from them may come back beside them).
        assert "turn" in {d.metadata["kind"] for d in docs}
