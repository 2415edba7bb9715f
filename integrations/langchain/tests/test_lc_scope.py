"""recall_scope through every LangChain adapter: a fact from an earlier session of the same user
reaches the model in a new session; another user's never does.

Real journal, Chroma and local embedder; only the chat model is a fake that records its input.
Ada told Monday's session her cat is Miso; Bob told his Monday session (same session id) his
cat is Rex. On Tuesday each asks, in a new session, what their cat is called.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.runnables import ConfigurableFieldSpec
from langmem_tiers import MemoryConfig, TieredMemory
from lc_fakes import SMALL, ScriptedChatModel, model_text, recalled

from langchain_langmem_tiers import (
    TieredChatMessageHistory,
    TieredConversationMemory,
    TieredMemoryMiddleware,
    TieredMemoryRetriever,
    TieredRunnableWithMessageHistory,
)

FACTS = {"ada": ("My cat is called Miso.", "Miso"), "bob": ("My cat is called Rex.", "Rex")}
QUESTION = "What is my cat called?"
SESSION_SCOPE = dataclasses.replace(SMALL, recall_scope="session")


def _other(user: str) -> str:
    return next(name for u, (_, name) in FACTS.items() if u != user)


def _check(messages: list[Any], user: str, scope: str) -> None:
    """The model input of ``user``'s question in a new session."""
    mine = FACTS[user][1]
    assert _other(user) not in model_text(messages), "another user's fact reached the model"
    if scope == "user":
        assert mine in recalled(messages), f"{user}'s fact from Monday was not recalled"
    else:
        assert mine not in model_text(messages), "recall_scope='session' must not reach Monday"


@pytest.mark.parametrize("config", [SMALL, SESSION_SCOPE], ids=["user-scope", "session-scope"])
def test_middleware(tmp_path, config: MemoryConfig) -> None:
    model = ScriptedChatModel()
    middleware = TieredMemoryMiddleware(tmp_path, config=config)
    agent = create_agent(model, middleware=[middleware])
    for user, (fact, _) in FACTS.items():
        cfg = {"configurable": {"thread_id": "monday", "user_id": user}}
        agent.invoke({"messages": [HumanMessage(fact)]}, cfg)
    for user in FACTS:
        agent.invoke({"messages": [HumanMessage(QUESTION)]},
                     {"configurable": {"thread_id": f"tuesday-{user}", "user_id": user}})
        _check(model.inputs[-1], user, config.recall_scope)
    middleware.close()


@pytest.mark.parametrize("config", [SMALL, SESSION_SCOPE], ids=["user-scope", "session-scope"])
async def test_history_through_runnable(tmp_path, config: MemoryConfig) -> None:
    model = ScriptedChatModel()
    factory = TieredChatMessageHistory.factory(tmp_path, config=config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        chain = TieredRunnableWithMessageHistory(
            model, factory,
            history_factory_config=[
                ConfigurableFieldSpec(id="user_id", annotation=str, is_shared=True),
                ConfigurableFieldSpec(id="session_id", annotation=str, is_shared=True),
            ],
        )
    for user, (fact, _) in FACTS.items():
        chain.invoke(fact, {"configurable": {"user_id": user, "session_id": "monday"}})
    for user in FACTS:
        await chain.ainvoke(QUESTION, {"configurable": {"user_id": user, "session_id": f"tuesday-{user}"}})
        _check(model.inputs[-1], user, config.recall_scope)
    factory.close()


def _mondays(tmp_path: Any, config: MemoryConfig) -> TieredMemory:
    """Monday's sessions written through the core; returns the memory of Ada's Tuesday session."""
    tuesday = TieredMemory.open(tmp_path, session_id="tuesday", user_id="ada", config=config)
    for user, (fact, _) in FACTS.items():
        monday = tuesday.for_session("monday", user_id=user)
        monday.add_messages([{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}])
    return tuesday


@pytest.mark.parametrize("config", [SMALL, SESSION_SCOPE], ids=["user-scope", "session-scope"])
def test_classic_memory(tmp_path, config: MemoryConfig) -> None:
    tuesday = _mondays(tmp_path, config)
    memory = TieredConversationMemory(memory=tuesday, return_messages=True)
    loaded = memory.load_memory_variables({"input": QUESTION})["history"]
    _check(loaded, "ada", config.recall_scope)
    tuesday.close()


@pytest.mark.parametrize("config", [SMALL, SESSION_SCOPE], ids=["user-scope", "session-scope"])
def test_retriever_default_scope_is_the_configs(tmp_path, config: MemoryConfig) -> None:
    tuesday = _mondays(tmp_path, config)
    found = " ".join(d.page_content for d in TieredMemoryRetriever(memory=tuesday, k=4).invoke(QUESTION))
    assert "Rex" not in found
    assert ("Miso" in found) == (config.recall_scope == "user")
    # An explicit scope keeps working whatever the config says.
    by_user = " ".join(
        d.page_content for d in TieredMemoryRetriever(memory=tuesday, scope="user").invoke(QUESTION)
    )
    assert "Miso" in by_user
    assert "Rex" not in by_user
    by_session = TieredMemoryRetriever(memory=tuesday, scope="session").invoke(QUESTION)
    assert "Miso" not in " ".join(d.page_content for d in by_session)
    tuesday.close()
