"""LlamaCppEmbedder on the tiny BERT GGUF: pooled vectors against llama-cpp-python's own
`Llama.embed`, batching that changes nothing, the context limit, and the models refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ember.engine.api import AUTO_CTX, EngineOptions, ModelFiles
from ember.engine.embedding import CannotEmbed, InputRejected
from ember.engine.errors import EngineError
from ember.engine.load import load_embedder
from tests.fixtures.tiny_bert import CONTEXT, HIDDEN, write_tiny_bert

pytest.importorskip("llama_cpp")
TEXTS = ["the cat sat on the mat", "hello world", "a dog and a puppy", "tax money in the bank"]
OPTIONS = EngineOptions(model="tiny-bert", runner="llama.cpp", device="cpu", threads=1)


def _files(path: Path) -> ModelFiles:
    return ModelFiles("tiny-bert", path, "gguf", "0" * 64)


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("bert") / "tiny-bert.gguf")


@pytest.fixture(scope="module")
def embedder(bert: Path):
    loaded = load_embedder(OPTIONS, _files(bert))
    yield loaded
    loaded.close()


def test_info_comes_from_the_file(embedder) -> None:
    info = embedder.info
    assert (info.architecture, info.dimensions, info.pooling, info.trained) == (
        "bert", HIDDEN, "mean", True
    )  # fmt: skip
    assert info.context_limit == CONTEXT and info.runner == "llama.cpp"


def test_vectors_match_llama_cpp_python(embedder, bert: Path) -> None:
    from llama_cpp import Llama

    reference = Llama(str(bert), embedding=True, n_ctx=CONTEXT, n_threads=1, verbose=False)
    try:
        expected = np.array(reference.embed(TEXTS, normalize=False), dtype=np.float32)
    finally:
        reference.close()
    got = embedder.embed(TEXTS, normalize=False)
    assert got.vectors.shape == (len(TEXTS), HIDDEN)
    np.testing.assert_allclose(got.vectors, expected, atol=1e-4, rtol=1e-4)
    # [CLS] and [SEP] around the words: "hello world" is two whole words
    assert got.token_counts[1] == 4 and got.prompt_tokens == sum(got.token_counts)


def test_batching_and_normalizing(embedder) -> None:
    together = embedder.embed(TEXTS).vectors
    alone = np.stack([embedder.embed([t]).vectors[0] for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    many = embedder.embed(TEXTS * 9).vectors  # 36 inputs: more than one decode
    np.testing.assert_allclose(many[-4:], together, atol=1e-5)


def test_token_ids_and_bad_inputs(embedder) -> None:
    ids = embedder.tokenize("hello world")
    np.testing.assert_allclose(
        embedder.embed([ids]).vectors, embedder.embed(["hello world"]).vectors, atol=1e-6
    )
    with pytest.raises(InputRejected, match=r"input\[1\]: token ids must be in \[0, "):
        embedder.embed(["cat", [1, 10_000]])
    with pytest.raises(InputRejected, match=r"input\[0\]: empty"):
        embedder.embed([[]])
    long = " ".join(["cat"] * (CONTEXT + 5))
    with pytest.raises(InputRejected, match=rf"exceed the model's context of {CONTEXT}"):
        embedder.embed([long])
    cut = embedder.embed([long], truncate=True)
    assert cut.token_counts == (CONTEXT,)


def test_pooling_follows_the_metadata(bert: Path, tmp_path: Path) -> None:
    cls_path = write_tiny_bert(tmp_path / "cls.gguf", pooling="cls")
    cls = load_embedder(OPTIONS, _files(cls_path))
    mean = load_embedder(OPTIONS, _files(bert))
    try:
        assert cls.info.pooling == "cls"
        a, b = cls.embed(TEXTS[:1]).vectors[0], mean.embed(TEXTS[:1]).vectors[0]
        assert not np.allclose(a, b, atol=1e-3)
    finally:
        cls.close()
        mean.close()


def test_models_and_runners_that_cannot_embed(tmp_path: Path) -> None:
    reranker = write_tiny_bert(tmp_path / "rank.gguf", pooling="rank")
    with pytest.raises(CannotEmbed, match="reranker"):
        load_embedder(OPTIONS, _files(reranker))
    with pytest.raises(CannotEmbed, match="torch runner cannot embed"):
        load_embedder(EngineOptions(model="x", runner="torch"), _files(reranker))
    folder = ModelFiles("hf", tmp_path, "safetensors", "0" * 64)
    with pytest.raises(CannotEmbed, match="this is safetensors"):
        load_embedder(OPTIONS, folder)


def test_a_closed_embedder_refuses(bert: Path) -> None:
    loaded = load_embedder(OPTIONS, _files(bert))
    loaded.close()
    with pytest.raises(EngineError, match="closed"):
        loaded.embed(["cat"])


def test_auto_context_is_the_default_capped_by_the_trained_one(bert: Path) -> None:
    """`--ctx auto` sizes a chat model's KV cache; an embedder loaded under it (ember serve
    --ctx auto) gets the default context capped by the file's trained one, not 0 tokens."""
    auto = EngineOptions(model="tiny-bert", runner="llama.cpp", device="cpu", threads=1, ctx=AUTO_CTX)
    loaded = load_embedder(auto, _files(bert))
    try:
        assert loaded.info.context_limit == min(EngineOptions.ctx, CONTEXT)
        assert len(loaded.embed(["hello world"]).vectors) == 1
    finally:
        loaded.close()
