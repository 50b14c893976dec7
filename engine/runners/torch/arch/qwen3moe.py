"""Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): the qwen3 block (q/k norms) whose FFN is a
routed mixture of experts in every layer (layers/moe.py; the expert counts come from the file)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

QWEN3MOE = ArchSpec(name="qwen3moe")
