"""Is a model pretrained (base) or instruction-tuned? Decided from what its files say.

Measured on the starter (Gemma 3 270M pretrained, Q4_K_M): its GGUF has no
`tokenizer.chat_template`, no `general.finetune`, `general.name` "Gemma 3 270m",
`general.type` "model" (every GGUF says "model"; it tells nothing). Instruction-tuned releases
mark themselves: a `general.finetune` of "it" / "Instruct", a name or file name with -it,
-Instruct or -Chat, and a chat template in the file. Qwen3's post-trained models carry no name
marker (the base ones are "-Base") but always a template. The rule, first match wins:

1. `general.finetune`'s words: an instruction marker -> instruct; a base marker -> base.
2. The names (general.name, basename, file or folder name, registry name): an instruction
   marker -> instruct, else a base marker -> base.
3. A chat template in the file -> instruct; none -> base.

The limit: a pretrained file that carries an instruction template and no base marker in any
name is taken as instruct (the template is all there is to go by); `--chat-format scaffold`
overrides the decision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.models.files.gguf import GGUFModel

INSTRUCT_WORDS = frozenset(
    {"it", "instruct", "instruction", "chat", "sft", "dpo", "rlhf", "orpo", "assistant"}
)
BASE_WORDS = frozenset({"base", "pt", "pretrained", "pretrain"})
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class ModelKind:
    """The decision and the evidence it rests on (shown by `ember show` and in logs)."""

    base: bool
    reason: str


def _words(text: str) -> set[str]:
    """Lower-case alphabetic runs: 'gemma-3-270m-it-Q4_K_M' -> {gemma, m, it, q, k}."""
    return set(_WORD.findall(text.lower()))


def _marker(texts: Iterable[str]) -> tuple[str, str] | None:
    """("instruct" | "base", the text that says so), instruction markers first."""
    texts = [t for t in texts if t]
    for text in texts:
        if _words(text) & INSTRUCT_WORDS:
            return "instruct", text
    for text in texts:
        if _words(text) & BASE_WORDS:
            return "base", text
    return None


def decide_model_kind(finetune: str, names: Iterable[str], has_template: bool) -> ModelKind:
    """The rule in the module docstring, on already-extracted facts."""
    if found := _marker([finetune]):
        return ModelKind(found[0] == "base", f"finetune {found[1]!r}")
    if found := _marker(names):
        return ModelKind(found[0] == "base", f"name {found[1]!r}")
    if has_template:
        return ModelKind(False, "the file carries a chat template")
    return ModelKind(True, "no chat template and no instruction-tuned marker in its names")


def gguf_model_kind(gguf: GGUFModel, extra_names: Iterable[str] = ()) -> ModelKind:
    """The kind of a GGUF model; extra_names: its registry name, aliases."""
    meta = gguf.metadata
    names = [str(meta.get("general.name") or ""), str(meta.get("general.basename") or "")]
    names += [Path(gguf.path).stem, *extra_names]
    template = gguf.chat_template
    has_template = isinstance(template, str) and bool(template.strip())
    return decide_model_kind(str(meta.get("general.finetune") or ""), names, has_template)


def hf_model_kind(folder: Path, extra_names: Iterable[str] = ()) -> ModelKind:
    """The kind of a safetensors folder (config.json, tokenizer_config.json, chat_template.jinja)."""
    from ember.models.files.safetensors import optional_json

    config = optional_json(folder / "config.json")
    tok_config = optional_json(folder / "tokenizer_config.json")
    names = [str(config.get("_name_or_path") or ""), folder.name, *extra_names]
    source = tok_config.get("chat_template")
    has_template = (folder / "chat_template.jinja").is_file() or bool(source)
    return decide_model_kind("", names, has_template)
