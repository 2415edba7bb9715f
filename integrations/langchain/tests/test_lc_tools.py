"""Memory tools (remember / recall / forget) in create_agent, driven by a faithful tool-calling fake."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langmem_tiers import ConfigError, TieredMemory
from lc_fakes import ScriptedChatModel
from pydantic import Field

from langchain_langmem_tiers import TieredMemoryMiddleware, create_memory_tools

REMEMBER = re.compile(r"^Remember that (.+)$")
RECALL = re.compile(r"^What do you know about (.+)\?$")
FORGET = re.compile(r"^Forget memory (\d+)$")
RAW = re.compile(r"^CALL (\w+) (\{.*\})$")


class MemoryChatModel(ScriptedChatModel):
    """Calls the memory tools it was given, by the names it was given, as a tool-calling model would.

    "Remember that X" -> remember(text=X); "What do you know about Q?" -> recall(query=Q);
    "Forget memory N" -> forget(record_id=N); "CALL tool {json}" -> exactly those arguments (what a
    confused or adversarial model might send). After a tool result it answers with that result.
    """

    tool_names: dict[str, str] = Field(default_factory=dict)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> MemoryChatModel:
        # As a model does: it picks the tool whose description fits, whatever its name.
        for role, verb in (("remember", "Save"), ("recall", "Search"), ("forget", "Erase")):
            self.tool_names[role] = next(t.name for t in tools if t.description.startswith(verb))
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self.inputs.append(list(messages))
        self.calls += 1
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"The tool says: {last.text}")
        text = last.text if isinstance(last, HumanMessage) else ""
        call: tuple[str, dict[str, Any]] | None = None
        if m := REMEMBER.match(text):
            call = (self.tool_names["remember"], {"text": m.group(1), "kind": "fact"})
        elif m := RECALL.match(text):
            call = (self.tool_names["recall"], {"query": m.group(1)})
        elif m := FORGET.match(text):
            call = (self.tool_names["forget"], {"record_id": int(m.group(1))})
        elif m := RAW.match(text):
            call = (m.group(1), json.loads(m.group(2)))
        if call is None:
            return AIMessage(f"Noted: {text[:60]}")
        return AIMessage("", tool_calls=[{"name": call[0], "args": call[1], "id": f"call_{self.calls}",
                                          "type": "tool_call"}])


def _tool_result(out: dict[str, Any]) -> ToolMessage:
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 1
    assert isinstance(out["messages"][-1], AIMessage)  # the run went on to the model's answer
    return results[0]


def _run(agent: Any, text: str, user: str, thread: str = "t1") -> ToolMessage:
    cfg = {"configurable": {"thread_id": thread, "user_id": user}}
    return _tool_result(agent.invoke({"messages": [HumanMessage(text)]}, cfg))


@pytest.fixture
def agent_and_middleware(tmp_path):
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False, memory_tools=True)
    agent = create_agent(MemoryChatModel(), middleware=[middleware])
    yield agent, middleware
    middleware.close()


def test_schema_shows_no_user_and_no_runtime(tmp_path) -> None:
    with TieredMemory.open(tmp_path, session_id="s", user_id="ada", embedder=False) as memory:
        for t in create_memory_tools(memory):
            properties = set(t.tool_call_schema.model_json_schema()["properties"])
            assert properties <= {"text", "kind", "importance", "key", "query", "k", "record_id"}, properties


def test_remember_recall_forget_per_user(agent_and_middleware) -> None:
    agent, middleware = agent_and_middleware
    saved = _run(agent, "Remember that my locker code is 4417", "ada")
    assert saved.status == "success"
    record_id = int(re.search(r"memory (\d+)", saved.text).group(1))

    found = _run(agent, "What do you know about locker code?", "ada", thread="t2")  # another session of ada
    assert re.search(rf"^\[memory {record_id}\] \(fact, ", found.text, re.MULTILINE)
    assert "4417" in found.text

    # Bob's run asks for the same, then for ada's record id: nothing of ada's comes back or goes.
    theirs = _run(agent, "What do you know about locker code?", "bob")
    assert "4417" not in theirs.text
    smuggled = _run(agent, 'CALL recall {"query": "locker code 4417", "user_id": "ada"}', "bob")
    assert "4417" not in smuggled.text
    refused = _run(agent, f"Forget memory {record_id}", "bob")
    assert refused.status == "error"
    assert f"no memory {record_id} in this user's memory" in refused.text
    missing = _run(agent, "Forget memory 999999", "bob")
    assert missing.text == refused.text.replace(str(record_id), "999999")  # no hint that the id exists
    kept = middleware.memory_for("t1", "ada").search("locker code", scope="user")
    assert record_id in [h.record_id for h in kept]

    gone = _run(agent, f"Forget memory {record_id}", "ada")
    assert gone.status == "success"
    assert gone.text == f"Forgot memory {record_id}."
    again = _run(agent, "What do you know about locker code?", "ada", thread="t3")
    assert not re.search(rf"^\[memory {record_id}\]", again.text, re.MULTILINE)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ('CALL recall {"query": "locker", "k": 500}', "k: Input should be less than or equal to 20"),
        ('CALL forget {"record_id": "abc"}', "record_id: Input should be a valid integer"),
        ('CALL forget {"record_id": 0}', "record_id: Input should be greater than or equal to 1"),
        ('CALL remember {"text": ""}', "text: String should have at least 1 character"),
        ('CALL remember {"text": "x", "kind": "turn"}', "kind: Input should be 'fact'"),
        ('CALL remember {"text": "a\\u0000b"}', "NUL"),
    ],
)
def test_bad_arguments_become_tool_errors(agent_and_middleware, call: str, expected: str) -> None:
    agent, _ = agent_and_middleware
    result = _run(agent, call, "ada")
    assert result.status == "error"
    assert expected in result.text


def test_tools_bound_to_one_memory_refuse_another_users_run(tmp_path) -> None:
    with TieredMemory.open(tmp_path, session_id="s", user_id="ada", embedder=False) as memory:
        agent = create_agent(MemoryChatModel(), tools=create_memory_tools(memory))
        mine = _run(agent, "Remember that I like tea", "ada")
        assert mine.status == "success"
        other = _run(agent, "What do you know about tea?", "bob")
        assert other.status == "error"
        assert "another user's memory" in other.text
        assert "tea" not in other.text.replace("this run's user", "")


def test_renamed_tools(tmp_path) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False, memory_tools={"recall": "search_memory"})
    try:
        assert [t.name for t in middleware.tools] == ["remember", "search_memory", "forget"]
        agent = create_agent(MemoryChatModel(), middleware=[middleware])
        _run(agent, "Remember that the boat is blue", "ada")
        found = _run(agent, "What do you know about the boat?", "ada")
        assert found.name == "search_memory"
        assert "the boat is blue" in found.text
    finally:
        middleware.close()
    with TieredMemory.open(tmp_path / "m", session_id="s", embedder=False) as memory:
        with pytest.raises(ConfigError, match="unknown tool 'search'"):
            create_memory_tools(memory, names={"search": "x"})
        with pytest.raises(ConfigError, match="letters, digits"):
            create_memory_tools(memory, names={"recall": "search memory"})
        with pytest.raises(ConfigError, match="must differ"):
            create_memory_tools(memory, names={"recall": "forget"})


async def test_async_agent(tmp_path) -> None:
    middleware = TieredMemoryMiddleware(tmp_path, embedder=False, memory_tools=True)
    agent = create_agent(MemoryChatModel(), middleware=[middleware])
    try:
        cfg = {"configurable": {"thread_id": "a", "user_id": "ada"}}
        out = await agent.ainvoke({"messages": [HumanMessage("Remember that my bike is green")]}, cfg)
        assert _tool_result(out).status == "success"
        out = await agent.ainvoke({"messages": [HumanMessage("What do you know about my bike?")]}, cfg)
        assert "my bike is green" in _tool_result(out).text
        out = await agent.ainvoke({"messages": [HumanMessage("Forget memory 424242")]}, cfg)
        assert _tool_result(out).status == "error"
    finally:
        middleware.close()


def test_keyed_memory_replaces_the_older_one(agent_and_middleware) -> None:
    agent, middleware = agent_and_middleware
    first = _run(agent, 'CALL remember {"text": "Ada lives in Paris", "key": "home_city"}', "ada")
    second = _run(agent, 'CALL remember {"text": "Ada lives in Lyon", "key": "home_city"}', "ada")
    assert first.status == second.status == "success"
    current = [f.text for f in middleware.memory_for("t1", "ada").facts()]
    assert "Ada lives in Lyon" in current
    assert "Ada lives in Paris" not in current
    bad = _run(agent, 'CALL remember {"text": "x", "key": "Home City"}', "ada")
    assert bad.status == "error"
    assert "snake_case" in bad.text
