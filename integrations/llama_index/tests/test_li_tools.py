"""Memory tools (remember / recall / forget) as FunctionTools in FunctionAgent and ReActAgent runs,
driven by faithful tool-calling mock LLMs; the user is the run's memory's, never a tool argument."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from langmem_tiers import ConfigError, TieredMemory
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from llama_index.memory.langmem_tiers import TieredChatMemory, TieredMemoryBlock, create_memory_tools

REMEMBER = re.compile(r"^Remember that (.+)$")
RECALL = re.compile(r"^What do you know about (.+)\?$")
FORGET = re.compile(r"^Forget memory (\d+)$")
RAW = re.compile(r"^CALL (\w+) (\{.*\})$")


def _intended_call(text: str, tools: Sequence[Any]) -> tuple[str, dict[str, Any]] | None:
    """The tool call a model makes for ``text``, choosing tools by their descriptions (not their names)."""
    by_verb = {t.metadata.description.split()[0]: t.metadata.name for t in tools}
    if m := REMEMBER.match(text):
        return by_verb["Save"], {"text": m.group(1), "kind": "fact"}
    if m := RECALL.match(text):
        return by_verb["Search"], {"query": m.group(1)}
    if m := FORGET.match(text):
        return by_verb["Erase"], {"record_id": int(m.group(1))}
    if m := RAW.match(text):
        return m.group(1), json.loads(m.group(2))
    return None


def _request(messages: Sequence[ChatMessage]) -> str:
    """The user's request: the last line of the last user message (memory text may come before it)."""
    user = next(m for m in reversed(messages) if m.role == MessageRole.USER)
    return str(user.content or "").rstrip().rsplit("\n", 1)[-1]


def function_step(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    last = messages[-1]
    if last.role == MessageRole.TOOL:
        return ChatMessage(role="assistant", content=f"The tool says {last.content}")
    call = _intended_call(_request(messages), kwargs.get("tools") or [])
    if call is None:
        return ChatMessage(role="assistant", content="Noted.")
    return ChatMessage(role="assistant", blocks=[ToolCallBlock(
        tool_call_id=f"call-{len(messages)}", tool_name=call[0], tool_kwargs=call[1])])


class MemoryFunctionLLM(MockFunctionCallingLLM):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(response_generator=function_step, is_chat_model=True, **kwargs)


async def _run(agent: Any, memory: TieredChatMemory, text: str) -> Any:
    result = await agent.run(user_msg=text, memory=memory)
    assert len(result.tool_calls) == 1
    assert "The tool says" in str(result)  # the run went on to the answer
    return result.tool_calls[0].tool_output


@pytest.fixture
def memories(tmp_path):
    opened: list[TieredChatMemory] = []

    def open_memory(user: str, session: str = "s1") -> TieredChatMemory:
        memory = TieredChatMemory.from_defaults(path=tmp_path, session_id=session, user_id=user, embed_model=False)
        opened.append(memory)
        return memory

    yield open_memory
    for memory in opened:
        memory.close()


def test_schema_has_no_user_and_no_context() -> None:
    for t in create_memory_tools():
        properties = set(t.metadata.get_parameters_dict()["properties"])
        assert properties <= {"text", "kind", "importance", "key", "query", "k", "record_id"}, properties


async def test_function_agent_remember_recall_forget_per_user(memories) -> None:
    agent = FunctionAgent(tools=create_memory_tools(), llm=MemoryFunctionLLM())
    ada, ada_later, bob = memories("ada"), memories("ada", "s2"), memories("bob")

    saved = await _run(agent, ada, "Remember that my locker code is 4417")
    assert not saved.is_error
    record_id = int(re.search(r"memory (\d+)", saved.content).group(1))
    found = await _run(agent, ada_later, "What do you know about locker code?")
    assert re.search(rf"^\[memory {record_id}\] \(fact, ", found.content, re.MULTILINE)

    theirs = await _run(agent, bob, "What do you know about locker code?")
    assert "4417" not in theirs.content
    smuggled = await _run(agent, bob, 'CALL recall {"query": "locker code 4417", "user_id": "ada"}')
    assert not smuggled.is_error  # the unknown argument is dropped: bob searched his own memory
    assert "4417" not in smuggled.content
    refused = await _run(agent, bob, f"Forget memory {record_id}")
    assert refused.is_error
    assert refused.content == f"no memory {record_id} in this user's memory: use an id that recall returned"
    assert record_id in [h.record_id for h in ada.tiered.search("locker code", scope="user")]

    gone = await _run(agent, ada, f"Forget memory {record_id}")
    assert gone.content == f"Forgot memory {record_id}."
    assert record_id not in [h.record_id for h in ada.tiered.search("locker code", scope="user")]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ('CALL recall {"query": "locker", "k": 500}', "k: Input should be less than or equal to 20"),
        ('CALL forget {"record_id": "abc"}', "record_id: Input should be a valid integer"),
        ('CALL remember {"text": ""}', "text: String should have at least 1 character"),
        ('CALL remember {"text": "x", "kind": "turn"}', "kind: Input should be 'fact'"),
        ('CALL remember {"text": "a\\u0000b"}', "NUL"),
    ],
)
async def test_bad_arguments_are_error_outputs(memories, call: str, expected: str) -> None:
    agent = FunctionAgent(tools=create_memory_tools(), llm=MemoryFunctionLLM())
    output = await _run(agent, memories("ada"), call)
    assert output.is_error
    assert expected in output.content
    assert output.exception is None  # a refusal we answered, not an exception the agent caught


