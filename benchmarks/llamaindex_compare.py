"""get() latency, LLM calls and messages lost: TieredChatMemory vs LlamaIndex's memories.

One scripted conversation (alternating user / assistant messages, ~25 tokens each)
is put into each memory; at 500 / 2,000 / 5,000 messages get() is timed (median of
5 calls, or one call when it takes over a second, with the latest user message as input). Summarizing memories get the
same counting MockLLM. "Lost" = messages put that the memory can no longer give
back at all (``get_all()``), not merely those outside the context.

    .venv/bin/python benchmarks/llamaindex_compare.py [--sizes 500 2000 5000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import ChatMemoryBuffer, ChatSummaryMemoryBuffer, Memory
from llama_index.memory.langmem_tiers import TieredChatMemory

from langmem_tiers import MemoryConfig

TOKEN_LIMIT = 4000


class CountingLLM(MockLLM):
    calls: int = 0

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self.calls += 1
        return super().complete(prompt, formatted=formatted, **kwargs)


def script(n: int) -> list[ChatMessage]:
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append(ChatMessage(role="user", content=f"Message {i}: I booked table {i % 17} for {i % 9 + 1} "
                                                        f"people at the riverside restaurant on day {i // 2}."))
        else:
            out.append(ChatMessage(role="assistant", content=f"Noted booking {i - 1}; I will remind you about "
                                                             f"table {i % 17} the evening before day {i // 2}."))
    return out


def build(name: str, llm: CountingLLM) -> Any:
    if name == "TieredChatMemory":
        return TieredChatMemory.from_defaults(path=tempfile.mkdtemp(), session_id="bench", llm=llm, embed_model=False,
                                              config=MemoryConfig(context_tokens=TOKEN_LIMIT))
    if name == "Memory":
        return Memory.from_defaults(session_id="bench", token_limit=TOKEN_LIMIT)
    if name == "ChatSummaryMemoryBuffer":
        return ChatSummaryMemoryBuffer.from_defaults(llm=llm, token_limit=TOKEN_LIMIT)
    return ChatMemoryBuffer.from_defaults(token_limit=TOKEN_LIMIT)


def run(name: str, sizes: list[int]) -> list[tuple[int, float, int, int]]:
    llm = CountingLLM(max_tokens=40)
    memory = build(name, llm)
    messages = script(max(sizes))
    rows, done = [], 0
    for size in sizes:
        for m in messages[done:size]:
            memory.put(m)
            # Like an engine: read the history after each user message (summarizing buffers work in get()).
            if m.role.value == "user" and name == "ChatSummaryMemoryBuffer":
                memory.get(input=m.content)
        done = size
        query = str(messages[size - 2].content)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            memory.get(input=query)
            times.append(time.perf_counter() - start)
            if times[-1] > 1.0:
                break  # one sample is enough for a call that slow (ChatMemoryBuffer is quadratic)
        stored = {str(m.content) for m in memory.get_all()}
        lost = sum(str(m.content) not in stored for m in messages[:size])
        rows.append((size, statistics.median(times) * 1000, llm.calls, lost))
    if hasattr(memory, "close"):
        memory.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000])
    args = parser.parse_args()
    print("| memory | messages | get() ms (median of 5) | LLM calls | messages lost |")
    print("|---|---:|---:|---:|---:|")
    for name in ("TieredChatMemory", "Memory", "ChatSummaryMemoryBuffer", "ChatMemoryBuffer"):
        for size, ms, calls, lost in run(name, sorted(args.sizes)):
            print(f"| {name} | {size:,} | {ms:.1f} | {calls} | {lost:,} |", flush=True)


if __name__ == "__main__":
    main()
