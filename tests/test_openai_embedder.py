"""OpenAIEmbedder against a real loopback OpenAI server through the real openai client."""

from __future__ import annotations

import base64
import json
import math
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from langmem_tiers.embedders.base import Embedder
from langmem_tiers.embedders.openai import OpenAIEmbedder
from langmem_tiers.errors import ConfigError, RecallError
from tests.support.openai_server import (
    Behaviour,
    Disconnect,
    FakeOpenAIServer,
    Garbage,
    HTTPError,
    Vectors,
    fake_embedding,
)

pytest.importorskip("openai")

# The client's timeout. 0.5 s was too tight for a 2-core machine under a full test run: a scripted 429,
# answered at once, once took longer and was reported as APITimeoutError (a clean-checkout run, session 36).
TIMEOUT = 2.0
TEXTS = [f"note {i}: the user likes tea number {i}" for i in range(7)]

FAILURES: list[tuple[str, Behaviour, str]] = [
    ("http-500", HTTPError(500), "InternalServerError"),
    ("http-429", HTTPError(429), "RateLimitError"),
    ("timeout", Vectors([[0.0] * 8], delay=TIMEOUT * 6), "APITimeoutError"),
    ("disconnect", Disconnect(), "APIConnectionError"),
    ("not-json", Garbage(b"oops"), "JSONDecodeError"),
    ("wrong-shape", Garbage(b'{"data": 5}'), "malformed"),
    ("too-few", Vectors([[0.0] * 8]), "1 vectors for 3 texts"),
    ("wrong-size", Vectors([[0.0] * 4] * 3), "size 4, expected 8"),
]
IDS = [row[0] for row in FAILURES]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


Make = Callable[..., OpenAIEmbedder]


@pytest.fixture
async def make() -> AsyncIterator[Make]:
    """Builds embedders pointed at a server and closes their clients after the test."""
    made: list[OpenAIEmbedder] = []

    def build(server: FakeOpenAIServer, **kwargs: object) -> OpenAIEmbedder:
        options: dict[str, object] = {"base_url": server.base_url, "api_key": "sk-test", "timeout": TIMEOUT}
        options.update(kwargs)
        made.append(OpenAIEmbedder(**options))  # type: ignore[arg-type]
        return made[-1]

    yield build
    for embedder in made:
        await embedder.aclose()


def test_is_an_embedder(server: FakeOpenAIServer, make: Make) -> None:
    assert isinstance(make(server), Embedder)


@pytest.mark.parametrize(
    ("model", "dimensions", "key", "size"),
    [
        ("text-embedding-3-small", None, "openai:text-embedding-3-small:1536", 1536),
        ("text-embedding-3-large", None, "openai:text-embedding-3-large:3072", 3072),
        ("text-embedding-ada-002", None, "openai:text-embedding-ada-002:1536", 1536),
        ("text-embedding-3-small", 64, "openai:text-embedding-3-small:64", 64),
        ("my-local-model", 384, "openai:my-local-model:384", 384),
    ],
)
def test_key_and_dimension(
    server: FakeOpenAIServer, make: Make, model: str, dimensions: int | None, key: str, size: int
) -> None:
    e = make(server, model=model, dimensions=dimensions)
    assert (e.key, e.dimension) == (key, size)
    (vector,) = e.embed(["hello"])
    assert len(vector) == size
    assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-5)
    body = server.bodies("embeddings")[0]
    assert body["model"] == model
    assert body.get("dimensions") == dimensions


def test_embed_batches_and_keeps_order(server: FakeOpenAIServer, make: Make) -> None:
    e = make(server, dimensions=8, batch_size=3)
    vectors = e.embed(TEXTS)
    assert vectors == [fake_embedding(t, 8) for t in TEXTS]
    assert [b["input"] for b in server.bodies("embeddings")] == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:7]]
    assert all(b["encoding_format"] == "float" for b in server.bodies("embeddings"))


async def test_aembed_batches_and_keeps_order(server: FakeOpenAIServer, make: Make) -> None:
    e = make(server, dimensions=8, batch_size=3)
    vectors = await e.aembed(TEXTS)
    assert vectors == [fake_embedding(t, 8) for t in TEXTS]
    assert len(server.bodies("embeddings")) == 3


