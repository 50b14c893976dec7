"""What the torch runner builds differently per architecture, beyond the model description.

Everything a model file says (sizes, biases, q/k norms, RoPE, sliding layers, activation, norm
offset, tying) comes from models/files' ModelHParams; an ArchSpec holds only the structural
choices of our decoder that no file spells out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchSpec:
    """One architecture's structural switches in our decoder."""

    name: str  # GGUF general.architecture (ModelHParams.architecture)
    sandwich_norms: bool = False  # extra norms after attention and after the FFN
    embed_scale: bool = False  # multiply embeddings by sqrt(hidden)
    ffn_norm: str = "ffn_norm"  # the GGUF name of the norm before the FFN (gpt-oss differs)
