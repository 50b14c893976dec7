"""GGUF pre-tokenizers: the split each family's files name loads in llama.cpp's vocabulary (both
runners tokenize through it), and a name llama.cpp does not know is one line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ember.engine.errors import EngineError
from ember.models.errors import ModelFileError
from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer
from ember.models.text.tokenizers.pre_split import (
    BPE_MODELS,
    FAMILY_PRE_SPLITS,
    KNOWN_PRE_SPLITS,
    pre_split_problem,
)
from tests.models.files.badfiles.layout import build, kv_str, spec_from_file

TEXT = "Hello, world! 1234 tokens\n\tsplit  by   pre-tokenizers: Ember's test."


def _with_pre(source: Path, pre: str, out: Path) -> Path:
    """A copy of a tiny BPE GGUF whose tokenizer.ggml.pre says `pre`."""
    spec = spec_from_file(source)
    spec.set_kv("tokenizer.ggml.pre", kv_str("tokenizer.ggml.pre", pre))
    out.write_bytes(build(spec)[0])
    return out


@pytest.fixture(scope="module")
def bpe_gguf(tiny_models: Any) -> Path:
    return Path(tiny_models.gguf("smollm3", "Q8_0"))  # the tiny byte-level BPE vocabulary


@pytest.mark.parametrize("family", sorted(FAMILY_PRE_SPLITS))
def test_each_familys_pre_split_loads_in_llamacpp(
    family: str, bpe_gguf: Path, tmp_path: Path
) -> None:
    pre = FAMILY_PRE_SPLITS[family]
    assert pre in KNOWN_PRE_SPLITS and not pre_split_problem("gpt2", pre)
    tokenizer = LlamaCppTokenizer(_with_pre(bpe_gguf, pre, tmp_path / f"{pre}.gguf"))
    ids = tokenizer.encode(TEXT)
    assert ids and tokenizer.decode(ids) == TEXT
    tokenizer.close()


def test_unknown_pre_split_is_one_line_naming_the_key(bpe_gguf: Path, tmp_path: Path) -> None:
    path = _with_pre(bpe_gguf, "no-such-split", tmp_path / "unknown.gguf")
    with pytest.raises(ModelFileError) as info:
        LlamaCppTokenizer(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "tokenizer.ggml.pre: 'no-such-split' is not a pre-tokenizer llama.cpp knows" in message


@pytest.mark.parametrize("runner", ["llama.cpp", "torch"])
def test_both_runners_say_why(bpe_gguf: Path, tmp_path: Path, runner: str) -> None:
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    path = _with_pre(bpe_gguf, "no-such-split", tmp_path / "unknown.gguf")
    with pytest.raises((EngineError, ModelFileError)) as info:
        if runner == "llama.cpp":
            LlamaCppRunner.load(path).close()
        else:
            _ = TorchRunner.load(path, TorchOptions(device="cpu")).tokenizer
    assert "tokenizer.ggml.pre: 'no-such-split'" in str(info.value)
    assert "\n" not in str(info.value)


def test_sentencepiece_ignores_the_name_and_unknown_models_are_named() -> None:
    assert not pre_split_problem("llama", "anything")  # SentencePiece: no pre-split
    assert "tokenizer.ggml.model: 'wordpiece2'" in pre_split_problem("wordpiece2", None)
    assert "gpt2" in BPE_MODELS and not pre_split_problem("gpt2", None)  # llama.cpp: default