async def test_react_agent_uses_the_tools(memories) -> None:
    def react_step(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        last = str(messages[-1].content or "")
        if "Observation:" in last:
            return ChatMessage(role="assistant", content="Thought: I can answer.\nAnswer: The tool says so.")
        question = last.rsplit("\n", 1)[-1]
        call = _intended_call(question, tools)
        assert call is not None
        return ChatMessage(role="assistant", content=f"Thought: I use a tool.\nAction: {call[0]}\n"
                           f"Action Input: {json.dumps(call[1])}")

    tools = create_memory_tools()
    llm = MockFunctionCallingLLM(response_generator=react_step, is_chat_model=True)
    agent = ReActAgent(tools=tools, llm=llm)
    ada = memories("ada")
    saved = await _run(agent, ada, "Remember that I prefer window seats")
    assert not saved.is_error
    found = await _run(agent, ada, "What do you know about window seats?")
    assert "I prefer window seats" in found.content


async def test_tools_made_for_one_user_refuse_another_users_run(memories, tmp_path) -> None:
    ada = memories("ada")
    agent = FunctionAgent(tools=create_memory_tools(ada), llm=MemoryFunctionLLM())
    assert not (await _run(agent, ada, "Remember that I like tea")).is_error
    other = await _run(agent, memories("bob"), "What do you know about tea?")
    assert other.is_error
    assert "another user's memory" in other.content


def test_direct_calls_and_names(tmp_path) -> None:
    with TieredMemory.open(tmp_path, session_id="s", user_id="ada", embedder=False) as memory:
        remember, recall, forget = create_memory_tools(memory, names={"recall": "search_memory"})
        assert recall.metadata.name == "search_memory"
        saved = remember.call(text="The boat is blue")
        assert saved.content.startswith("Remembered as memory ")
        assert "The boat is blue" in recall.call(query="boat").content
        assert forget.call(record_id=0).is_error
        with pytest.raises(ConfigError, match="unknown tool 'search'"):
            create_memory_tools(memory, names={"search": "x"})
        with pytest.raises(ConfigError, match="letters, digits"):
            create_memory_tools(memory, names={"recall": "search memory"})
    unbound = create_memory_tools()[1].call(query="boat")
    assert unbound.is_error
    assert "memory=TieredChatMemory" in unbound.content


async def test_llama_index_memory_with_a_tiered_block(tmp_path, li_memory) -> None:
    """A run with LlamaIndex's own Memory: the tools act on its TieredMemoryBlock's user."""
    agent = FunctionAgent(tools=create_memory_tools(), llm=MemoryFunctionLLM())

    def memory(user: str) -> Memory:
        block = TieredMemoryBlock(path=str(tmp_path), user_id=user, vectors=False)
        return li_memory(session_id=f"{user}-1", memory_blocks=[block], token_limit=4000)

    ada, bob = memory("ada"), memory("bob")
    saved = await _run(agent, ada, "Remember that my locker code is 4417")
    assert not saved.is_error
    found = await _run(agent, ada, "What do you know about locker code?")
    assert "4417" in found.content
    theirs = await _run(agent, bob, "What do you know about locker code?")
    assert "4417" not in theirs.content
    record_id = int(re.search(r"memory (\d+)", saved.content).group(1))
    assert (await _run(agent, bob, f"Forget memory {record_id}")).is_error


def test_keyed_memory_replaces_the_older_one(tmp_path) -> None:
    with TieredMemory.open(tmp_path, session_id="s", user_id="ada", embedder=False) as memory:
        remember = create_memory_tools(memory)[0]
        assert not remember.call(text="Ada lives in Paris", key="home_city").is_error
        assert not remember.call(text="Ada lives in Lyon", key="home_city").is_error
        current = [f.text for f in memory.facts()]
        assert "Ada lives in Lyon" in current
        assert "Ada lives in Paris" not in current
        bad = remember.call(text="x", key="Home City")
        assert bad.is_error
        assert "snake_case" in bad.content
