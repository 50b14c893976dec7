"""Model files: GGUF, safetensors, quant formats, tokenizers, chat templates, Hub, registry."""
