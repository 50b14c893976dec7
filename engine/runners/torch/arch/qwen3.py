"""Qwen3: the llama block with per-head RMSNorm on q and k before RoPE (from the file)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

QWEN3 = ArchSpec(name="qwen3")
