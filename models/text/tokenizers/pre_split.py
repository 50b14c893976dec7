"""GGUF pre-tokenizers (`tokenizer.ggml.pre`): which split each family's files name, and the one
line that says so when llama.cpp cannot load a vocabulary because it does not know the name.

A BPE vocabulary (`tokenizer.ggml.model` gpt2) splits text with a regex llama.cpp picks by this
name before merging; SentencePiece vocabularies (`llama`, Gemma's) ignore it. llama.cpp refuses
a name it does not know ("unknown pre-tokenizer type"); through llama-cpp-python that arrives
as a bare load failure, so `load_failure_reason` reads the file's name and explains. The list
is what llama-cpp-python's bundled llama.cpp knows (src/llama-vocab.cpp): it is used only to
explain a failure, never to refuse a file llama.cpp loads.
"""

from __future__ import annotations

from pathlib import Path

# the pre-tokenizers llama.cpp (llama-cpp-python 0.3.36) maps to a split
KNOWN_PRE_SPLITS = frozenset(
    """default minicpm5 llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2
    jina-v5-nano deepseek-llm deepseek-coder deepseek-v3 spark2_5 youtu falcon mpt starcoder gpt-2
    phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert jais-2 gemma4
    granite-embed-multi-311m sarvam-moe jina-v1-en jina-v2-code roberta-bpe whitespace refact
    command-r qwen2 deepseek-r1-qwen kormo f2llmv2 qwen35 stablelm2 olmo dbrx smaug-bpe poro-chat
    chatglm-bpe glm4 glm5 viking jais tekken smollm codeshell bloom gpt3-finnish exaone exaone4
    exaone-moe chameleon minerva-7b megrez gpt-4o llama4 kanana2 talkie granite-embed-multi-97m
    tiny_aya cohere2moe superbpe trillion granite-docling bailingmoe bailingmoe2 llada-moe
    seed-coder hunyuan hunyuan-dense hy_v4 joyai-llm kimi-k2 ufakzeka grok-2 afmoe laguna
    minimax-m2 solar-open mellum2""".split()
)
BPE_MODELS = frozenset({"gpt2", "hybriddna", "whitespace"})  # the ones that read the name
KNOWN_MODELS = BPE_MODELS | {"llama", "bert", "t5", "rwkv", "plamo2", "gemma4", "no_vocab", "none"}

# the split each family's released GGUF files name (llama.cpp's convert_hf_to_gguf)
FAMILY_PRE_SPLITS = {
    "llama": "llama-bpe",  # Llama 3.x (Llama 2's SentencePiece files: "default")
    "qwen2": "qwen2",
    "qwen3": "qwen2",
    "qwen3moe": "qwen2",
    "gemma3": "default",  # SentencePiece
    "gemma2": "default",  # SentencePiece
    "phi3": "gpt-4o",  # Phi-4-mini's o200k vocabulary (Phi-3's SentencePiece: "default")
    "smollm3": "llama-bpe",  # SmolLM3 uses Llama 3's tokenizer
    "mistral3": "tekken",  # Ministral 3 / Mistral Small 3.x
}


def pre_split_problem(model: str | None, pre: str | None) -> str:
    """Why llama.cpp would refuse this tokenizer.ggml.model / .pre pair ("" when it would not)."""
    if model is not None and model not in KNOWN_MODELS:
        return f"tokenizer.ggml.model: {model!r} is not a vocabulary type llama.cpp knows"
    if model in BPE_MODELS and pre and pre not in KNOWN_PRE_SPLITS:
        return (
            f"tokenizer.ggml.pre: {pre!r} is not a pre-tokenizer llama.cpp knows (it splits "
            "BPE text by this name: a newer llama-cpp-python, or a file converted for it, "
            "may be needed)"
        )
    return ""


def load_failure_reason(path: Path) -> str:
    """The tokenizer's reason a GGUF file failed to load in llama.cpp, "" when it is not that."""
    from ember.models.errors import ModelFileError
    from ember.models.files.gguf import open_gguf

    try:
        meta = open_gguf(path).tokenizer
    except ModelFileError:
        return ""
    return pre_split_problem(meta.model, meta.pre)
