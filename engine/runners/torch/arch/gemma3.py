"""Gemma 3 (text): sandwich norms (post-attention and post-FFN RMSNorm) and embeddings scaled
by sqrt(hidden); q/k norm, GELU-tanh, (1 + w) norms, sliding layers and the tied head come from
the model description."""

from ember.engine.runners.torch.arch.spec import ArchSpec

GEMMA3 = ArchSpec(name="gemma3", sandwich_norms=True, embed_scale=True)
