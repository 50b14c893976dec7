"""Qwen2 / Qwen2.5: the llama block with biases on the q, k and v projections (from the file)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

QWEN2 = ArchSpec(name="qwen2")
