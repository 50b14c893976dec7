"""gpt-oss on the torch runner: against transformers in float32 (float and MXFP4 checkpoints),
against llama.cpp on the same GGUF (greedy top-1 and top-5, prefill and one-token decode through
the paged cache), safetensors against GGUF of the same weights, llama.cpp's float32-cache numbers
to 1e-3, the torch path taken (the native kernels have no sinks), experts read only when chosen,
and a bad MXFP4 scale as one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest
import torch

from ember.engine.runners.torch.layers.attention import attend
from ember.engine.runners.torch.layers.decode_attention import attend_decode
from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
from ember.models.errors import ModelFileError
from tests.fixtures.llama_reference import llama_logits

from .helpers import agreement, agreement_runs, decode_logits, prefill_logits

if TYPE_CHECKING:
    from ember.engine.runners.torch.model import DecoderLayer

F32 = TorchOptions(device="cpu", dtype="float32", weight_format="dense", head_format="dense")
TOLERANCE = 1e-3  # max |logit difference| in float32 (logits reach ~36)
# measured on the tiny gpt-oss (AVX2, prompts of seeds 3, 7, 11): top-1 0.94-1.0, top-5 overlap
# 0.95-1.0; F16 1.0. Its expert weights are large enough for the SwiGLU clamp to bite, which
# makes the routing sensitive: where llama.cpp's rounding (f16 attention products, 8-bit
# activations) and ours differ by a hair, a near tie breaks the other way. So every miss must
# also be close: our pick at most MARGIN below llama.cpp's best logit (measured <= 1.07; a
# logit row spans ~40)
TOP1, TOP5, MARGIN = 0.93, 0.93, 1.5


def _ids(n: int, seed: int = 7) -> list[int]:
    return [int(x) for x in np.random.default_rng(seed).integers(10, 700, n)]


def _transformers(folder: Path, ids: list[int]) -> np.ndarray:
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import Mxfp4Config

    quant = Mxfp4Config(dequantize=True) if "quantization_config" in _config(folder) else None
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", quantization_config=quant
    )
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def _config(folder: Path) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads((folder / "config.json").read_text()))


def _worst_miss(got: np.ndarray, expected: np.ndarray) -> float:
    """How far below the reference's best logit our top pick is, at worst (0: all agree)."""
    rows = np.arange(len(got))
    return float((expected.max(-1) - expected[rows, got.argmax(-1)]).max())


def _truncated(folder: Path, tmp: Path) -> Path:
    """A copy of an HF folder whose YaRN truncates its ramp, as every GGUF reader (llama.cpp,
    and so our GGUF path) does: the weights are the same, so the logits must be too."""
    copy = tmp / folder.name
    shutil.copytree(folder, copy)
    config = _config(copy)
    config["rope_parameters"]["truncate"] = True
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize("form", ["float", "mxfp4"])
def test_matches_transformers(tiny_gptoss: Any, form: str) -> None:
    """Prefill, and decode one token at a time through the paged cache past the 16-token window
    (YaRN untruncated, as the HF config says)."""
    folder = tiny_gptoss.hf_dir if form == "float" else tiny_gptoss.hf_mxfp4_dir
    ids = _ids(64)
    expected = _transformers(folder, ids)
    runner = TorchRunner.load(folder, F32)
    assert runner.info.architecture == "gpt-oss"
    assert np.abs(prefill_logits(runner, ids) - expected).max() < TOLERANCE
    decoded = decode_logits(runner, ids, prefill=5, block_size=4, num_blocks=32)
    assert np.abs(decoded - expected[4:]).max() < TOLERANCE


def test_gguf_matches_llamacpp_with_a_float32_cache(tiny_gptoss: Any) -> None:
    """With llama.cpp's KV cache in float32 too, the F32 file's logits agree to 1e-3: sinks,
    window, YaRN, routing, clamp and biases are llama.cpp's (its default f16 cache moves logits
    by up to ~0.2, which the top-k tests below allow)."""
    from llama_cpp import Llama

    path, ids = tiny_gptoss.gguf("F32"), _ids(64)
    llm = Llama(str(path), logits_all=True, n_ctx=256, n_batch=64, n_threads=2, verbose=False,
                type_k=0, type_v=0)  # fmt: skip
    llm.eval(ids)
    expected = np.array(llm.scores[:64], dtype=np.float32)
    llm.close()
    runner = TorchRunner.load(path, F32)
    assert np.abs(prefill_logits(runner, ids) - expected).max() < TOLERANCE
    assert np.abs(decode_logits(runner, ids, prefill=20) - expected[19:]).max() < TOLERANCE


@pytest.mark.parametrize("qtype", ["F16", "Q8_0", "MXFP4", "MXFP4_MOE"])
def test_agrees_with_llamacpp(tiny_gptoss: Any, qtype: str) -> None:
    """Greedy next-token top-1 and top-5 against llama.cpp on the same file, prefill on each
    prompt path pinned and decode, with the runner's defaults otherwise (native linears where
    the kernels build, MXFP4 experts packed exactly into int8 groups)."""
    path, ids = tiny_gptoss.gguf(qtype), _ids(64, seed=3)
    expected = llama_logits(path, ids)
    runner = TorchRunner.load(path, TorchOptions(device="cpu"))
    runs = agreement_runs(runner, ids, expected)
    for phase, got, ref in runs:
        top1, top5 = agreement(got, ref)
        print(f"gpt-oss {qtype} {phase} vs llama.cpp: top-1 {top1:.3f} top-5 {top5:.3f}")
        assert top1 >= TOP1 and top5 >= TOP5, (qtype, top1, top5)
        assert _worst_miss(got, ref) <= MARGIN, (qtype, _worst_miss(got, ref))


