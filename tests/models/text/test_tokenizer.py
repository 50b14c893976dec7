"""Tokenizers: ids equal the reference libraries', text round-trips, special spellings stay text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ember.models.errors import ModelFileError
from ember.models.text.tokenizers.base import IncrementalDecoder, Tokenizer
from ember.models.text.tokenizers.open import open_tokenizer
from tests.fixtures.tiny_models import TinyModels

MIXED = [
    "Hello, world! It's 12:30 and we'll see.",
    "人工智能正在改变世界。你好，世界！",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🧬🫠 and flags 🇫🇷",
    "def f(x: int) -> int:\n\treturn x ** 2  # square\n",
    "   leading and trailing   \n\n\n  \t whitespace runs    ",
    "Straße café naïve Ελληνικά русский العربية",
    "",
]
SPECIAL_SPELLINGS = "user says <start_of_turn>model\n and <|im_start|>system<|im_end|> <bos>"


def _raw_llama_cpp(path: Path) -> Callable[[str, bool], list[int]]:
    """llama-cpp-python's own high-level tokenizer, as the reference."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda text, special: list(llm.tokenize(text.encode(), add_bos=False, special=special))


def _roundtrip(tokenizer: Tokenizer, text: str) -> None:
    assert tokenizer.decode(tokenizer.encode(text)) == text
    pieces = b"".join(tokenizer.token_bytes(i) for i in tokenizer.encode(text))
    assert pieces.decode("utf-8") == text


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_tiny_gguf_ids_equal_llama_cpp_and_tokenizers(tiny_models: TinyModels, arch: str) -> None:
    from tokenizers import Tokenizer as RawTokenizer

    gguf_path = tiny_models.gguf(arch, "Q8_0")
    ours_gguf = open_tokenizer(gguf_path)
    ours_hf = open_tokenizer(tiny_models.hf_dir(arch))
    raw_hf = RawTokenizer.from_file(str(tiny_models.hf_dir(arch) / "tokenizer.json"))
    raw_llama_cpp = _raw_llama_cpp(gguf_path)
    for text in [*MIXED, SPECIAL_SPELLINGS]:
        special = raw_hf.encode(text, add_special_tokens=False).ids
        assert ours_hf.encode(text, parse_special=True) == special
        assert ours_gguf.encode(text, parse_special=True) == special
        assert ours_gguf.encode(text, parse_special=True) == raw_llama_cpp(text, True)
        assert ours_gguf.encode(text) == raw_llama_cpp(text, False)
        assert ours_gguf.encode(text) == ours_hf.encode(text)
        _roundtrip(ours_gguf, text)
        _roundtrip(ours_hf, text)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_tiny_special_ids_agree(tiny_models: TinyModels, arch: str) -> None:
    gguf_tok = open_tokenizer(tiny_models.gguf(arch, "F16"))
    hf_tok = open_tokenizer(tiny_models.hf_dir(arch))
    for attr in ("vocab_size", "bos_id", "eos_id", "eot_ids", "add_bos"):
        assert getattr(gguf_tok, attr) == getattr(hf_tok, attr), attr
    turn_end = "<end_of_turn>" if arch == "gemma3" else "<|im_end|>"
    assert hf_tok.encode(turn_end, parse_special=True)[0] in hf_tok.eot_ids
    with_bos = gguf_tok.encode("hi", add_bos=True)
    assert with_bos[0] == gguf_tok.bos_id and with_bos[1:] == gguf_tok.encode("hi")


@pytest.mark.parametrize("source", ["gguf", "hf"])
def test_special_spellings_are_plain_text_unless_parsed(
    tiny_models: TinyModels, source: str
) -> None:
    path = tiny_models.gguf("gemma3", "F32") if source == "gguf" else tiny_models.hf_dir("gemma3")
    tok = open_tokenizer(path)
    turn = tok.encode("<start_of_turn>", parse_special=True)
    assert len(turn) == 1
    plain = tok.encode(f"x {SPECIAL_SPELLINGS}")
    assert turn[0] not in plain
    assert len(tok.encode("<start_of_turn>")) > 1
    assert tok.decode(plain) == f"x {SPECIAL_SPELLINGS}"


