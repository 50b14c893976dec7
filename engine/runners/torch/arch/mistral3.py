"""Ministral 3 / Mistral Small 3.x text (GGUF general.architecture "mistral3"): the llama block
with YaRN RoPE and, for Ministral 3, a query temperature that grows with the position past the
original context (ropes.query_temperature; llama.cpp's attention.temperature_scale)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

MISTRAL3 = ArchSpec(name="mistral3")
