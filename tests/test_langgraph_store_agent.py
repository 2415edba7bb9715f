"""TieredStore as the store of a LangChain agent: ``create_agent(..., store=TieredStore(...))`` with
LangMem's memory tools (``create_manage_memory_tool`` / ``create_search_memory_tool``, real package) and
a tool of our own that reads ``runtime.store``. Only the chat model is a fake: a deterministic tool-caller
that issues the calls a real model would for each request. The same conversation runs against
LangGraph's InMemoryStore, and both stores must end with the same items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_langmem_tiers import TieredStore
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

langmem = pytest.importorskip("langmem")

REMEMBER = re.compile(r"^Remember that (.+)$")
UPDATE = re.compile(r"^Update memory ([0-9a-f-]{36}) to (.+)$")
FORGET = re.compile(r"^Forget memory ([0-9a-f-]{36})$")
RECALL = re.compile(r"^What do you know about (.+)\?$")
PREFER = re.compile(r"^I prefer (\w+) = (.+)$")


class MemoryToolModel(BaseChatModel):
    """Calls LangMem's manage/search tools and the preference tool, by their schemas, as a model would;
    after a tool result it answers with that result."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "memory-tool-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> MemoryToolModel:
        names = {getattr(t, "name", None) for t in tools}
        assert {"manage_memory", "search_memory", "save_preference"} <= names, names
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.calls += 1
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"Tool result: {last.text}")
        text = last.text if isinstance(last, HumanMessage) else ""
        call: tuple[str, dict[str, Any]] | None = None
        if m := REMEMBER.match(text):
            call = ("manage_memory", {"content": m.group(1), "action": "create"})
        elif m := UPDATE.match(text):
            call = ("manage_memory", {"content": m.group(2), "action": "update", "id": m.group(1)})
        elif m := FORGET.match(text):
            call = ("manage_memory", {"action": "delete", "id": m.group(1)})
        elif m := RECALL.match(text):
            call = ("search_memory", {"query": m.group(1), "limit": 10})
        elif m := PREFER.match(text):
            call = ("save_preference", {"name": m.group(1), "value": m.group(2)})
        if call is None:
            return AIMessage("I have nothing to do.")
        return AIMessage("", tool_calls=[{"name": call[0], "args": call[1], "id": f"call_{self.calls}",
                                          "type": "tool_call"}])


@tool
def save_preference(name: str, value: str, runtime: ToolRuntime) -> str:
    """Save one preference of the user (a name and its value)."""
    user = runtime.config["configurable"]["langgraph_user_id"]
    assert runtime.store is not None
    runtime.store.put(("prefs", user), name, {"value": value})
    return f"saved {name}"


def _agent(store: BaseStore) -> Any:
    tools = [
        langmem.create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}")),
        langmem.create_search_memory_tool(namespace=("memories", "{langgraph_user_id}")),
        save_preference,
    ]
    return create_agent(MemoryToolModel(), tools=tools, store=store)


def _say(agent: Any, text: str, user: str) -> str:
    out = agent.invoke({"messages": [HumanMessage(text)]},
                       {"configurable": {"langgraph_user_id": user, "thread_id": f"{user}-{text[:8]}"}})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 1, out["messages"]
    assert results[0].status == "success", results[0].text
    assert isinstance(out["messages"][-1], AIMessage)
    return results[0].text


def _conversation(agent: Any) -> dict[str, str]:
    """The same requests for any store; returns what the tools answered, by step."""
    said: dict[str, str] = {}
    said["create"] = _say(agent, "Remember that my locker code is 4417", "ada")
    said["bob"] = _say(agent, "Remember that Bob's locker code is 9021", "bob")
    said["tea"] = _say(agent, "Remember that I drink green tea every morning", "ada")
    locker = re.search(r"created memory ([0-9a-f-]{36})", said["create"]).group(1)
    tea = re.search(r"created memory ([0-9a-f-]{36})", said["tea"]).group(1)
    said["update"] = _say(agent, f"Update memory {locker} to my locker code is 5521", "ada")
    said["pref"] = _say(agent, "I prefer theme = dark", "ada")
    said["ada_search"] = _say(agent, "What do you know about locker code?", "ada")
    said["bob_search"] = _say(agent, "What do you know about locker code?", "bob")
    said["delete"] = _say(agent, f"Forget memory {tea}", "ada")
    return said


@pytest.fixture
def store(tmp_path: Path, local_embedder: Any) -> Iterator[TieredStore]:
    with TieredStore.open(tmp_path, embedder=local_embedder, user_index=1) as s:
        yield s


def _contents(store: BaseStore) -> list[tuple[tuple[str, ...], Any]]:
    return sorted((i.namespace, i.value) for i in store.search((), limit=1000))


def test_langmem_tools_under_create_agent_match_in_memory_store(store: TieredStore) -> None:
    ours = _conversation(_agent(store))
    oracle = InMemoryStore()
    theirs = _conversation(_agent(oracle))

    assert _contents(store) == _contents(oracle)
    assert _contents(store) == [
        (("memories", "ada"), {"content": "my locker code is 5521"}),
        (("memories", "bob"), {"content": "Bob's locker code is 9021"}),
        (("prefs", "ada"), {"value": "dark"}),
    ]
    for said in (ours, theirs):
        assert said["update"].startswith("updated memory ")
        assert said["delete"].startswith("Deleted memory ")
    # LangMem's search tool answers with the items as JSON; ada sees hers only, bob his only.
    found = json.loads(ours["ada_search"])
    contents = [f["value"]["content"] for f in found]
    assert sorted(contents) == ["I drink green tea every morning", "my locker code is 5521"]  # all of hers
    assert contents[0] == "my locker code is 5521"  # the one about lockers first
    assert found[0]["namespace"] == ["memories", "ada"]
    assert isinstance(found[0]["score"], float)  # ranked by our recall
    assert "4417" not in ours["ada_search"]  # the superseded version is history, never a search result
    bob_found = json.loads(ours["bob_search"])
    assert [f["value"]["content"] for f in bob_found] == ["Bob's locker code is 9021"]

    # The tools' writes are memories of their user in the core: history kept, delete erased.
    ada = store.memory.for_session("chat", user_id="ada")
    history = [f.text for f in ada.facts(include_superseded=True)]
    assert any("4417" in t for t in history)
    assert not any("green tea" in t for t in history)
    assert not any("9021" in t for t in history)


async def test_async_agent_run_with_the_store(store: TieredStore) -> None:
    agent = _agent(store)
    cfg = {"configurable": {"langgraph_user_id": "cy", "thread_id": "t1"}}
    await agent.ainvoke({"messages": [HumanMessage("Remember that Cy's bike is blue")]}, cfg)
    out = await agent.ainvoke({"messages": [HumanMessage("What do you know about bike?")]}, {**cfg})
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert [f["value"]["content"] for f in json.loads(result.text)] == ["Cy's bike is blue"]
    assert store.list_namespaces() == [("memories", "cy")]
