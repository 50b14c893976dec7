"""Gemma 2: sandwich norms (post-attention and post-FFN RMSNorm), embeddings scaled by
sqrt(hidden), tanh soft-capping of attention scores (50) and final logits (30), and sliding-window
layers alternating with global ones; no q/k norms (gemma3 added them)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

GEMMA2 = ArchSpec(name="gemma2", sandwich_norms=True, embed_scale=True)