@pytest.mark.parametrize(("form", "qtype"), [("float", "F32"), ("mxfp4", "MXFP4")])
def test_safetensors_and_gguf_of_the_same_weights_agree(
    tiny_gptoss: Any, tmp_path: Path, form: str, qtype: str
) -> None:
    folder = tiny_gptoss.hf_dir if form == "float" else tiny_gptoss.hf_mxfp4_dir
    ids = _ids(40, seed=5)
    hf = prefill_logits(TorchRunner.load(_truncated(folder, tmp_path), F32), ids)
    gguf = prefill_logits(TorchRunner.load(tiny_gptoss.gguf(qtype), F32), ids)
    assert np.abs(hf - gguf).max() < TOLERANCE


@pytest.mark.parametrize("qtype", ["Q8_0", "MXFP4"])
def test_native_linears_without_the_one_call_step(tiny_gptoss: Any, qtype: str) -> None:
    """The one-call native decode step has no sinks and moe.c no expert biases or gpt-oss's
    routing: every step runs through the torch modules, on the native kernels' linears where
    they multiply the type (attention always here; the experts when Q8_0, torch's packed int8
    groups when MXFP4)."""
    runner = TorchRunner.load(tiny_gptoss.gguf(qtype), TorchOptions(device="cpu", kernels="native"))
    assert runner.native is None
    layer = cast("DecoderLayer", runner.model.layers[0]).w
    assert layer.qkv.native is not None and layer.moe is not None and layer.moe.native is None
    prefill_logits(runner, [17, 18])
    expert = next(e for e in layer.moe.experts if e is not None)
    assert (expert.gate_up.native is not None) == (qtype == "Q8_0")
    assert expert.act_block == (0 if qtype == "Q8_0" else 32)


def test_experts_no_token_chose_are_never_built(tiny_gptoss: Any) -> None:
    runner = TorchRunner.load(tiny_gptoss.gguf("MXFP4"), TorchOptions(device="cpu"))
    moes = [cast("DecoderLayer", layer).w.moe for layer in runner.model.layers]
    assert all(moe is not None and moe.n_built == 0 for moe in moes)
    prefill_logits(runner, [17])
    assert [moe.n_built for moe in moes if moe is not None] == [2, 2]


def test_a_bad_mxfp4_scale_is_one_line_naming_the_expert(tiny_gptoss: Any, tmp_path: Path) -> None:
    """Every scale byte of one layer's up experts set to 0xFF (NaN in the MX format): the first
    token that chooses one of them fails with the tensor's name, not with NaN logits."""
    from ember.models.files.gguf import open_gguf

    path = tmp_path / "bad-scale.gguf"
    shutil.copy(tiny_gptoss.gguf("MXFP4"), path)
    tensor = open_gguf(path).tensors["blk.1.ffn_up_exps.weight"]
    start, end = tensor.offset, tensor.offset + tensor.nbytes
    data = bytearray(path.read_bytes())
    data[start:end:17] = b"\xff" * (tensor.nbytes // 17)  # byte 0 of every 17-byte block
    path.write_bytes(bytes(data))
    runner = TorchRunner.load(path, TorchOptions(device="cpu"))
    with pytest.raises(ModelFileError) as info:
        prefill_logits(runner, _ids(8))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("blk.1.ffn_up_exps.weight[")
    assert message.endswith("an MXFP4 block has scale byte 0xFF (NaN in the MX format)")


def test_sink_logits_join_the_softmax_in_both_attention_paths() -> None:
    """softmax over [scores, sink] with the sink column dropped, per query head: the prefill
    kernel (grouped rows, masked) and the batched decode kernel give the formula's answer."""
    gen = torch.Generator().manual_seed(0)
    t, heads, n_kv, dim, keys = 5, 4, 2, 8, 9
    q = torch.randn(t, heads, dim, generator=gen)
    k, v = torch.randn(keys, n_kv, dim, generator=gen), torch.randn(keys, n_kv, dim, generator=gen)
    sinks = torch.tensor([2.0, -1.0, 0.5, 3.0])
    mask = torch.ones(t, keys, dtype=torch.bool).tril(keys - t)
    kk, vv = k.repeat_interleave(heads // n_kv, 1), v.repeat_interleave(heads // n_kv, 1)
    scores = torch.einsum("thd,lhd->htl", q, kk) * 0.3
    scores = scores.masked_fill(~mask[None], -torch.inf)
    full = torch.cat([scores, sinks[:, None, None].expand(heads, t, 1)], dim=-1)
    expected = torch.einsum("htl,lhd->thd", torch.softmax(full, -1)[..., :keys], vv)
    assert torch.allclose(attend(q, k, v, mask, 0.3, None, sinks), expected, atol=1e-5)
    got = attend_decode(q, k[None].expand(t, -1, -1, -1), v[None].expand(t, -1, -1, -1), mask,
                        0.3, None, sinks)  # fmt: skip
    assert torch.allclose(got, expected, atol=1e-5)
