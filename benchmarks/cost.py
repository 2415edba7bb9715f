"""Summarizer cost per 100 turns: ours against the incumbents, on the same conversation.

    .venv/bin/python benchmarks/cost.py [--window 2000] [--sessions 8 --turns 40]

The demo conversation (320 turns, tool calls included; ``langmem_tiers.cli.conversation``)
flows through each memory with the same window budget and the same counting fake LLM:

* langmem-tiers ``TieredMemory`` (window ``--window`` tokens, evicting to 60%, summary cap 400)
* LangChain ``ConversationSummaryBufferMemory`` (``max_token_limit=--window``)
* LangChain ``SummarizationMiddleware`` (``trigger=("tokens", --window)``, ``keep=("tokens", 0.6 * --window)``),
  driven through its ``before_model`` hook once per model call, as ``create_agent`` does
* LlamaIndex ``ChatSummaryMemoryBuffer`` (``token_limit=--window``), ``get()`` once per turn as a chat engine does

The fake LLM counts calls and prompt tokens (tiktoken cl100k_base) and answers with the
last 300 tokens of its prompt, so summaries stay bounded the same way for everyone.
Frameworks without tool messages get the user text and the final answer of each turn.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory, TiktokenCounter
from langmem_tiers.cli.conversation import Turn, demo_turns
from langmem_tiers.summarizers.callable import CallableSummarizer

COUNTER = TiktokenCounter.for_model(None)
REPLY_TOKENS = 300


class Meter:
    """Counts LLM calls and prompt tokens; replies with the tail of the prompt."""

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        self.tokens += COUNTER.count_text(prompt)
        words = prompt.split()
        return " ".join(words[-REPLY_TOKENS // 2:]) or "summary"


def text_pairs(turns: list[Turn]) -> list[tuple[str, str]]:
    pairs = []
    for turn in turns:
        user = next(m["content"] for m in turn.messages if m["role"] == "user")
        answer = [m["content"] for m in turn.messages if m["role"] == "assistant" and m.get("content")][-1]
        pairs.append((user, answer))
    return pairs


def run_ours(turns: list[Turn], window: int) -> dict[str, Any]:
    meter = Meter()
    config = MemoryConfig(context_tokens=window * 2, window_tokens=window, summary_tokens=400, recall_tokens=400)
    with TieredMemory.open(tempfile.mkdtemp(prefix="lt-cost-"), session_id="cost", config=config,
                           summarizer=CallableSummarizer(meter), embedder=False) as memory:
        for turn in turns:
            memory.add_messages(list(turn.messages))
        memory.flush()
        lost = sum(len(t.messages) for t in turns) - len(memory.messages())
    return {"calls": meter.calls, "prompt_tokens": meter.tokens, "messages_lost": lost}


def _langchain_llm(meter: Meter) -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, get_buffer_string
    from langchain_core.outputs import ChatGeneration, ChatResult

    class CountingChat(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "counting-fake"

        def get_num_tokens(self, text: str) -> int:
            return COUNTER.count_text(text)

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            reply = meter(get_buffer_string(messages))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])

    return CountingChat()


def run_summary_buffer(pairs: list[tuple[str, str]], window: int) -> dict[str, Any]:
    from langchain_classic.memory import ConversationSummaryBufferMemory

    meter = Meter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = ConversationSummaryBufferMemory(llm=_langchain_llm(meter), max_token_limit=window)
    for user, answer in pairs:
        memory.load_memory_variables({})  # the chain reads memory before each call
        memory.save_context({"input": user}, {"output": answer})
    kept = len(memory.chat_memory.messages)
    return {"calls": meter.calls, "prompt_tokens": meter.tokens,
            "messages_lost": 2 * len(pairs) - kept, "note": "evicted messages survive only in the summary text"}


def run_summarization_middleware(pairs: list[tuple[str, str]], window: int) -> dict[str, Any]:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

    meter = Meter()
    middleware = SummarizationMiddleware(model=_langchain_llm(meter), trigger=("tokens", window),
                                         keep=("tokens", int(window * 0.6)),
                                         token_counter=lambda ms: sum(COUNTER.count_text(str(m.content)) + 3
                                                                      for m in ms))
    state: list[Any] = []
    for user, answer in pairs:
        state.append(HumanMessage(user))
        update = middleware.before_model({"messages": state}, None)  # type: ignore[arg-type]
        if update:
            state = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
        state.append(AIMessage(answer))
    return {"calls": meter.calls, "prompt_tokens": meter.tokens,
            "messages_lost": 2 * len(pairs) - sum(1 for m in state if m.type != "system") - 0,
            "note": "the agent state keeps only the summary and the kept tail"}


def run_chat_summary_buffer(pairs: list[tuple[str, str]], window: int) -> dict[str, Any]:
    from llama_index.core.base.llms.types import ChatMessage, CompletionResponse, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.llms.custom import CustomLLM
    from llama_index.core.memory import ChatSummaryMemoryBuffer

    meter = Meter()

    class CountingLLM(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=128000, num_output=REPLY_TOKENS)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
            return CompletionResponse(text=meter(prompt))

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            yield self.complete(prompt)

    memory = ChatSummaryMemoryBuffer.from_defaults(llm=CountingLLM(), token_limit=window,
                                                   tokenizer_fn=lambda t: COUNTER._encoding.encode(t))
    for user, answer in pairs:
        memory.put(ChatMessage(role="user", content=user))
        memory.get()
        memory.put(ChatMessage(role="assistant", content=answer))
    stored = len(memory.get_all())
    return {"calls": meter.calls, "prompt_tokens": meter.tokens, "messages_lost": max(2 * len(pairs) - stored, 0),
            "note": "get_all() holds the summary message plus the recent tail"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    turns = list(demo_turns(args.sessions, args.turns))
    pairs = text_pairs(turns)
    results = {
        "langmem-tiers TieredMemory": run_ours(turns, args.window),
        "ConversationSummaryBufferMemory": run_summary_buffer(pairs, args.window),
        "SummarizationMiddleware": run_summarization_middleware(pairs, args.window),
        "ChatSummaryMemoryBuffer": run_chat_summary_buffer(pairs, args.window),
    }
    print(f"{len(turns)} turns, window {args.window} tokens")
    header = ("system", "calls", "calls/100 turns", "prompt tok/100 turns", "msgs not kept verbatim")
    print(f"{header[0]:34} {header[1]:>6} {header[2]:>16} {header[3]:>21} {header[4]:>24}")
    for name, r in results.items():
        r["calls_per_100_turns"] = round(100 * r["calls"] / len(turns), 2)
        r["prompt_tokens_per_100_turns"] = round(100 * r["prompt_tokens"] / len(turns))
        print(f"{name:34} {r['calls']:>6} {r['calls_per_100_turns']:>16} {r['prompt_tokens_per_100_turns']:>21} "
              f"{r['messages_lost']:>24}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"turns": len(turns), "window": args.window, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
