"""open_safetensors on tiny HF folders, crafted bad headers and folders, and pickle refusal."""

from __future__ import annotations

import json
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from ember.models.errors import ModelFileError
from ember.models.files.safetensors import is_pickle_checkpoint, open_safetensors, refuse_pickle
from tests.fixtures.quick_hf import hf_tensors, write_tiny_hf


@pytest.mark.parametrize("n_shards", [1, 3])
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_tiny_folders_open(arch: str, n_shards: int, tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / arch, arch, n_shards=n_shards)
    model = open_safetensors(folder)
    hp = model.check_supported()
    assert model.architecture == hp.architecture == arch and len(model.shards) == n_shards
    assert hp.tie_embeddings == (arch == "gemma3") == ("lm_head.weight" not in model.entries)
    want = hf_tensors(arch, tied=hp.tie_embeddings)
    assert sorted(model.tensor_names) == sorted(want)
    for name in ("model.embed_tokens.weight", "model.layers.1.mlp.down_proj.weight"):
        got = model.tensor(name)
        assert got.dtype == torch.bfloat16 and torch.equal(got, want[name])
    assert model.n_params == sum(t.numel() for t in want.values())
    assert model.dtype_summary["BF16"].n_tensors == len(want)
    assert set(model.tokenizer_files) == {"tokenizer.json", "tokenizer_config.json"}
    assert model.generation_config == {"do_sample": False, "eos_token_id": 2}
    assert model.chat_template_source == "tokenizer_config.json"


def test_legacy_config_without_tie_key_follows_the_tensors(tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "m", "qwen2", tied=True, legacy_config=True)
    config = json.loads((folder / "config.json").read_text())
    del config["tie_word_embeddings"]
    (folder / "config.json").write_text(json.dumps(config))
    hp = open_safetensors(folder).check_supported()
    assert hp.tie_embeddings and hp.rope_theta == 500000.0


def test_unknown_architecture_opens(tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "m", "llama")
    config = json.loads((folder / "config.json").read_text())
    config |= {"architectures": ["MambaForCausalLM"], "model_type": "mamba"}
    (folder / "config.json").write_text(json.dumps(config))
    model = open_safetensors(folder)
    assert model.architecture == "MambaForCausalLM" and not model.supported
    with pytest.raises(ModelFileError, match="not supported"):
        model.check_supported()


def _raw(header: dict[str, Any], data: bytes, length: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


_F32_2x2 = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
BAD_HEADERS: dict[str, tuple[bytes, str]] = {
    "too_short": (b"\x01\x02", "no header length"),
    "length_huge": (_raw({}, b"", length=1 << 60), "exceeds the file"),
    "not_json": (struct.pack("<Q", 4) + b"{{{{", "not valid JSON"),
    "not_object": (_raw([1, 2], b""), "not a JSON object"),  # type: ignore[arg-type]
    "unknown_dtype": (_raw({"w": {**_F32_2x2, "dtype": "F12"}}, b"\0" * 16), "unknown dtype"),
    "list_dtype": (_raw({"w": {**_F32_2x2, "dtype": ["F32"]}}, b"\0" * 16), "w: dtype: unknown"),
    "dict_shape": (_raw({"w": {**_F32_2x2, "shape": {"a": 2}}}, b"\0" * 16), "w: shape:"),
    "bad_shape": (_raw({"w": {**_F32_2x2, "shape": [2, -2]}}, b"\0" * 16), "not a list of sizes"),
    "bad_offsets": (
        _raw({"w": {**_F32_2x2, "data_offsets": [16, 0]}}, b"\0" * 16),
        "tensor w: data_offsets: bad value [16, 0]",
    ),
    "past_end": (_raw({"w": _F32_2x2}, b"\0" * 8), "truncated: tensor w ends at byte"),
    "size_mismatch": (
        _raw({"w": {**_F32_2x2, "shape": [2, 3]}}, b"\0" * 16),
        "16 bytes for shape (2, 3)",
    ),
    "overlap": (
        _raw({"a": _F32_2x2, "b": {**_F32_2x2, "data_offsets": [8, 24]}}, b"\0" * 24),
        "overlap",
    ),
    "huge_int": (struct.pack("<Q", 5002) + b"[" + b"9" * 5000 + b"]", "not valid JSON"),
    "deep_nesting": (
        struct.pack("<Q", 200_000) + b"[" * 100_000 + b"]" * 100_000,
        "not valid JSON",
    ),
    "bad_metadata": (_raw({"__metadata__": {"k": 1}, "w": _F32_2x2}, b"\0" * 16), "__metadata__"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_headers(case: str, tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "m", "llama")
    content, fragment = BAD_HEADERS[case]
    (folder / "model.safetensors").write_bytes(content)
    with pytest.raises(ModelFileError) as info:
        open_safetensors(folder)
    message = str(info.value)
    assert message.startswith("model.safetensors: ") and fragment in message, message


def _edit_index(folder: Path, edit: Any) -> None:
    path = folder / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    edit(index["weight_map"])
    path.write_text(json.dumps(index))


def test_bad_folders(tmp_path: Path) -> None:
    def fresh(name: str, **kw: Any) -> Path:
        return write_tiny_hf(tmp_path / name, "llama", **kw)

    cases: list[tuple[Path, str]] = []
    f = fresh("no_config")
    (f / "config.json").unlink()
    cases.append((f, "config.json: missing"))
    f = fresh("bad_config")
    (f / "config.json").write_text("{oops")
    cases.append((f, "config.json: not valid JSON"))
    f = fresh("missing_shard", n_shards=2)
    (f / "model-00002-of-00002.safetensors").unlink()
    cases.append((f, "missing shard model-00002-of-00002.safetensors"))
    f = fresh("traversal", n_shards=2)
    _edit_index(f, lambda m: m.update({"model.norm.weight": "../evil.safetensors"}))
    cases.append((f, "bad shard name"))
    f = fresh("wrong_shard", n_shards=2)
    shard2 = "model-00002-of-00002.safetensors"
    _edit_index(f, lambda m: m.update({"model.embed_tokens.weight": shard2}))
    cases.append((f, f"model.embed_tokens.weight is not in {shard2}"))
    f = fresh("no_index", n_shards=2)
    (f / "model.safetensors.index.json").unlink()
    cases.append((f, "but no model.safetensors.index.json"))
    f = fresh("no_tokenizer")
    (f / "tokenizer.json").unlink()
    cases.append((f, "no tokenizer.json"))
    f = fresh("no_weights")
    (f / "model.safetensors").unlink()
    cases.append((f, "no .safetensors files"))
    for folder, fragment in cases:
        with pytest.raises(ModelFileError, match=fragment):
            open_safetensors(folder)
    with pytest.raises(ModelFileError, match="no such folder"):
        open_safetensors(tmp_path / "absent")


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (
            lambda t: t.pop("model.layers.1.mlp.up_proj.weight"),
            "missing tensor model.layers.1.mlp.up_proj.weight",
        ),
        (lambda t: t.pop("lm_head.weight"), "missing tensor lm_head.weight"),
        (
            lambda t: t.update({"model.layers.0.self_attn.k_proj.weight": torch.zeros(64, 64)}),
            "k_proj.weight has shape (64, 64), expected (32, 64)",
        ),
    ],
)
def test_tensors_checked_against_hparams(edit: Any, fragment: str, tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "m", "llama")
    tensors = hf_tensors("llama", tied=False)
    edit(tensors)
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(ModelFileError) as info:
        open_safetensors(folder)
    assert str(info.value).startswith("m: ") and fragment in str(info.value), str(info.value)


def test_duplicate_tensor_across_shards(tmp_path: Path) -> None:
    folder = write_tiny_hf(tmp_path / "m", "llama", n_shards=2)
    first = folder / "model-00001-of-00002.safetensors"
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "model-00002-of-00002.safetensors"))
    save_file({**load_file(str(first)), **dict(list(tensors.items())[:1])}, str(first))
    with pytest.raises(ModelFileError, match="is in both"):
        open_safetensors(folder)


