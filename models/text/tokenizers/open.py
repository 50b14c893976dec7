"""`open_tokenizer(path)`: the Tokenizer of a model file or folder (see base.py for the protocol).

The implementations import heavy libraries (llama_cpp, tokenizers); they load on first use.
"""

from __future__ import annotations

from pathlib import Path

from ember.models.errors import ModelFileError
from ember.models.text.tokenizers.base import Tokenizer


def open_tokenizer(path: Path | str) -> Tokenizer:
    """The tokenizer of a .gguf file (llama.cpp vocab) or a Hugging Face model folder."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".gguf":
        from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer

        return LlamaCppTokenizer(path)
    if path.is_dir() and (path / "tokenizer.json").is_file():
        from ember.models.text.tokenizers.hf import HFTokenizer

        return HFTokenizer(path)
    if path.is_dir():
        raise ModelFileError(f"{path}: no tokenizer.json in this model folder")
    raise ModelFileError(f"{path}: not a .gguf file or a model folder with tokenizer.json")
