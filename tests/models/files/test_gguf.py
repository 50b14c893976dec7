"""open_gguf on valid tiny files of each architecture, and on the real starter model."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from ember.models.errors import ModelFileError
from ember.models.files.gguf import open_gguf
from tests.fixtures.quick_gguf import (
    FFN,
    HEAD_DIM,
    HIDDEN,
    N_LAYERS,
    TEMPLATE,
    TOKENS,
    write_tiny_gguf,
)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_tiny_architectures(arch: str, tmp_path: Path) -> None:
    model = open_gguf(write_tiny_gguf(tmp_path / f"{arch}.gguf", arch))
    hp = model.check_supported()
    assert model.supported and model.architecture == arch == hp.architecture
    assert (hp.n_layers, hp.hidden_size, hp.ffn_size) == (N_LAYERS, HIDDEN, FFN)
    assert (hp.n_heads, hp.n_kv_heads, hp.head_dim, hp.head_dim_v) == (2, 1, HEAD_DIM, HEAD_DIM)
    assert hp.vocab_size == len(TOKENS) and hp.context_length == 256
    assert hp.qkv_bias == (arch == "qwen2")
    assert hp.qk_norm == (arch in ("qwen3", "gemma3"))
    assert hp.tie_embeddings == (arch == "gemma3") == ("output.weight" not in model.tensors)
    assert hp.rope_interleaved == (arch == "llama")
    if arch == "gemma3":
        assert hp.hidden_act == "gelu_tanh" and hp.sliding_window == 16
        assert hp.sliding_window_pattern == 6 and hp.rope_local_theta == 10000.0
        assert [hp.is_sliding(i) for i in range(7)] == [True] * 5 + [False, True]
        assert hp.layer_rope_theta(0) == 10000.0 and hp.layer_rope_theta(5) == 1e6
    else:
        assert hp.sliding_window is None and not hp.is_sliding(0)


def test_tensor_views_are_zero_copy_and_exact(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf", "llama")
    model = open_gguf(path)
    reader = gguf.GGUFReader(str(path))  # the gguf package as the oracle
    assert set(model.tensors) == {t.name for t in reader.tensors}
    raw_file = path.read_bytes()
    for ref in reader.tensors:
        t = model.tensors[ref.name]
        assert t.qtype == ref.tensor_type
        assert t.shape == tuple(reversed([int(d) for d in ref.shape]))
        assert t.nbytes == ref.n_bytes == t.raw.nbytes and t.raw.dtype == np.uint8
        assert not t.raw.flags.writeable and not t.raw.flags.owndata
        assert t.raw.tobytes() == raw_file[t.offset : t.offset + t.nbytes]
        np.testing.assert_array_equal(t.data, ref.data)  # same typed view as the gguf package
        assert np.shares_memory(t.data, t.raw)
        got = gguf.quants.dequantize(t.raw, t.qtype).reshape(t.shape)
        want = gguf.quants.dequantize(ref.data, ref.tensor_type).reshape(t.shape)
        np.testing.assert_array_equal(got, want)
    assert set(model.quant_summary) == {"F32", "F16", "Q8_0", "Q4_0"}
    assert sum(s.nbytes for s in model.quant_summary.values()) == sum(
        t.nbytes for t in model.tensors.values()
    )


def test_metadata_tokenizer_and_template(tmp_path: Path) -> None:
    model = open_gguf(write_tiny_gguf(tmp_path / "t.gguf", "qwen3"))
    assert model.chat_template == TEMPLATE
    tok = model.tokenizer
    assert (tok.model, tok.pre, tok.n_tokens) == ("llama", "default", len(TOKENS))
    assert (tok.bos_id, tok.eos_id, tok.add_bos) == (1, 2, True)
    assert model.metadata_array("tokenizer.ggml.tokens") == TOKENS
    assert model.metadata["general.name"] == model.name == "tiny-qwen3"
    with pytest.raises(KeyError):
        model.metadata_array("general.name")
    no_template = open_gguf(write_tiny_gguf(tmp_path / "n.gguf", "llama", chat_template=False))
    assert no_template.chat_template is None


def test_unknown_architecture_opens_metadata_only(tmp_path: Path) -> None:
    model = open_gguf(write_tiny_gguf(tmp_path / "m.gguf", "mamba9"))
    assert model.architecture == "mamba9" and not model.supported
    assert model.n_params > 0 and model.tensors
    with pytest.raises(ModelFileError, match=r"m\.gguf: architecture 'mamba9' is not supported"):
        model.check_supported()


@pytest.mark.model
def test_starter_model(starter_gguf: Path) -> None:
    model = open_gguf(starter_gguf)
    hp = model.check_supported()
    assert model.architecture == "gemma3" and model.version == 3
    assert (hp.n_layers, hp.context_length, hp.hidden_size, hp.vocab_size) == (
        18,
        32768,
        640,
        262144,
    )
    assert (hp.n_heads, hp.n_kv_heads, hp.head_dim, hp.sliding_window) == (4, 1, 256, 512)
    assert hp.tie_embeddings and hp.qk_norm and hp.rope_theta == 1e6
    # this GGUF carries no tokenizer.chat_template: the gemma built-in stands in (inspect_model)
    assert model.chat_template is None
    summary = model.quant_summary
    assert {"Q4_K", "Q6_K", "Q5_0", "Q8_0", "F32"} <= set(summary)
    assert sum(s.n_tensors for s in summary.values()) == len(model.tensors) == 236
    assert model.file_size == starter_gguf.stat().st_size
    assert 260_000_000 < model.n_params < 280_000_000
    tokens = model.metadata_array("tokenizer.ggml.tokens")
    assert len(tokens) == 262144 and tokens[2] == "<bos>"
    embd = model.tensors["token_embd.weight"]
    assert embd.shape == (262144, 640) and embd.qtype == gguf.GGMLQuantizationType.Q8_0


def test_split_model_opens_from_the_first_shard(tmp_path: Path) -> None:
    first = write_tiny_gguf(tmp_path / "big.gguf", "qwen3", split_max_tensors=10)
    shards = sorted(tmp_path.glob("big-*-of-*.gguf"))
    assert first == shards[0] and len(shards) > 2
    model = open_gguf(first)
    whole = open_gguf(write_tiny_gguf(tmp_path / "one.gguf", "qwen3"))
    assert model.shards == shards and model.check_supported() == whole.hparams
    assert model.file_size == sum(p.stat().st_size for p in shards)
    assert set(model.tensors) == set(whole.tensors)
    for name, t in whole.tensors.items():
        assert model.tensors[name].raw.tobytes() == t.raw.tobytes()
    with pytest.raises(ModelFileError, match="a later shard of a split model"):
        open_gguf(shards[1])
    renamed = shards[0].with_name("other.gguf")
    renamed.write_bytes(shards[0].read_bytes())
    with pytest.raises(ModelFileError, match="is not <stem>-00001-of"):
        open_gguf(renamed)
    shards[-1].unlink()
    with pytest.raises(ModelFileError, match=f"big-00001-of.*missing shard {shards[-1].name}"):
        open_gguf(first)
