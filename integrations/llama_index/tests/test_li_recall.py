"""Recall with the real local embedding model and embedded Chroma; sessions; persistence."""

from __future__ import annotations

from llama_index.core.chat_engine import ContextChatEngine, SimpleChatEngine

from llama_index.memory.langmem_tiers import TieredChatMemory

from .conftest import SMALL, RecordingLLM, text_of
from .test_li_engines import FixedRetriever

FACT = "My cat is called Pixel Whiskers and she loves sardines."
QUESTION = "What is the name of my cat?"
FILLER = [f"Let us talk about gardening topic {i}: tomatoes need {i} litres of water weekly." for i in range(24)]


def converse(engine, memory) -> None:  # type: ignore[no-untyped-def]
    engine.chat(FACT)
    for line in FILLER:
        engine.chat(line)
    memory.flush()  # index everything evicted (the outbox drains on flush)


def test_recall_reaches_the_llm_in_both_calling_orders(tmp_path) -> None:
    # put-then-get(None): SimpleChatEngine; get(input)-then-put: ContextChatEngine.
    for name, build in (("simple", lambda llm, m: SimpleChatEngine.from_defaults(llm=llm, memory=m)),
                        ("context", lambda llm, m: ContextChatEngine.from_defaults(FixedRetriever(), llm=llm,
                                                                                   memory=m))):
        memory = TieredChatMemory.from_defaults(path=tmp_path / name, session_id="r", config=SMALL)
        llm = RecordingLLM(max_tokens=5, is_chat_model=True)
        engine = build(llm, memory)
        converse(engine, memory)
        assert all(m.text != FACT for m in memory.tiered.window())  # scrolled out of the window
        engine.chat(QUESTION)
        recalled = memory.last_context.recalled
        assert any("Pixel Whiskers" in h.text for h in recalled), name
        assert "Pixel Whiskers" in text_of(llm.calls[-1]), name
        assert abs(sum(1 for _ in memory.get_all()) - 2 * (len(FILLER) + 2)) == 0
        memory.close()


def test_sessions_are_isolated_and_survive_reopen(tmp_path) -> None:
    a = TieredChatMemory.from_defaults(path=tmp_path, session_id="alice", config=SMALL)
    b = TieredChatMemory.from_defaults(path=tmp_path, session_id="bob", config=SMALL)
    llm = RecordingLLM(max_tokens=5, is_chat_model=True)
    converse(SimpleChatEngine.from_defaults(llm=llm, memory=a), a)
    SimpleChatEngine.from_defaults(llm=llm, memory=b).chat("I have a dog named Rex.")
    assert not any("Pixel" in h.text for h in b.search("name of my cat", k=5))
    assert "Pixel" not in text_of(b.get(QUESTION))
    count = len(a.get_all())
    a.close()
    b.close()

    reopened = TieredChatMemory.from_defaults(path=tmp_path, session_id="alice", config=SMALL)
    assert len(reopened.get_all()) == count
    assert any("Pixel Whiskers" in h.text for h in reopened.search(QUESTION))
    assert "Pixel Whiskers" in text_of(reopened.get(QUESTION))
    reopened.close()