async def test_empty_input_sends_nothing(server: FakeOpenAIServer, make: Make) -> None:
    e = make(server, dimensions=8)
    assert e.embed([]) == []
    assert await e.aembed([]) == []
    assert server.requests == []


def test_empty_text_is_refused_before_sending(server: FakeOpenAIServer, make: Make) -> None:
    with pytest.raises(RecallError, match="text 1"):
        make(server, dimensions=8).embed(["a", ""])
    assert server.requests == []


def test_vectors_out_of_order_are_sorted_by_index(server: FakeOpenAIServer, make: Make) -> None:
    # OpenAI documents `index`; the order of `data` is not promised.
    body = {"object": "list", "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 2, "total_tokens": 2},
            "data": [{"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
                     {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}]}
    server.push(Garbage(json.dumps(body).encode()))
    assert make(server, dimensions=2).embed(["a", "b"]) == [[1.0, 0.0], [0.0, 1.0]]


def test_server_speaks_base64_like_openai(server: FakeOpenAIServer) -> None:
    # The openai client decodes base64 itself when asked; the fake must encode float32 little-endian.
    import openai

    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client:
        out = client.embeddings.create(model="text-embedding-3-small", input="hi", dimensions=4,
                                       encoding_format="base64")
    raw = base64.b64decode(out.data[0].embedding)  # type: ignore[arg-type]
    assert list(struct.unpack("<4f", raw)) == fake_embedding("hi", 4)
    assert out.usage.prompt_tokens == 1


@pytest.mark.parametrize(("case", "behaviour", "fragment"), FAILURES, ids=IDS)
def test_embed_failures_raise_recall_error(
    server: FakeOpenAIServer, make: Make, case: str, behaviour: Behaviour, fragment: str
) -> None:
    server.push(behaviour)
    start = time.monotonic()
    with pytest.raises(RecallError, match=fragment):
        make(server, dimensions=8).embed(["a", "b", "c"])
    assert time.monotonic() - start < TIMEOUT * 4
    assert len(server.requests) == 1


@pytest.mark.parametrize(("case", "behaviour", "fragment"), FAILURES, ids=IDS)
async def test_aembed_failures_raise_recall_error(
    server: FakeOpenAIServer, make: Make, case: str, behaviour: Behaviour, fragment: str
) -> None:
    server.push(behaviour)
    start = time.monotonic()
    with pytest.raises(RecallError, match=fragment):
        await make(server, dimensions=8).aembed(["a", "b", "c"])
    assert time.monotonic() - start < TIMEOUT * 4


def test_failure_in_a_later_batch_raises(server: FakeOpenAIServer, make: Make) -> None:
    server.push(Vectors([[0.0] * 7 + [1.0]] * 2), HTTPError(500))
    with pytest.raises(RecallError, match="InternalServerError") as info:
        make(server, dimensions=8, batch_size=2).embed(["a", "b", "c"])
    assert info.value.__cause__ is not None
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"model": ""}, "model"),
        ({"model": "unknown-model"}, "pass dimensions"),
        ({"dimensions": 0}, "dimensions"),
        ({"dimensions": 4000}, "at most 1536"),
        ({"model": "text-embedding-ada-002", "dimensions": 256}, "does not support dimensions"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 5000}, "batch_size"),
        ({"timeout": -1}, "timeout"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        OpenAIEmbedder(api_key="sk-test", **kwargs)  # type: ignore[arg-type]


# -- input limits and attributable failures ---------------------------------------------

def _cl100k() -> object:
    from langmem_tiers.tokens import load_encoding

    return load_encoding("cl100k_base")


def _long_text(tokens_wanted: int, seed: int = 0) -> str:
    words = [f"w{seed}x{i % 997}" for i in range(tokens_wanted // 3)]  # 3 to 4 cl100k tokens per word
    return " ".join(words)


def test_long_text_is_split_within_the_model_limit(server: FakeOpenAIServer, make: Make) -> None:
    enc: Any = _cl100k()
    text = _long_text(20_000)
    assert len(enc.encode(text)) > 2 * 8191
    e = make(server, dimensions=8)
    assert e.max_input_tokens == 8191
    (vector,) = e.embed([text])
    (sent,) = [b["input"] for b in server.bodies("embeddings")]
    counts = [len(enc.encode(piece)) for piece in sent]
    assert len(sent) == math.ceil(len(enc.encode(text)) / 8191)
    assert max(counts) <= 8191
    assert "".join(sent) == text  # cut at token boundaries, nothing lost
    # The text's vector is the token-weighted mean of its pieces' vectors, renormalized.
    mean = [sum(fake_embedding(p, 8)[j] * n for p, n in zip(sent, counts)) for j in range(8)]
    norm = math.sqrt(sum(x * x for x in mean))
    assert vector == pytest.approx([x / norm for x in mean], abs=1e-6)


async def test_requests_stay_under_the_per_request_token_total(server: FakeOpenAIServer, make: Make) -> None:
    enc: Any = _cl100k()
    texts = [_long_text(6_000, seed=i) for i in range(45)]
    sizes = [len(enc.encode(t)) for t in texts]
    assert max(sizes) <= 8191
    assert sum(sizes) > 300_000
    # Over 300k tokens in a few ~1 MB requests: the loopback server's parse and reply took over the
    # file's 0.5 s client timeout once during a full clean-clone run (a ReadTimeout); it is about batching.
    e = make(server, dimensions=8, timeout=30.0)
    vectors = await e.aembed(texts)
    assert vectors == [fake_embedding(t, 8) for t in texts]  # each fits: sent whole, in order
    bodies = server.bodies("embeddings")
    assert len(bodies) >= 2
    assert all(sum(len(enc.encode(t)) for t in b["input"]) <= 300_000 for b in bodies)
    assert [t for b in bodies for t in b["input"]] == texts


def test_unknown_model_sends_texts_whole_unless_told_its_limit(server: FakeOpenAIServer, make: Make) -> None:
    text = _long_text(12_000)
    make(server, model="my-local-model", dimensions=8).embed([text])
    assert server.bodies("embeddings")[-1]["input"] == [text]
    make(server, model="my-local-model", dimensions=8, max_input_tokens=512).embed([text])
    enc: Any = _cl100k()
    assert max(len(enc.encode(p)) for p in server.bodies("embeddings")[-1]["input"]) <= 512


def test_empty_text_is_named_before_sending(server: FakeOpenAIServer, make: Make) -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError

    with pytest.raises(EmbeddingInputError) as info:
        make(server, dimensions=8).embed(["a", "b", ""])
    assert info.value.index == 2
    assert server.requests == []


def test_a_refused_input_is_found_and_the_rest_embedded(server: FakeOpenAIServer, make: Make) -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError, embed_each

    texts = ["a", "b", "c", "poison"]
    # The server refuses every batch holding "poison" with a 400, as OpenAI does for a bad input.
    server.push(HTTPError(400, "'$.input' is invalid"), Vectors([fake_embedding(t, 8) for t in texts[:2]]),
                HTTPError(400, "'$.input' is invalid"), Vectors([fake_embedding("c", 8)]),
                HTTPError(400, "'$.input' is invalid"))
    results = embed_each(make(server, dimensions=8), texts)
    assert results[:3] == [fake_embedding(t, 8) for t in texts[:3]]
    assert isinstance(results[3], EmbeddingInputError)
    assert results[3].index == 3
    assert [b["input"] for b in server.bodies("embeddings")] == [texts, ["a", "b"], ["c", "poison"], ["c"],
                                                                ["poison"]]


def test_an_outage_is_not_blamed_on_a_text(server: FakeOpenAIServer, make: Make) -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError, embed_each

    server.push(HTTPError(503))
    with pytest.raises(RecallError, match=r"InternalServerError|503") as info:
        embed_each(make(server, dimensions=8), ["a", "b", "c"])
    assert not isinstance(info.value, EmbeddingInputError)
    assert len(server.requests) == 1


def test_bad_max_input_tokens_is_refused() -> None:
    for bad in (0, -5, True, 1.5, 10**7):
        with pytest.raises(ConfigError, match="max_input_tokens"):
            OpenAIEmbedder(api_key="sk-test", max_input_tokens=bad)  # type: ignore[arg-type]
