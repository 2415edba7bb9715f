"""Compare memory strategies on one scripted conversation, with a counting fake LLM.

Systems (same budgets: ~300-token window, 120-token summary cap):
  * ConversationSummaryBufferMemory (langchain-classic) in a ConversationChain
  * SummarizationMiddleware (langchain) in create_agent with a checkpointer
  * TieredMemoryMiddleware (langchain-langmem-tiers) in create_agent, LLM summaries
    through ChatModelSummarizer, keyword recall (embedder=False, for a fast offline run)

The fake LLM is deterministic: a summarization prompt is answered with the newest
``fact-N`` lines of its input that fit the 120-token cap (a capped summary loses old
detail, as real ones do); any other prompt gets a one-line reply. Tokens are counted
with tiktoken cl100k_base over the text of every message sent.

Run: .venv/bin/python benchmarks/langchain_compare.py [--turns 40]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import warnings
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, get_buffer_string
from langchain_core.outputs import ChatGeneration, ChatResult

from langmem_tiers import MemoryConfig, TiktokenCounter

COUNTER = TiktokenCounter.for_model(None)
SUMMARY_CAP = 120
WINDOW = 300
FACT = re.compile(r"fact-(\d+): the code for item \d+ is (K\d+)")


def count(text: str) -> int:
    return COUNTER.count_text(text)


class CountingLLM(BaseChatModel):
    """Counts calls and input tokens; summarizes extractively under a token cap."""

    calls: int = 0
    tokens: int = 0
    last_input: str = ""

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> CountingLLM:
        return self

    def get_num_tokens(self, text: str) -> int:
        return count(text)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        text = "\n".join(m.text for m in messages)
        self.calls += 1
        self.tokens += count(text)
        self.last_input = text
        if "summar" in text.lower() and "fact-" in text:
            facts = list(dict.fromkeys(f"fact-{n}: the code for item {n} is {c}" for n, c in FACT.findall(text)))
            kept: list[str] = []
            for fact in reversed(facts):  # newest first until the cap
                if count("\n".join([fact, *kept])) > SUMMARY_CAP:
                    break
                kept.insert(0, fact)
            reply = "\n".join(kept) or "nothing"
        else:
            reply = "Understood, noted."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def script(turns: int) -> list[str]:
    lines = [f"Please remember fact-{i}: the code for item {i} is K{(i * 37) % 1000:03d}." for i in range(turns)]
    return [*lines, "What was the code for item 3?"]


def facts_in(text: str) -> set[int]:
    return {int(n) for n, _ in FACT.findall(text)}


def run_summary_buffer(turns: list[str]) -> dict[str, Any]:
    from langchain_classic.chains import ConversationChain
    from langchain_classic.memory import ConversationSummaryBufferMemory

    chat, summarizer = CountingLLM(), CountingLLM()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = ConversationSummaryBufferMemory(llm=summarizer, max_token_limit=WINDOW)
        chain = ConversationChain(llm=chat, memory=memory)
        for text in turns:
            chain.invoke({"input": text})
    kept = len(memory.chat_memory.messages)
    return _result(
        "ConversationSummaryBufferMemory",
        chat,
        summarizer,
        turns,
        stored=kept,
        summary=memory.moving_summary_buffer,
        window_text=get_buffer_string(memory.chat_memory.messages),
    )


def run_summarization_middleware(turns: list[str]) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    chat, summarizer = CountingLLM(), CountingLLM()

    def counter(messages: Any) -> int:
        return sum(count(m.text) + 4 for m in messages)

    middleware = SummarizationMiddleware(
        model=summarizer, trigger=("tokens", WINDOW + 100), keep=("tokens", WINDOW), token_counter=counter
    )
    agent = create_agent(chat, middleware=[middleware], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    for text in turns:
        state = agent.invoke({"messages": [HumanMessage(text)]}, cfg)
    messages = state["messages"]
    summary = next((m.text for m in messages if "summary of the conversation" in m.text.lower()), "")
    originals = [m for m in messages if m.text != summary]
    return _result(
        "SummarizationMiddleware",
        chat,
        summarizer,
        turns,
        stored=len(originals),
        summary=summary,
        window_text="\n".join(m.text for m in originals),
    )


def run_tiered(turns: list[str]) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_langmem_tiers import ChatModelSummarizer, TieredMemoryMiddleware

    chat, summarizer = CountingLLM(), CountingLLM()
    config = MemoryConfig(
        context_tokens=700,
        window_tokens=WINDOW + 100,
        window_low_ratio=0.6,
        summary_tokens=SUMMARY_CAP,
        recall_tokens=150,
        recall_k=3,
    )
    middleware = TieredMemoryMiddleware(
        tempfile.mkdtemp(), config=config, embedder=False, summarizer=ChatModelSummarizer(summarizer)
    )
    agent = create_agent(chat, middleware=[middleware])  # no checkpointer: the journal is the history
    cfg = {"configurable": {"thread_id": "t"}}
    for text in turns:
        agent.invoke({"messages": [HumanMessage(text)]}, cfg)
    memory = middleware.memory_for("t")
    window = "\n".join(m.text for m in memory.window())
    result = _result(
        "TieredMemoryMiddleware",
        chat,
        summarizer,
        turns,
        stored=len(memory.messages()),
        summary=memory.summary,
        window_text=window,
    )
    middleware.close()
    return result


def _result(
    name: str,
    chat: CountingLLM,
    summarizer: CountingLLM,
    turns: list[str],
    *,
    stored: int,
    summary: str,
    window_text: str,
) -> dict[str, Any]:
    total_messages = 2 * len(turns)
    all_facts = set(range(len(turns) - 1))
    out_of_window = all_facts - facts_in(window_text)
    return {
        "system": name,
        "llm_calls": chat.calls + summarizer.calls,
        "summary_calls": summarizer.calls,
        "tokens_to_model": chat.tokens,
        "tokens_to_summarizer": summarizer.tokens,
        "messages_lost": total_messages - stored,
        "facts_dropped_from_summary": len(out_of_window - facts_in(summary)),
        "final_answer_in_input": "K111" in chat.last_input,  # item 3's code: 3 * 37 = 111
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    turns = script(args.turns)
    rows = [run_summary_buffer(turns), run_summarization_middleware(turns), run_tiered(turns)]
    cols = list(rows[0])
    print(f"{len(turns)} user turns ({2 * len(turns)} messages), window ~{WINDOW} tokens, summary cap {SUMMARY_CAP}")
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))


if __name__ == "__main__":
    main()