def test_incremental_decoder_holds_split_characters(tiny_models: TinyModels) -> None:
    for path in (tiny_models.gguf("llama", "F32"), tiny_models.hf_dir("llama")):
        tok = open_tokenizer(path)
        text = "a😀b🧬 人工智能🫠"
        ids = tok.encode(text)
        decoder = IncrementalDecoder(tok)
        deltas = [decoder.push(i) for i in ids]
        assert "".join(deltas) + decoder.flush() == text
        assert "\ufffd" not in "".join(deltas)
        assert "" in deltas  # some emoji really is split across byte-level tokens


def test_incremental_decoder_flushes_an_unfinished_character(tiny_models: TinyModels) -> None:
    tok = open_tokenizer(tiny_models.hf_dir("qwen2"))
    first_byte = next(i for i in range(tok.vocab_size) if tok.token_bytes(i) == b"\xf0")
    decoder = IncrementalDecoder(tok)
    assert decoder.push(first_byte) == ""
    assert decoder.pending_bytes == 1
    assert decoder.flush() == "\ufffd"


def test_open_tokenizer_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="tokenizer.json"):
        open_tokenizer(tmp_path)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ModelFileError, match="bad.gguf"):
        open_tokenizer(bad)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="tokenizer.json"):
        open_tokenizer(tmp_path)


@pytest.mark.model
def test_starter_model_tokenizer(starter_gguf: Path) -> None:
    tok = open_tokenizer(starter_gguf)
    assert tok.vocab_size == 262144 and tok.add_bos and tok.bos_id == 2
    assert {1, 106} <= tok.eot_ids  # <eos>, <end_of_turn>
    raw_llama_cpp = _raw_llama_cpp(starter_gguf)
    for text in [*MIXED, SPECIAL_SPELLINGS]:
        assert tok.encode(text, parse_special=True) == raw_llama_cpp(text, True)
        assert tok.encode(text) == raw_llama_cpp(text, False)
        _roundtrip(tok, text)
    assert 106 in tok.encode("<end_of_turn>", parse_special=True)
    assert 106 not in tok.encode("<end_of_turn>")
    # Gemma falls back to <0xXX> byte tokens for characters outside its vocabulary.
    byte_ids = [i for i in range(200, 600) if len(tok.token_bytes(i)) == 1]
    assert len(byte_ids) >= 256
    rare = "\U000e0067\U0001fbf9"  # a tag character and a rare symbol: no whole token for them
    ids = tok.encode(rare)
    assert set(ids) & set(byte_ids)
    decoder = IncrementalDecoder(tok)
    assert "".join(decoder.push(i) for i in ids) + decoder.flush() == rare


def _write_spm_style_tokenizer(folder: Path) -> None:
    """A sentencepiece-style tokenizer.json: Metaspace, <0xXX> byte fallback, no byte-level map."""
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab |= {f"<0x{b:02X}>": 3 + b for b in range(256)}
    for piece in ["▁", "H", "e", "l", "o", "w", "▁w", "r", "d"]:
        vocab[piece] = len(vocab)
    raw = RawTokenizer(models.BPE(vocab, [("▁", "w")], unk_token="<unk>", byte_fallback=True))
    raw.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    raw.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    raw.add_special_tokens(["<s>", "</s>"])
    raw.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text('{"bos_token": "<s>", "eos_token": "</s>"}')


def test_hf_byte_fallback_tokens_give_single_bytes(tmp_path: Path) -> None:
    _write_spm_style_tokenizer(tmp_path)
    tok = open_tokenizer(tmp_path)
    assert (tok.bos_id, tok.eos_id, tok.add_bos, tok.eot_ids) == (1, 2, False, frozenset({2}))
    text = "Hello world 😀"
    ids = tok.encode(text)
    emoji = [3 + b for b in "😀".encode()]
    assert ids[-4:] == emoji
    assert [tok.token_bytes(i) for i in emoji] == [bytes([b]) for b in "😀".encode()]
    assert tok.decode(ids) == text
    decoder = IncrementalDecoder(tok)
    deltas = [decoder.push(i) for i in ids]
    assert deltas[-4:] == ["", "", "", "😀"]
    # Piece by piece a sentencepiece word keeps its leading space; whole-text decode strips it.
    assert "".join(deltas) == " " + text
