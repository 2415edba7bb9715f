"""TieredRunnableWithMessageHistory: recall keyed on the input being answered, per request.

Real journal, real Chroma and the real local embedder; only the chat model is a fake
(ScriptedChatModel, which records every input it is given).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableFieldSpec
from langchain_core.runnables.history import RunnableWithMessageHistory
from lc_fakes import SMALL, MeetingChatModel, ScriptedChatModel, model_text, recalled, small_talk

from langchain_langmem_tiers import TieredChatMessageHistory, TieredRunnableWithMessageHistory

CAT = "My cat is called Miso."
BIKE = "My bike lock code is 7391."
# One recall hit per question: each request's recall must be the one for its own question. Recall held to
# its own share: filling the spare budget would recall both facts for either question in a history this small.
TOP1 = dataclasses.replace(SMALL, recall_k=1, recall_uses_spare=False)


def _wrap(cls: type[RunnableWithMessageHistory], model: Any, factory: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # RWMH is deprecated upstream (removal in 2.0)
        return cls(model, factory, **kwargs)


async def _ask(chain: Any, mode: str, inp: Any, cfg: dict[str, Any]) -> None:
    if mode == "invoke":
        chain.invoke(inp, cfg)
    elif mode == "ainvoke":
        await chain.ainvoke(inp, cfg)
    elif mode == "stream":
        list(chain.stream(inp, cfg))
    else:
        [c async for c in chain.astream(inp, cfg)]


def _prefill(history: TieredChatMessageHistory, facts: list[str], turns: int) -> None:
    """The facts, then ``turns`` turns of small talk, in one batch (the journal holds the same rows)."""
    messages: list[Any] = []
    for fact in facts:
        messages += [HumanMessage(fact), AIMessage("Noted.")]
    for text in small_talk(turns):
        messages += [HumanMessage(text), AIMessage("Nice.")]
    history.add_messages(messages)


def test_the_private_hooks_it_overrides_are_there() -> None:
    """The langchain-core hooks this class relies on keep their shape (see pyproject's pin)."""
    for name in ("_enter_history", "_aenter_history", "_merge_configs", "_get_input_messages"):
        assert callable(getattr(RunnableWithMessageHistory, name)), name
    assert list(inspect.signature(RunnableWithMessageHistory._enter_history).parameters) == [
        "self", "value", "config",
    ]
    assert inspect.iscoroutinefunction(RunnableWithMessageHistory._aenter_history)


MODES = ["invoke", "ainvoke", "stream", "astream"]


@pytest.fixture(scope="module")
def miso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One journal; per test a session where the cat's name was said 80 turns ago and left the window.

    Each test asks in its own session: a question, once stored, would key the recall of a
    plain RunnableWithMessageHistory asked after it in the same session.
    """
    factory = TieredChatMessageHistory.factory(tmp_path_factory.mktemp("miso"), config=SMALL)
    for session in ["plain", *MODES]:
        _prefill(factory(session), [CAT], 80)
        assert CAT not in [m.text for m in factory(session).memory.window()], "the fact left the window"
    yield factory
    factory.close()


def test_plain_runnable_with_message_history_recalls_for_the_previous_message(miso) -> None:
    """Why the subclass exists: RWMH reads the history first, so recall is keyed on small talk."""
    model = ScriptedChatModel()
    chain = _wrap(RunnableWithMessageHistory, model, miso)
    chain.invoke("What is my cat called?", {"configurable": {"session_id": "plain"}})
    assert "Miso" not in recalled(model.inputs[-1])


@pytest.mark.parametrize("mode", MODES)
async def test_fact_evicted_80_turns_ago_reaches_the_model(miso, mode: str) -> None:
    model = ScriptedChatModel()
    chain = _wrap(TieredRunnableWithMessageHistory, model, miso)
    await _ask(chain, mode, "What is my cat called?", {"configurable": {"session_id": mode}})
    last = model.inputs[-1]
    assert "Miso" in recalled(last)
    assert last[-1].text == "What is my cat called?"
    assert CAT not in [m.text for m in last], "it came from recall, not the window"
    # The question and the answer journaled once each, after the 81 prefilled turns.
    journal = miso(mode).memory.messages()
    assert len(journal) == 2 * 81 + 2
    assert [m.role for m in journal[-2:]] == ["user", "assistant"]
    assert journal[-2].text == "What is my cat called?"
    assert journal[-1].text == "Noted, thank you: What is my cat called?"


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
async def test_history_messages_key_prompt(tmp_path, mode: str) -> None:
    factory = TieredChatMessageHistory.factory(tmp_path, config=SMALL)
    _prefill(factory("s1"), [CAT], 12)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are helpful."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = ScriptedChatModel()
    chain = _wrap(
        TieredRunnableWithMessageHistory, prompt | model, factory,
        input_messages_key="question", history_messages_key="history",
    )
    await _ask(chain, mode, {"question": "What is my cat called?"}, {"configurable": {"session_id": "s1"}})
    assert "Miso" in recalled(model.inputs[-1])
    journal = factory("s1").memory.messages()
    assert [m.role for m in journal[-2:]] == ["user", "assistant"]
    assert journal[-2].text == "What is my cat called?"
    factory.close()


def _two_facts(tmp_path: Any) -> Any:
    factory = TieredChatMessageHistory.factory(tmp_path, config=TOP1)
    _prefill(factory("s1"), [CAT, BIKE], 20)
    return factory


QUESTIONS = {"What is my cat called?": "Miso", "What is my bike lock code?": "7391"}


def _check_each_got_its_own_recall(model: ScriptedChatModel, factory: Any) -> None:
    assert len(model.inputs) == 2
    for messages in model.inputs:
        question = messages[-1].text
        mine = QUESTIONS[question]
        (other,) = set(QUESTIONS.values()) - {mine}
        assert mine in recalled(messages), question
        assert other not in recalled(messages), question
    # Each request journaled its own question and answer exactly once.
    journal = factory("s1").memory.messages()
    assert sorted(m.text for m in journal[-4:] if m.role == "user") == sorted(QUESTIONS)
    assert len(journal) == 2 * 22 + 4


def test_concurrent_requests_each_recall_for_their_own_input_sync(tmp_path) -> None:
    factory = _two_facts(tmp_path)
    model = MeetingChatModel(parties=2)  # answers only once both requests are inside the model
    chain = _wrap(TieredRunnableWithMessageHistory, model, factory)
    cfg = {"configurable": {"session_id": "s1"}, "max_concurrency": 2}
    chain.batch(list(QUESTIONS), cfg)
    _check_each_got_its_own_recall(model, factory)
    factory.close()


async def test_concurrent_requests_each_recall_for_their_own_input_async(tmp_path) -> None:
    factory = _two_facts(tmp_path)
    model = MeetingChatModel(parties=2)
    chain = _wrap(TieredRunnableWithMessageHistory, model, factory)
    cfg = {"configurable": {"session_id": "s1"}}
    await asyncio.gather(*(chain.ainvoke(q, cfg) for q in QUESTIONS))
    _check_each_got_its_own_recall(model, factory)
    factory.close()


def test_per_user_sessions_through_history_factory_config(tmp_path) -> None:
    """user_id and session_id both come from the config: two users' "s1" are two sessions."""
    factory = TieredChatMessageHistory.factory(tmp_path, embedder=False)
    model = ScriptedChatModel()
    chain = _wrap(
        TieredRunnableWithMessageHistory, model, factory,
        history_factory_config=[
            ConfigurableFieldSpec(id="user_id", annotation=str, is_shared=True),
            ConfigurableFieldSpec(id="session_id", annotation=str, is_shared=True),
        ],
    )
    chain.invoke("My secret word is pelican.", {"configurable": {"user_id": "alice", "session_id": "s1"}})
    chain.invoke("What is my secret word?", {"configurable": {"user_id": "bob", "session_id": "s1"}})
    assert "pelican" not in model_text(model.inputs[-1])
    assert factory("s1", user_id="bob").memory.messages()[0].text == "What is my secret word?"
    assert factory("s1", user_id="alice").memory.messages()[0].text == "My secret word is pelican."
    factory.close()


def test_other_histories_behave_as_under_runnable_with_message_history() -> None:
    store: dict[str, InMemoryChatMessageHistory] = {}

    def get_history(session_id: str) -> InMemoryChatMessageHistory:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return store.setdefault(session_id, InMemoryChatMessageHistory())

    model = ScriptedChatModel()
    chain = _wrap(TieredRunnableWithMessageHistory, model, get_history)
    cfg = {"configurable": {"session_id": "x"}}
    chain.invoke("hello", cfg)
    chain.invoke("again", cfg)
    assert [m.text for m in store["x"].messages] == ["hello", "Noted, thank you: hello", "again",
                                                     "Noted, thank you: again"]
    assert [m.text for m in model.inputs[-1]] == ["hello", "Noted, thank you: hello", "again"]


def test_input_without_a_findable_message_key_names_the_fix(tmp_path) -> None:
    factory = TieredChatMessageHistory.factory(tmp_path, embedder=False)
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q} in {lang}")])
    chain = _wrap(TieredRunnableWithMessageHistory, prompt | ScriptedChatModel(), factory,
                  history_messages_key="history")
    with pytest.raises(ValueError, match="set input_messages_key"):
        chain.invoke({"q": "hi", "lang": "en"}, {"configurable": {"session_id": "s"}})
    factory.close()