class _Boom:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        import os

        return (os.system, ("touch PWNED",))


def test_pickle_checkpoints_refused_and_never_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    payload = pickle.dumps(_Boom(), protocol=4)
    folder = tmp_path / "torch_model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (folder / "pytorch_model.bin").write_bytes(payload)
    with pytest.raises(ModelFileError, match="pytorch_model.bin: pickle checkpoint refused"):
        open_safetensors(folder)
    disguised = tmp_path / "weights.dat"  # pickle bytes under an innocent name
    disguised.write_bytes(payload)
    archive = tmp_path / "model.zip"  # torch.save's zip layout
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("archive/data.pkl", payload)
    for path in (disguised, archive):
        assert is_pickle_checkpoint(path)
        with pytest.raises(ModelFileError, match="never opens"):
            refuse_pickle(path)
    for name in ("x.pt", "x.pth", "x.ckpt", "x.pkl", "pytorch_model-00001-of-00002.bin"):
        assert is_pickle_checkpoint(tmp_path / name)  # by name, before any download
    assert not is_pickle_checkpoint(tmp_path / "model.safetensors")
    refuse_pickle(write_tiny_hf(tmp_path / "ok", "llama") / "model.safetensors")
    assert not (tmp_path / "PWNED").exists()


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzzed_headers_raise_only_model_file_error(data: st.DataObject, tmp_path: Path) -> None:
    """Random truncation and byte flips in a real shard's header and tensors."""
    folder = tmp_path / "fz"
    if not folder.exists():
        write_tiny_hf(folder, "qwen3")
    shard = folder / "model.safetensors"
    pristine = folder / "pristine.raw"  # not a .safetensors name: never read as a shard
    if not pristine.exists():
        pristine.write_bytes(shard.read_bytes())
    raw = bytearray(pristine.read_bytes())
    (header_len,) = struct.unpack_from("<Q", raw, 0)
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, 8 + header_len - 1), st.integers(0, 255)), max_size=4)
    )
    for pos, value in flips:
        raw[pos] = value
    cut = data.draw(st.none() | st.integers(0, len(raw)))
    shard.write_bytes(bytes(raw[:cut] if cut is not None else raw))
    try:
        model = open_safetensors(folder)
        for name in model.tensor_names[:3]:
            model.tensor(name)
    except ModelFileError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_tensor_names_map_both_ways(arch: str) -> None:
    from ember.models.files.hparams.tensors import gguf_tensor_name, hf_tensor_name

    names = hf_tensors(arch, tied=False)
    gguf_names = {gguf_tensor_name(n, arch) for n in names}
    assert None not in gguf_names and len(gguf_names) == len(names)
    assert {hf_tensor_name(g, arch) for g in gguf_names if g} == set(names)
    if arch == "gemma3":
        assert gguf_tensor_name("model.layers.3.pre_feedforward_layernorm.weight", arch) == (
            "blk.3.ffn_norm.weight"
        )
        assert gguf_tensor_name("model.layers.3.post_attention_layernorm.weight", arch) == (
            "blk.3.post_attention_norm.weight"
        )
    assert gguf_tensor_name("model.rotary_emb.inv_freq", arch) is None
