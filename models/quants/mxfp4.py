"""MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): blocks of 32 E2M1 values sharing one
E8M0 power-of-two scale.

A GGUF block is 17 bytes: the scale byte e, then 16 bytes of 4-bit codes; byte j holds element
j in its low nibble and element j + 16 in its high nibble (ggml's block_mxfp4). A code is an
E2M1 value, which ggml stores doubled as a small integer (kvalues_mxfp4: 0, 1, 2, 3, 4, 6, 8, 12
and their negatives), so the scale is halved to match:

    w = kvalue[code] * 2^(e - 128)          (= E2M1 value * 2^(e - 127), the MX definition)

Hugging Face checkpoints (gpt-oss's `*_blocks` / `*_scales`) keep the same codes and scale bytes
but pack two consecutive elements per byte (element 2i low, 2i + 1 high) and the scales apart;
`ggml_blocks_from_hf` repacks them into GGUF blocks, so both formats share one dequantizer.

A scale byte of 0xFF is NaN in the MX specification, and one of 0xFD or 0xFE makes codes of 8 or
12 overflow float32: no trained weight has such a scale, so a block with one is refused
(ModelFileError; the weight readers add the tensor's name) instead of turning into inf/NaN logits.
"""

from __future__ import annotations

import torch

from ember.models.errors import ModelFileError

BLOCK_ELEMENTS, BLOCK_BYTES = 32, 17
# E2M1 values doubled (ggml's kvalues_mxfp4): codes 8..15 are the negatives of 0..7
KVALUES = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)
NAN_SCALE = 0xFF
LARGEST_FINITE = 3.4028234663852886e38  # float32's largest value


def _kvalues(device: torch.device) -> torch.Tensor:
    return torch.tensor(KVALUES, dtype=torch.float32, device=device)


def half_scale(e: torch.Tensor) -> torch.Tensor:
    """2^(e - 128) as float32 for uint8 scale bytes e (ggml_e8m0_to_fp32_half: e < 2 are the
    float32 denormals 2^-128 and 2^-127), built from its bits, as ggml does."""
    e32 = e.to(torch.int32)
    bits = torch.where(e32 < 2, torch.full_like(e32, 0x00200000) << e32, (e32 - 1) << 23)
    return bits.view(torch.float32)


def codes(blocks: torch.Tensor) -> torch.Tensor:
    """(n, 17) blocks -> (n, 32) 4-bit codes in element order (low nibbles, then high)."""
    qs = blocks[:, 1:BLOCK_BYTES]
    return torch.cat([qs & 0x0F, qs >> 4], dim=-1)


def check_scales(blocks: torch.Tensor) -> None:
    """ModelFileError when a block's scale is NaN (0xFF) or overflows its values."""
    e = blocks[:, 0]
    bad = e == NAN_SCALE
    high = e >= 0xFD  # only these can overflow: 12 * 2^(0xFC - 128) is still finite
    if bool(high.any()):
        peak = _kvalues(blocks.device).abs()[codes(blocks[high]).long()].amax(dim=-1)
        bad[high] |= peak * half_scale(e[high]) > LARGEST_FINITE
    if bool(bad.any()):
        index = int(torch.nonzero(bad)[0, 0])
        byte = int(e[index])
        why = "NaN in the MX format" if byte == NAN_SCALE else "its values overflow float32"
        raise ModelFileError(f"an MXFP4 block has scale byte 0x{byte:02X} ({why})")


def dequant_mxfp4(blocks: torch.Tensor) -> torch.Tensor:
    """uint8 blocks (n, 17) -> float32 (n, 32), bit-identical to gguf.quants' MXFP4."""
    check_scales(blocks)
    d = half_scale(blocks[:, 0])[:, None]
    return d * _kvalues(blocks.device)[codes(blocks).long()]


def affine_mxfp4(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MXFP4 as (u 0..24, a, b) with w = u a + b exactly: u = kvalue + 12, a = d, b = -12 d.
    d is a power of two, so a and b keep every bit in bfloat16 too (the int8g repacking)."""
    check_scales(blocks)
    d = half_scale(blocks[:, 0])[:, None]
    k = torch.tensor(KVALUES, dtype=torch.int16, device=blocks.device)[codes(blocks).long()]
    return (k + 12).to(torch.uint8), d, -12.0 * d


def ggml_blocks_from_hf(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """A Hugging Face MXFP4 pair -> GGUF blocks: blocks (..., G, 16) uint8 with element 2i in
    byte i's low nibble and 2i + 1 in its high one, scales (..., G) uint8 -> (..., G * 17)."""
    if blocks.shape[-1] != 16 or tuple(blocks.shape[:-1]) != tuple(scales.shape):
        raise ModelFileError(
            f"MXFP4 blocks of shape {tuple(blocks.shape)} do not fit scales of shape "
            f"{tuple(scales.shape)} (want (..., G, 16) and (..., G))"
        )
    element = torch.stack([blocks & 0x0F, blocks >> 4], dim=-1).flatten(-2)  # (..., G, 32)
    packed = element[..., :16] | (element[..., 16:] << 4)  # ggml: j low, j + 16 high
    out = torch.cat([scales.to(torch.uint8)[..., None], packed], dim=-1)  # (..., G, 17)
    return out.flatten(-2).contiguous()
