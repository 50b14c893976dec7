"""Phi-3 / Phi-4-mini: the llama block with q|k|v and gate|up each stored as one fused tensor
(built as our fused linears directly), RoPE over the first rope_dim dims of each head (Phi-4-mini:
96 of 128) and LongRoPE's per-frequency factors, picked for the context (ropes.py)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

PHI3 = ArchSpec(name="phi3")
