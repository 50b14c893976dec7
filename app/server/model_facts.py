"""What the server tells about a model it serves, read from the model's own files: the GGUF
metadata (Ollama's `model_info`), the chat template, whether it is an embedding model.

Only called for names the pool serves (registered, the operator's --model or opt-ins), never
for a name a client made up. Reads are cached per file (path, size, mtime), so /api/tags and
every request's embedding check parse a header once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.models.files.pooling import SENTENCE_POOLINGS, gguf_pooling

MAX_SHOWN_ARRAY = 64  # longer metadata arrays (vocabularies) are shown as null unless verbose


@dataclass(frozen=True)
class ModelFacts:
    """One local model's self-description."""

    path: Path
    format: str  # gguf | safetensors
    architecture: str
    template: str  # the chat template's source (the model's own or the built-in stand-in)
    pooling: str | None = None  # GGUF pooling type; None for generative models
    metadata: dict[str, Any] = field(default_factory=dict)  # scalar (and short array) values
    array_keys: tuple[str, ...] = ()  # long arrays left out of metadata
    n_params: int = 0

    @property
    def embeds(self) -> bool:
        """Whether the model is an embedding model (it declares a sentence pooling)."""
        return self.pooling in SENTENCE_POOLINGS

    def model_info(self) -> dict[str, Any]:
        """Ollama's model_info: the metadata keys, long arrays as null, the parameter count."""
        info: dict[str, Any] = {
            k: v for k, v in self.metadata.items() if k != "tokenizer.chat_template"
        }
        info.update({key: None for key in self.array_keys})
        info["general.parameter_count"] = self.n_params
        return dict(sorted(info.items()))


def model_facts(name: str) -> ModelFacts | None:
    """The facts of a served model name (None for remote servers and unresolvable names)."""
    from ember.app.loading import open_registry
    from ember.errors import EmberError

    try:
        resolved = open_registry().resolve(name)
    except EmberError:
        return None
    if resolved.format not in ("gguf", "safetensors"):
        return None
    try:
        stat = resolved.path.stat()
        return _read(str(resolved.path), resolved.format, stat.st_size, stat.st_mtime_ns)
    except (OSError, EmberError):
        return None


@functools.lru_cache(maxsize=64)
def _read(path: str, fmt: str, size: int, mtime_ns: int) -> ModelFacts:
    del size, mtime_ns  # cache keys only: a rewritten file is read again
    if fmt == "gguf":
        return _gguf_facts(Path(path))
    return _hf_facts(Path(path))


def _gguf_facts(path: Path) -> ModelFacts:
    from ember.models.files.gguf import open_gguf
    from ember.models.text.templates.chat_template import ChatTemplate

    model = open_gguf(path)
    metadata: dict[str, Any] = {}
    long_arrays: list[str] = []
    for key, value in model.metadata.items():
        if isinstance(value, list) and len(value) > MAX_SHOWN_ARRAY:
            long_arrays.append(key)
        else:
            metadata[key] = value
    long_arrays += [k for k in model.array_keys if k not in metadata]
    return ModelFacts(
        path=path,
        format="gguf",
        architecture=model.architecture,
        template=ChatTemplate.from_gguf(model).source,
        pooling=gguf_pooling(model.metadata),
        metadata=metadata,
        array_keys=tuple(sorted(set(long_arrays))),
        n_params=model.n_params,
    )


def _hf_facts(folder: Path) -> ModelFacts:
    from ember.models.files.safetensors import open_safetensors
    from ember.models.text.templates.chat_template import ChatTemplate

    model = open_safetensors(folder)
    hp = model.hparams
    metadata: dict[str, Any] = {"general.architecture": model.architecture}
    if hp is not None:  # the same keys a GGUF of this model would carry
        arch = model.architecture
        metadata.update(
            {
                f"{arch}.block_count": hp.n_layers,
                f"{arch}.context_length": hp.context_length,
                f"{arch}.embedding_length": hp.hidden_size,
                f"{arch}.feed_forward_length": hp.ffn_size,
                f"{arch}.attention.head_count": hp.n_heads,
                f"{arch}.attention.head_count_kv": hp.n_kv_heads,
                f"{arch}.rope.freq_base": hp.rope_theta,
                f"{arch}.vocab_size": hp.vocab_size,
            }
        )
    return ModelFacts(
        path=folder,
        format="safetensors",
        architecture=model.architecture,
        template=ChatTemplate.from_hf(model).source,
        metadata=metadata,
        n_params=model.n_params,
    )


def show_body(name: str, card: dict[str, Any], facts: ModelFacts | None) -> dict[str, Any]:
    """/api/show: the model's own template and metadata where its files are local."""
    info: dict[str, Any] = {"general.architecture": card["details"]["family"]}
    capabilities = ["completion", "tools"]
    template = ""
    if facts is not None:
        info, template = facts.model_info(), facts.template
        if facts.embeds:  # an embedding model (bert...) generates nothing here
            capabilities = ["embedding"]
        elif facts.format == "gguf":  # llama.cpp mean-pools a chat model (embeddings.py)
            capabilities.append("embedding")
    return {
        "modelfile": f"FROM {name}\n",
        "parameters": "",
        "template": template,
        "details": card["details"],
        "model_info": info,
        "capabilities": capabilities,
    }
