"""SmolLM3: the llama block (interleaved Q/K rows in GGUF, as llama's) whose every 4th layer has
no positional encoding at all (NoPE: q and k are not rotated; ModelConfig.layer_rope)."""

from ember.engine.runners.torch.arch.spec import ArchSpec

SMOLLM3 = ArchSpec(name="smollm3")
