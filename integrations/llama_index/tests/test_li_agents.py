"""FunctionAgent and ReActAgent with a tool; the agent Context round trip."""

from __future__ import annotations

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context
from workflows.context.serializers import JsonSerializer

from llama_index.memory.langmem_tiers import TieredChatMemory

from .conftest import SMALL, RecordingFunctionLLM, RecordingReActLLM, system_count, text_of


def weather(city: str = "Paris") -> str:
    """Weather of a city."""
    return f"sunny in {city}"


TOOL = FunctionTool.from_defaults(weather)


async def test_function_agent_stores_tool_turns_and_evicts(tmp_path) -> None:
    llm = RecordingFunctionLLM()
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="fa", config=SMALL, embed_model=False)
    agent = FunctionAgent(tools=[TOOL], llm=llm, system_prompt="You answer about weather.")
    for i in range(12):
        result = await agent.run(user_msg=f"Question {i}: what is the weather in Paris for trip {i}?", memory=memory)
        assert "sunny in Paris" in str(result)
    history = memory.get_all()
    roles = [m.role.value for m in history]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"]
    assert len(history) == 48
    call = history[1].blocks[0]
    assert call.tool_name == "weather"
    assert history[2].additional_kwargs["tool_call_id"] == call.tool_call_id
    assert memory.tiered.stats().summary_cursor > 0
    assert all(system_count(c) == 1 for c in llm.calls)
    assert "Summary of earlier conversation" in text_of(llm.calls[-1])


async def test_empty_memory_is_kept_by_the_agent(tmp_path) -> None:
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="empty", embed_model=False)
    assert bool(memory)
    agent = FunctionAgent(tools=[TOOL], llm=RecordingFunctionLLM())
    ctx = Context(agent)
    await agent.run(user_msg="weather?", memory=memory, ctx=ctx)
    assert await ctx.store.get("memory") is memory
    assert len(memory.get_all()) == 4


async def test_react_agent_without_system_prompt_sees_memory(tmp_path) -> None:
    llm = RecordingReActLLM()
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="react", config=SMALL, embed_model=False)
    agent = ReActAgent(tools=[TOOL], llm=llm)
    for i in range(10):
        result = await agent.run(user_msg=f"Trip {i}: will it rain in Paris on day {i}?", memory=memory)
        assert "sunny" in str(result)
    assert memory.tiered.summary
    last = llm.calls[-1]
    assert system_count(last) == 1  # the ReAct header only
    assert "Summary of earlier conversation" in text_of(last)  # ReAct drops a leading system message: ours is not one
    assert len(memory.get_all()) == 20  # user + the final reasoning per run


async def test_agent_context_round_trip(tmp_path) -> None:
    agent = FunctionAgent(tools=[TOOL], llm=RecordingFunctionLLM())
    memory = TieredChatMemory.from_defaults(path=tmp_path, session_id="ctx", config=SMALL, embed_model=False)
    ctx = Context(agent)
    await agent.run(user_msg="First: weather in Paris?", memory=memory, ctx=ctx)
    data = ctx.to_dict(serializer=JsonSerializer())
    memory.close()  # as if the process ended

    llm = RecordingFunctionLLM()
    agent2 = FunctionAgent(tools=[TOOL], llm=llm)
    restored = Context.from_dict(agent2, data, serializer=JsonSerializer())
    await agent2.run(user_msg="Second: and again?", ctx=restored)
    again = await restored.store.get("memory")
    assert isinstance(again, TieredChatMemory)
    assert again is not memory
    assert [m.content for m in again.get_all() if m.role.value == "user"] == ["First: weather in Paris?",
                                                                             "Second: and again?"]
    assert "First: weather in Paris?" in text_of(llm.calls[0])  # the restored history reached the LLM
    again.close()
