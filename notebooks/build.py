"""Generate the notebooks from the cells written below: ``.venv/bin/python notebooks/build.py``.

The ``.ipynb`` files are generated, committed without outputs, and executed by
``tests/test_notebooks.py`` (which also checks that they match this script). Edit the
cells here, never the notebooks, then run this script again.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def md(text: str) -> tuple[str, str]:
    return "markdown", textwrap.dedent(text).strip("\n")


def code(text: str) -> tuple[str, str]:
    return "code", textwrap.dedent(text).strip("\n")


def params(text: str) -> tuple[str, str]:
    """A code cell tagged ``parameters`` (papermill's convention for inputs to override)."""
    return "parameters", textwrap.dedent(text).strip("\n")


# --- 01 quickstart ---------------------------------------------------------------------------

QUICKSTART = [
    md("""
    # langmem-tiers quickstart: watch the tiers fill, summarize and recall

    This notebook runs offline with the core package only (`langmem_tiers`). It feeds a scripted,
    multi-session conversation (a few weeks of one user's chats with an assistant, with tool calls)
    into a `TieredMemory` with a deliberately small budget, so that you can see:

    1. the **window** of newest whole turns, evicting down to a low-water mark when it overflows;
    2. the **rolling summary** that evicted turns are folded into (offline: the extractive summarizer);
    3. **episodic recall** that brings evicted turns back when a question needs them, with the parts of
       each hit's score;
    4. the **journal** that keeps every message, so a reopened memory is complete.
    """),
    code("""
    %matplotlib inline
    import tempfile
    import time
    from pathlib import Path

    import matplotlib.pyplot as plt

    from langmem_tiers import MemoryConfig, TieredMemory
    from langmem_tiers.cli.conversation import FACTS, QUESTIONS, demo_turns
    """),
    md("""
    ## Open a memory

    One folder holds the SQLite journal and the embedded Chroma index. The budget is small on purpose:
    `context()` fills at most 2,400 tokens; the window evicts when it crosses 1,200 tokens (down to
    `window_tokens * window_low_ratio`, so summaries are batched); the summary is capped at 400 tokens and
    recall may take 600. The default embedder is the local MiniLM model, so recall fuses keyword (FTS5/bm25)
    and vector ranks; pass `embedder=False` for keyword-only recall.
    """),
    code("""
    folder = Path(tempfile.mkdtemp(prefix="langmem-quickstart-"))
    config = MemoryConfig(context_tokens=2400, window_tokens=1200, summary_tokens=400, recall_tokens=600,
                          recall_k=4)
    memory = TieredMemory.open(folder, session_id="quickstart", user_id="ada", config=config)
    print("memory folder:", folder)
    print("window evicts above", config.window_tokens, "tokens, down to", config.window_low_tokens)
    """),
    md("""
    ## Feed a multi-session conversation

    `demo_turns()` yields the scripted conversation turn by turn: small talk, tool calls (an assistant
    message with a tool call, the tool result, the answer) and, now and then, a fact the user will ask about
    much later. For each turn we add the user message, build the context the model would see at that moment
    (`memory.context()` recalls for the latest user message) and record the tokens of each tier, then add the
    assistant's reply (and tool messages) as one atomic batch.
    """),
    code("""
    turns = list(demo_turns(sessions=4, turns_per_session=30))
    rows = []
    start = time.perf_counter()
    for turn in turns:
        user, *reply = turn.messages
        memory.add_messages([user])
        tokens = memory.context().tokens
        rows.append({"session": turn.session, "pinned": tokens.pinned, "summary": tokens.summary,
                     "recall": tokens.recall, "window": tokens.window, "total": tokens.total})
        memory.add_messages(reply)
    memory.flush()  # summarize and index anything still pending
    elapsed = time.perf_counter() - start
    print(f"{len(turns)} turns, {len(memory.messages())} messages in {elapsed:.1f} s")
    """),
    md("""
    ## Look at each tier

    `stats()` is a snapshot of the session: every message is in the journal, only the newest whole turns are
    in the window, and the summary cursor says how far the rolling summary has read.
    """),
    code("""
    stats = memory.stats()
    for field in ("messages", "window_messages", "window_tokens", "summary_tokens", "summary_cursor",
                  "pending_summary_messages", "records", "index_pending"):
        print(f"{field:>26}: {getattr(stats, field)}")
    """),
    md("""
    **Window**: the newest whole turns. A tool call always travels with its result, and the current user turn
    is never evicted.
    """),
    code("""
    for m in memory.window()[-8:]:
        text = m.text or ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        print(f"#{m.id:<4} {m.role:>9}: {text[:90]}")
    """),
    md("""
    **Rolling summary**: what left the window, folded in incrementally and kept under `summary_tokens`.
    Offline it is extractive (sentences picked from the evicted turns); give `TieredMemory.open` a
    `summarizer=` (e.g. `langmem_tiers.summarizers.openai.OpenAISummarizer`) for an abstractive one.
    """),
    code("""
    print(f"{stats.summary_tokens} tokens (cap {config.summary_tokens}):\\n")
    print(memory.summary)
    """),
    md("""
    **Context**: one budget shared by pinned memories, the summary, recalled turns and the window.
    `explain()` accounts for every token and for what was left out; `to_openai()` is ready for any
    chat-completions API (the first message carries the memory).
    """),
    code("""
    context = memory.context()
    print(context.explain())
    print()
    first = context.to_openai()[0]
    print(first["role"], "message, first 600 characters:\\n")
    print(first["content"][:600])
    """),
    md("""
    ## Tokens per tier, turn by turn

    The window grows until it crosses its high-water mark, then evicts whole turns down to the low-water
    mark: the saw-tooth. The summary grows as evicted turns are folded in and stays under its cap; recall
    adds the turns found for each new user message. The total stays under the budget line.
    """),
    code("""
    x = range(1, len(rows) + 1)
    series = {tier: [r[tier] for r in rows] for tier in ("window", "summary", "recall", "pinned")}
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.stackplot(x, series["window"], series["summary"], series["recall"], series["pinned"],
                 labels=["window", "summary", "recall", "pinned"], alpha=0.8)
    ax.plot(x, [r["total"] for r in rows], color="black", linewidth=1, label="total (with message framing)")
    ax.axhline(config.context_tokens, color="red", linestyle="--", label=f"budget ({config.context_tokens})")
    ax.axhline(config.window_tokens, color="gray", linestyle=":", label=f"window high-water ({config.window_tokens})")
    for i in range(1, len(rows)):
        if rows[i]["session"] != rows[i - 1]["session"]:
            ax.axvline(i + 0.5, color="lightgray", linewidth=0.8)
    ax.set_xlabel("turn (vertical lines: a new session)")
    ax.set_ylabel("tokens in the context")
    ax.set_title("Tokens per tier when each user message arrives")
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    ax.set_ylim(0, config.context_tokens * 1.15)
    plt.show()
    assert all(r["total"] <= config.context_tokens for r in rows)
    """),
    md("""
    ## Ask about turns that left the window long ago

    Each question below is about a fact the user mentioned sessions ago; that turn is no longer in the
    window. `search()` returns recall hits with the parts of their score: the keyword rank (FTS5/bm25), the
    vector rank (MiniLM in Chroma), the fused reciprocal-rank score `rrf`, and the recency and importance
    factors that weigh it into `score`. A `-` rank means that side did not find the turn. The scripted
    conversation is dated from March 2026, so by the time you run this the recency and importance factors
    have decayed towards 0 and `score` is close to `rrf`. A question that shares no word with its fact
    (the car: "pick" against "chose", and the fact never says "car") rests on the vector side alone.
    """),
    code("""
    window_ids = {m.id for m in memory.window()}

    def rank(value):
        return "-" if value is None else str(int(value))

    found = 0
    for question, fact in QUESTIONS:
        hits = memory.search(question, k=3)
        ok = any(FACTS[fact][0] in h.text for h in hits)
        found += ok
        print(f"Q: {question}   {'found' if ok else 'not found'} in the top 3")
        for h in hits:
            p = h.parts
            in_window = "in window" if set(h.message_ids) & window_ids else "evicted"
            print(f"   {h.score:.4f}  kw {rank(p['keyword_rank']):>2}  vec {rank(p['vector_rank']):>2}  "
                  f"rrf {p['rrf']:.4f}  recency {p['recency']:.2f}  importance {p['importance']:.2f}  "
                  f"[{in_window}] {h.text[:70]!r}")
    print(f"\\n{found}/{len(QUESTIONS)} facts recalled in the top 3")
    """),
    md("""
    In a conversation, recall happens inside `context()`: it searches for the latest user message, never
    repeats what is already in the window, and places the hits in the memory message within `recall_tokens`.
    Here the user asks about the wedding:
    """),
    code("""
    memory.add("user", "When and where is Lena's wedding again?")
    context = memory.context()
    print(context.explain())
    for hit in context.recalled:
        print(f"- recalled record {hit.record_id} (messages {list(hit.message_ids)}): {hit.text[:100]!r}")
    assert any("Porto" in hit.text for hit in context.recalled)
    """),
    md("""
    ## Pinned memories and persistence

    `remember(..., pinned=True)` stores an explicit memory that is always in the context (highest priority
    after the current turn). Everything is in the journal: close the memory, reopen the folder, and the
    session is whole.
    """),
    code("""
    memory.remember("Allergic to peanuts: never suggest recipes with them.", kind="fact", pinned=True)
    print(memory.context().explain())
    count = len(memory.messages())
    memory.close()

    with TieredMemory.open(folder, session_id="quickstart", user_id="ada", config=config) as reopened:
        assert len(reopened.messages()) == count
        print(f"reopened: {count} messages, summary of {reopened.stats().summary_tokens} tokens, "
              f"window of {len(reopened.window())} messages")
    """),
]


# --- 02 LangChain ----------------------------------------------------------------------------

MODEL_RULE_LC = code('''
    import importlib.util
    import os
    import re

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult


    def answer_from(question, texts):
        """How the fake answers: a question naming someone or somewhere gets the earlier line that names them."""
        names = re.findall(r"\\b[A-Z][a-z]{2,}", question)[1:]  # capitalised words after the first one
        if not question.endswith("?") or not names:
            return f"Here is my answer to: {question[:60]}" if question.endswith("?") else "Noted."
        for text in texts:
            for line in text.splitlines():
                if any(n in line for n in names):
                    line = re.sub(r"^- \\[[^\\]]*\\] ", "", line.strip())
                    return "From what I remember: " + re.sub(r"^(user|assistant): ", "", line)
        return "I don't remember that."


    class ScriptedChatModel(BaseChatModel):
        """A deterministic stand-in for a tool-calling chat model.

        It calls ``get_weather`` when the latest user message asks about the weather (as a real model
        would), answers from a tool result, and answers a question about someone or somewhere from what it
        finds in its input (the window, or the summary and recalled turns that langmem-tiers adds).
        """

        @property
        def _llm_type(self) -> str:
            return "scripted-fake"

        def bind_tools(self, tools, **kwargs):
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            last = messages[-1]
            if isinstance(last, ToolMessage):
                reply = AIMessage(f"The forecast: {last.text}")
            else:
                text = last.text if isinstance(last, HumanMessage) else ""
                city = re.search(r"weather in (\\w+)", text, re.IGNORECASE)
                if city:
                    call = {"name": "get_weather", "args": {"city": city.group(1)}, "id": f"call_{len(messages)}",
                            "type": "tool_call"}
                    reply = AIMessage("", tool_calls=[call])
                else:
                    reply = AIMessage(answer_from(text, [m.text for m in messages[:-1]]))
            return ChatResult(generations=[ChatGeneration(message=reply)])


    def make_model():
        """A real OpenAI model when OPENAI_API_KEY is set and langchain-openai is installed, else the fake."""
        if os.environ.get("OPENAI_API_KEY") and importlib.util.find_spec("langchain_openai"):
            from langchain.chat_models import init_chat_model

            return init_chat_model("openai:gpt-4o-mini", temperature=0), "OpenAI gpt-4o-mini"
        return ScriptedChatModel(), "ScriptedChatModel (offline fake; set OPENAI_API_KEY for gpt-4o-mini)"


    model, model_name = make_model()
    print("model:", model_name)
''')

LANGCHAIN = [
    md("""
    # langmem-tiers with LangChain

    Two ways to give a LangChain app durable, token-budgeted memory:

    1. **Chains**: `RunnableWithMessageHistory` with `TieredChatMessageHistory` (a `BaseChatMessageHistory`);
    2. **Agents**: `langchain.agents.create_agent` with `TieredMemoryMiddleware`, here with a tool.

    The model is `gpt-4o-mini` when `OPENAI_API_KEY` is set and `langchain-openai` is installed; otherwise a
    small deterministic fake that behaves like a tool-calling model (it asks for the weather tool when asked
    about the weather), so the notebook runs offline. The next cell prints which one runs.
    """),
    MODEL_RULE_LC,
    code("""
    import tempfile

    from langmem_tiers import MemoryConfig
    from langmem_tiers.cli.conversation import SMALL_TALK

    # Small budgets so a short conversation evicts, summarizes and recalls.
    config = MemoryConfig(context_tokens=900, window_tokens=300, summary_tokens=120, recall_tokens=250,
                          recall_k=3)
    """),
    md("""
    ## 1. A chain with `RunnableWithMessageHistory`

    `TieredChatMessageHistory.factory(path)` returns a `session_id -> history` function; all sessions share
    one journal and one vector store. The history's `messages` is the *budgeted context*: a memory message
    (summary and recalled turns) followed by the window, so the prompt stays small however long the chat gets.
    """),
    code("""
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from langchain_langmem_tiers import TieredChatMessageHistory

    get_history = TieredChatMessageHistory.factory(tempfile.mkdtemp(prefix="langmem-lc-"), user_id="ada",
                                                   config=config)
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are a helpful assistant."),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ])
    chain = RunnableWithMessageHistory(prompt | model, get_history, input_messages_key="question",
                                       history_messages_key="history")
    session = {"configurable": {"session_id": "chain-1"}}

    print(chain.invoke({"question": "My sister Lena is getting married in Porto on the 14th of June."},
                       session).content)
    for ask, _ in SMALL_TALK[:10]:
        chain.invoke({"question": ask}, session)
    """),
    md("""
    The journal holds every message; the history served to the chain is the budgeted context. The wedding
    left the window long ago and is now in the summary (and in the recall index):
    """),
    code("""
    history = get_history("chain-1")
    full = history.memory.messages()
    print(f"journal: {len(full)} messages; context served to the chain: {len(history.messages)} messages")
    print(history.last_context.explain())
    print()
    print(history.messages[0].content[:500])
    """),
    md("""
    `RunnableWithMessageHistory` reads the history before it knows the new question, so its recall is keyed on
    the last stored user message. For recall on the current question, ask the history directly with
    `context_messages(query)` (or use the agent middleware below, which recalls for each new user message).
    `history.memory` is the `TieredMemory` behind the history; its `context(query)` gives the same context with
    its account:
    """),
    code("""
    question = "When is Lena's wedding?"
    messages = history.context_messages(question)  # what a chain would get: recall keyed on the question
    context = history.memory.context(question)  # the same context, with its account
    print(context.explain())
    for hit in context.recalled:
        print("recalled:", hit.text[:100])
    assert any("Lena" in hit.text for hit in context.recalled)
    print()
    answer = chain.invoke({"question": question}, session).content
    print("answer:", answer)
    get_history.close()
    """),
    md("""
    ## 2. An agent with `TieredMemoryMiddleware` and a tool

    One `thread_id` is one session. The middleware journals every message that enters the agent state (user
    input, model replies, tool calls and results) and replaces the model input with the budgeted context:
    the window of recent whole turns (a tool call always travels with its result), with pinned facts, the
    summary and turns recalled for the latest user message appended to the system prompt. Without a
    checkpointer, pass only the new message each call: the journal supplies the rest.
    """),
    code("""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from langchain_langmem_tiers import TieredMemoryMiddleware


    @tool
    def get_weather(city: str) -> str:
        \"\"\"The current weather of a city.\"\"\"
        return f"18C and sunny in {city}"


    middleware = TieredMemoryMiddleware(tempfile.mkdtemp(prefix="langmem-agent-"), config=config, user_id="ada")
    agent = create_agent(model, tools=[get_weather], middleware=[middleware],
                         system_prompt="You are a helpful assistant.")
    thread = {"configurable": {"thread_id": "agent-1"}}

    def ask(text):
        out = agent.invoke({"messages": [("user", text)]}, thread)
        return out["messages"][-1].text

    print(ask("My sister Lena is getting married in Porto on the 14th of June."))
    print(ask("What's the weather in Porto?"))
    for question, _ in SMALL_TALK[:10]:
        ask(question)
    """),
    md("""
    The tool call and its result were journaled with the turn; the small talk pushed the early turns out of
    the window. Now a question about the wedding: the middleware recalls the evicted turn into the system
    message of the model input.
    """),
    code("""
    memory = middleware.memory_for("agent-1")
    for m in memory.messages()[:6]:
        text = m.text or ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        print(f"{m.role:>9}: {text[:80]}")
    print()
    answer = ask("When and where is Lena's wedding?")
    print(middleware.last_context.explain())
    for hit in middleware.last_context.recalled:
        print("recalled:", hit.text[:100])
    print()
    print("answer:", answer)
    assert any("Lena" in hit.text for hit in middleware.last_context.recalled)
    """),
    code("""
    print(memory.stats())
    middleware.close()
    """),
]


# --- 03 LlamaIndex ---------------------------------------------------------------------------

LLAMAINDEX = [
    md("""
    # langmem-tiers with LlamaIndex

    1. `TieredChatMemory` (a `BaseMemory`) as `memory=` of a chat engine (`SimpleChatEngine`) and of a
       `FunctionAgent` with a tool;
    2. `TieredMemoryBlock` as a block of LlamaIndex's own `Memory`.

    The model is OpenAI `gpt-4o-mini` when `OPENAI_API_KEY` is set and `llama-index-llms-openai` is installed.
    Otherwise it is LlamaIndex's `MockFunctionCallingLLM` with a small deterministic script that behaves like
    a function-calling model (it calls the weather tool when asked about the weather, answers from the tool
    result, and answers from its input otherwise), so the notebook runs offline. The next cell prints which.
    """),
    code("""
    import importlib.util
    import os
    import re
    import tempfile

    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.base.llms.types import ToolCallBlock

    from langmem_tiers import MemoryConfig
    from langmem_tiers.cli.conversation import SMALL_TALK


    def answer_from(question, texts):
        \"\"\"How the fake answers: a question naming someone or somewhere gets the earlier line that names them.\"\"\"
        names = re.findall(r"\\b[A-Z][a-z]{2,}", question)[1:]  # capitalised words after the first one
        if not question.endswith("?") or not names:
            return f"Here is my answer to: {question[:60]}" if question.endswith("?") else "Noted."
        for text in texts:
            for line in text.splitlines():
                if any(n in line for n in names):
                    line = re.sub(r"^- \\[[^\\]]*\\] ", "", line.strip())
                    return "From what I remember: " + re.sub(r"^(user|assistant): ", "", line)
        return "I don't remember that."


    def scripted_reply(messages, **kwargs):
        \"\"\"What a function-calling model would do, deterministically.\"\"\"
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content=f"The forecast: {last.content}")
        text = str(last.content or "")
        city = re.search(r"weather in (\\w+)", text, re.IGNORECASE)
        if city and kwargs.get("tools"):
            call = ToolCallBlock(tool_call_id=f"call-{len(messages)}", tool_name="get_weather",
                                 tool_kwargs={"city": city.group(1)})
            return ChatMessage(role="assistant", blocks=[call])
        return ChatMessage(role="assistant", content=answer_from(text, [str(m.content or "") for m in messages[:-1]]))


    def make_llm():
        if os.environ.get("OPENAI_API_KEY") and importlib.util.find_spec("llama_index.llms.openai"):
            from llama_index.llms.openai import OpenAI

            return OpenAI(model="gpt-4o-mini", temperature=0), "OpenAI gpt-4o-mini"
        llm = MockFunctionCallingLLM(response_generator=scripted_reply, is_chat_model=True)
        return llm, "MockFunctionCallingLLM with a scripted reply (offline; set OPENAI_API_KEY for gpt-4o-mini)"


    llm, llm_name = make_llm()
    print("model:", llm_name)

    # Small budgets so a short conversation evicts, summarizes and recalls.
    config = MemoryConfig(context_tokens=900, window_tokens=300, summary_tokens=120, recall_tokens=250,
                          recall_k=3)
    folder = tempfile.mkdtemp(prefix="langmem-li-")
    """),
    md("""
    ## 1. A chat engine with `TieredChatMemory`

    `TieredChatMemory.from_defaults(path=..., session_id=...)` opens one session. `get()` returns the budgeted
    history (a memory message with the summary and turns recalled for the new input, then the window), and
    `put()` journals every message durably.
    """),
    code("""
    from llama_index.core.chat_engine import SimpleChatEngine

    from llama_index.memory.langmem_tiers import TieredChatMemory

    chat_memory = TieredChatMemory.from_defaults(path=folder, session_id="engine-1", user_id="ada", config=config)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=chat_memory, system_prompt="You are a helpful assistant.")

    print(engine.chat("My sister Lena is getting married in Porto on the 14th of June."))
    for question, _ in SMALL_TALK[:10]:
        engine.chat(question)
    stats = chat_memory.tiered.stats()
    print(f"journal: {stats.messages} messages; window: {stats.window_messages} messages; "
          f"summary: {stats.summary_tokens} tokens")
    """),
    md("""
    The first turn left the window long ago. Asking about it, the memory recalls the evicted turn for the
    new input and places it in the memory message the engine sends first; `last_context.explain()` accounts
    for the tokens of each tier.
    """),
    code("""
    response = engine.chat("When and where is Lena's wedding?")
    context = chat_memory.last_context
    print(context.explain())
    for hit in context.recalled:
        print("recalled:", hit.text[:100])
    print()
    print("answer:", response)
    assert any("Lena" in hit.text for hit in context.recalled)
    """),
    md("""
    ## 2. A `FunctionAgent` with a tool

    Pass the memory to `agent.run(..., memory=...)`. Tool calls and their results are journaled with their
    turn and never split from it when the window evicts.
    """),
    code("""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool


    def get_weather(city: str) -> str:
        \"\"\"The current weather of a city.\"\"\"
        return f"18C and sunny in {city}"


    agent_memory = TieredChatMemory.from_defaults(path=folder, session_id="agent-1", user_id="ada", config=config)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm,
                          system_prompt="You are a helpful assistant.")

    print(await agent.run(user_msg="My sister Lena is getting married in Porto on the 14th of June.",
                          memory=agent_memory))
    print(await agent.run(user_msg="What's the weather in Porto?", memory=agent_memory))
    for question, _ in SMALL_TALK[:8]:
        await agent.run(user_msg=question, memory=agent_memory)

    for m in agent_memory.get_all()[:6]:
        calls = [f"{b.tool_name}({b.tool_kwargs})" for b in m.blocks if isinstance(b, ToolCallBlock)]
        print(f"{m.role.value:>9}: {(str(m.content or '') or ', '.join(calls))[:80]}")
    """),
    code("""
    answer = await agent.run(user_msg="When and where is Lena's wedding?", memory=agent_memory)
    print(agent_memory.last_context.explain())
    for hit in agent_memory.last_context.recalled:
        print("recalled:", hit.text[:100])
    assert any("Lena" in hit.text for hit in agent_memory.last_context.recalled)
    print()
    print("answer:", answer)
    """),
    md("""
    ## 3. `TieredMemoryBlock` inside LlamaIndex's `Memory`

    If you already use LlamaIndex's `Memory` (a short-term FIFO queue plus long-term memory blocks), add a
    `TieredMemoryBlock`: messages flushed out of the short-term queue go into the journal, and the block
    renders the summary, turns recalled for the latest user message and the recent flushed turns. With
    `session_id=None` the block follows the `Memory`'s own session id.
    """),
    code("""
    from llama_index.core.memory import Memory

    from llama_index.memory.langmem_tiers import TieredMemoryBlock

    block = TieredMemoryBlock(path=folder, user_id="ada", config=config, priority=1)
    li_memory = Memory.from_defaults(session_id="block-1", memory_blocks=[block], token_limit=500,
                                     token_flush_size=100, chat_history_token_ratio=0.4)

    li_memory.put(ChatMessage(role="user", content="My sister Lena is getting married in Porto on the 14th of June."))
    li_memory.put(ChatMessage(role="assistant", content="Congratulations to Lena!"))
    for question, answer in SMALL_TALK:
        li_memory.put(ChatMessage(role="user", content=question))
        li_memory.put(ChatMessage(role="assistant", content=answer))

    messages = li_memory.get(input="When is Lena's wedding?")
    stats = block.memory_for("block-1").stats()
    print(f"the block's journal: {stats.messages} flushed messages, {stats.window_messages} in its window, "
          f"summary of {stats.summary_tokens} tokens")
    print(f"Memory.get() returned {len(messages)} messages; the first one carries the blocks:\\n")
    print(messages[0].content[:1500])
    """),
    code("""
    for closing in (chat_memory, agent_memory, block):
        closing.close()
    """),
]


# --- 04 evaluation ---------------------------------------------------------------------------

EVALUATION = [
    md("""
    # Evaluating recall on LoCoMo

    LoCoMo conversations are long multi-session chats with questions whose answers sit in specific turns
    (the *evidence*). The harness (`langmem_tiers.eval`) ingests each conversation into a fresh store, asks
    every question once and scores **recall@k**: the share of a question's evidence turns found among the
    top-k retrieved units. It compares langmem-tiers (`ours`: `TieredMemory.add` per turn with a 256-token
    window, so almost everything is evicted and must come back through `search()`) with two baselines over
    single turns: **bm25** (bm25s) and **dense** (exact cosine over the same local MiniLM embeddings, so only
    the retrieval method differs). Category 5 (adversarial, no evidence) is not scored.

    The next cell holds the parameters: the data file (relative to this notebook's folder), how many
    conversations to run (one takes about a minute), the cut-offs k and the retrievers.
    """),
    params("""
    DATA = "../../shared/data/locomo/locomo_dev.json"  # the official LoCoMo format; relative to this folder
    LIMIT = 1  # conversations; None for all of them
    K = [5, 10, 25]
    RETRIEVERS = ["ours", "bm25", "dense"]
    """),
    md("""
    ## The data

    The benchmark data is not part of the repository. When `DATA` is absent, the next cell writes a tiny
    synthetic conversation in the official format to a temporary folder and says so: its numbers only show
    that the pipeline runs, they say nothing about quality.
    """),
    code("""
    %matplotlib inline
    import json
    import tempfile
    import time
    from pathlib import Path

    import matplotlib.pyplot as plt

    from langmem_tiers.eval import get_retriever, load_locomo, run_benchmark
    from langmem_tiers.eval.retrievers import make_embedder

    # Jupyter (and the test suite) start the kernel in the notebook's folder.
    here = Path.cwd()
    data = (here / DATA).resolve()


    def synthetic_locomo(folder):
        \"\"\"A small conversation in the official locomo10.json format, with questions and evidence.\"\"\"
        facts = {
            (1, 2): ("Ann", "I adopted a golden retriever puppy named Biscuit last weekend."),
            (1, 5): ("Bob", "I started violin lessons with a teacher called Mrs. Ito."),
            (2, 3): ("Ann", "Biscuit chewed my kayak paddle, so I bought a new one in Porto."),
            (2, 6): ("Bob", "Mrs. Ito is moving to Lisbon in August, sadly."),
            (3, 4): ("Ann", "We are running the Lisbon half marathon together in October."),
        }
        filler = ["How was your week?", "Pretty busy at work, honestly.", "Did you watch the match?",
                  "Yes, what a finish!", "Any plans for the weekend?", "Just relaxing at home.",
                  "I tried a new pasta recipe.", "Nice, send me the recipe!"]
        dates = ["1:56 pm on 8 May, 2023", "10:04 am on 19 June, 2023", "9:00 am on 1 July, 2023"]
        conversation = {"speaker_a": "Ann", "speaker_b": "Bob"}
        for s in (1, 2, 3):
            conversation[f"session_{s}_date_time"] = dates[s - 1]
            turns = []
            for t in range(1, 9):
                speaker, text = facts.get((s, t), ("Ann" if t % 2 else "Bob", filler[(s + t) % len(filler)]))
                turns.append({"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text})
            conversation[f"session_{s}"] = turns
        qa = [
            {"question": "What is the name of Ann's dog?", "answer": "Biscuit", "evidence": ["D1:2"], "category": 4},
            {"question": "Where is Bob's violin teacher moving?", "answer": "Lisbon",
             "evidence": ["D1:5", "D2:6"], "category": 1},
            {"question": "When are Ann and Bob running the half marathon?", "answer": "October",
             "evidence": ["D3:4"], "category": 2},
            {"question": "What did Biscuit chew?", "answer": "a kayak paddle", "evidence": ["D2:3"], "category": 3},
            {"question": "What is the name of Bob's cat?", "adversarial_answer": "Biscuit", "evidence": [],
             "category": 5},
        ]
        path = Path(folder) / "locomo_synthetic.json"
        path.write_text(json.dumps([{"sample_id": "synthetic-1", "conversation": conversation, "qa": qa}]))
        return path


    if data.exists():
        print("LoCoMo file:", data)
    else:
        data = synthetic_locomo(tempfile.mkdtemp(prefix="locomo-synthetic-"))
        print(f"{DATA} is absent: using a tiny SYNTHETIC conversation in the official format ({data}).")
        print("Its scores only show that the pipeline runs; point DATA at the real file for meaningful numbers.")
        print("(So short a conversation mostly fits the 256-token window of 'ours', and search() does not return "
              "turns that are still in the window.)")

    haystacks = load_locomo(data, LIMIT)
    for hay in haystacks:
        scored = sum(q.excluded is None for q in hay.questions)
        print(f"{hay.hid}: {len(hay.sessions)} sessions, {hay.n_messages} messages, {scored} questions scored "
              f"(of {len(hay.questions)})")
    """),
    md("""
    ## Run the retrievers

    `run_benchmark` builds a fresh store per conversation, ingests every message, asks every question once with
    the largest k and scores the smaller cut-offs from the same ranking. The embedding retrievers share one
    MiniLM model (loaded once here), so the comparison is about retrieval, not embeddings.
    """),
    code("""
    embedder = make_embedder()
    results = {}
    for name in RETRIEVERS:
        spec = get_retriever(name, lambda: embedder)
        start = time.perf_counter()
        results[name] = run_benchmark("locomo", haystacks, spec, K, progress=False)
        print(f"{name:>6}: {time.perf_counter() - start:5.1f} s, query p50 {results[name]['latency_ms']['p50']} ms, "
              f"{results[name]['counts']['messages_per_unit']} messages per unit")
    """),
    md("""
    ## Recall@k by category

    One row per retriever and cut-off, per LoCoMo category (the number of questions in brackets). LoCoMo
    numbers its categories; by the usual reading 1 is multi-hop, 2 temporal, 3 open-domain and 4 single-hop.
    `messages per unit` matters when comparing: a unit of `ours` is a recall hit that covers a whole turn
    (a user message and its reply: several LoCoMo messages), while these baselines return single messages.
    """),
    code("""
    first = results[RETRIEVERS[0]]
    categories = list(first["by_category"])
    counts = first["counts"]["by_category"]
    header = f"{'retriever':>9} {'k':>3} " + " ".join(f"{c + ' (' + str(counts[c]) + ')':>9}" for c in categories)
    print(header + f" {'overall':>9}")
    for name, result in results.items():
        for k in K:
            metric = f"recall@{k}"
            cells = " ".join(f"{result['by_category'][c][metric]:>9.3f}" for c in categories)
            print(f"{name:>9} {k:>3} {cells} {result['overall'][metric]:>9.3f}")
    """),
    code("""
    groups = categories + ["overall"]
    width = 0.8 / len(results)
    fig, axes = plt.subplots(1, len(K), figsize=(4.2 * len(K), 3.8), sharey=True)
    axes = [axes] if len(K) == 1 else list(axes)
    for ax, k in zip(axes, K):
        metric = f"recall@{k}"
        for i, (name, result) in enumerate(results.items()):
            values = [result["by_category"][c][metric] for c in categories] + [result["overall"][metric]]
            ax.bar([g + (i - (len(results) - 1) / 2) * width for g in range(len(groups))], values, width,
                   label=f"{name} ({result['counts']['messages_per_unit']} messages/unit)")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"cat {c}" if c != "overall" else c for c in groups])
        ax.set_title(metric)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("evidence recall")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"LoCoMo recall@k by category ({data.name}, {len(haystacks)} conversation(s))")
    fig.tight_layout()
    plt.show()
    """),
    md("""
    ## Reproduce from the command line

    The same harness runs from the CLI and writes the JSON that the project's benchmark tables come from:

    ```bash
    langmem-tiers eval locomo --data ../shared/data/locomo/locomo_dev.json --k 5,10,25 --retriever ours
    ```

    `main_eval(...)` is the function behind it; `run_benchmark(...)` (used above) is the part that takes
    already loaded conversations. Raise `LIMIT` (or set it to `None`) for the whole file.
    """),
]


NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_langchain.ipynb": LANGCHAIN,
    "03_llamaindex.ipynb": LLAMAINDEX,
    "04_evaluation.ipynb": EVALUATION,
}


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """One notebook, without outputs, with stable cell ids so regenerating it changes nothing."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    stem = name.split("_", 1)[0]
    for i, (kind, source) in enumerate(cells):
        cell_id = f"c{stem}-{i:02d}"
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(source, id=cell_id)
        else:
            cell = nbformat.v4.new_code_cell(source, id=cell_id)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(name: str) -> str:
    return nbformat.writes(build(name, NOTEBOOKS[name])) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name in NOTEBOOKS:
        path = HERE / name
        text = render(name)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print("wrote", path.relative_to(HERE.parent))
    if stale:
        print("out of date (run python notebooks/build.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
