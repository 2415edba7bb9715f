"""Helpers shared by the reliability tests: a hashing embedder, session checks and a writer process.

``python -m tests.reliability.workers PATH WRITER N [CHROMA_URL]`` adds ``N`` user/assistant turns
to the shared session ``shared`` and to its own session ``own-WRITER`` and prints the
acknowledged ids as JSON.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from typing import Any

from langmem_tiers import MemoryConfig, TieredMemory, WordCounter
from langmem_tiers.embedders.callable import CallableEmbedder

# A short outbox lease: rows claimed by a child that is then SIGKILLed are taken over after it.
LEASE_S = 1.0
CONFIG = MemoryConfig(context_tokens=400, window_tokens=100, window_low_ratio=0.6, summary_tokens=40,
                      recall_tokens=100, summary_retry_base_s=0, summary_retry_max_s=0, index_lease_s=LEASE_S)


def hashed_vectors(texts: list[str]) -> list[list[float]]:
    """A deterministic 16-d bag-of-words embedding (the model is not under test here)."""
    out = []
    for text in texts:
        vec = [0.0] * 16
        for word in text.lower().split():
            vec[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 16] += 1.0
        vec[0] += 0.01
        out.append(vec)
    return out


def hashed_embedder() -> CallableEmbedder:
    return CallableEmbedder(hashed_vectors, dimension=16, key="test:hashed16")


def open_memory(path: Any, session: str, user: str = "u", chroma: str | None = None, **kw: Any) -> TieredMemory:
    kw.setdefault("config", CONFIG)
    embedder: Any = hashed_embedder() if chroma else False
    if chroma == "embedded":
        chroma = None
        embedder = hashed_embedder()
    return TieredMemory.open(path, session_id=session, user_id=user, counter=WordCounter(), embedder=embedder,
                             chroma=chroma, **kw)


def check_session(memory: TieredMemory, acked: Iterable[list[int]], *, flushed: bool = True) -> int:
    """No loss, no duplicates, each writer's order kept, window invariants; returns the message count."""
    messages = memory.messages()
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), "duplicate ids"
    position = {i: n for n, i in enumerate(ids)}
    total = 0
    for writer in acked:
        assert all(i in position for i in writer), f"lost: {[i for i in writer if i not in position][:5]}"
        assert [position[i] for i in writer] == sorted(position[i] for i in writer), "writer order broken"
        total += len(writer)
    assert total == len(ids), f"{len(ids) - total} unacknowledged messages stored"
    with memory.journal.read() as rx:
        state = rx.state(memory._ns_id)
    window = [m for m in messages if m.id >= state.window_start]
    if messages:
        assert window, "the window is empty"
        assert window[0].role == "user" or window[0].id == ids[0], "window must start a turn"
    assert state.summary_cursor < max(state.window_start, 1)
    if flushed:
        # every message is in the window or covered by the summary
        assert all(m.id >= state.window_start or m.id <= state.summary_cursor for m in messages)
    return len(ids)


def main(argv: list[str]) -> None:
    path, writer, n = argv[0], int(argv[1]), int(argv[2])
    chroma = argv[3] if len(argv) > 3 else None
    acked: dict[str, list[int]] = {"shared": [], "own": []}
    with open_memory(path, "shared", chroma=chroma) as shared, \
            open_memory(path, f"own-{writer}", chroma=chroma) as own:
        for turn in range(n):
            for key, memory in (("shared", shared), ("own", own)):
                stored = memory.add_messages([
                    {"role": "user", "content": f"w{writer} t{turn} question about copper {key}"},
                    {"role": "assistant", "content": f"w{writer} t{turn} answer about harbor {key}"},
                ])
                acked[key] += [m.id for m in stored]
        own.flush()
    print(json.dumps(acked))


if __name__ == "__main__":
    main(sys.argv[1:])
