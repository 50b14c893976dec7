"""Token embeddings read straight from the (quantized) weight file: only looked-up rows are
dequantized. The same table can serve as a tied LM head through a QLinear built from it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

RowReader = Callable[[torch.Tensor], torch.Tensor]  # int64 ids (T,) -> float32 rows (T, hidden)


class QEmbedding:
    """Looks rows up through a reader (GGUF mmap dequantizer, or a dense tensor)."""

    def __init__(
        self, read_rows: RowReader, scale: float, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.read_rows = read_rows
        self.scale = scale  # gemma: sqrt(hidden), applied in the compute dtype as HF does
        self.dtype = dtype
        self.device = device

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:  # (T,) -> (T, hidden)
        rows = self.read_rows(ids.cpu()).to(device=self.device, dtype=self.dtype)
        if self.scale != 1.0:
            rows = rows * torch.tensor(self.scale, dtype=self.dtype)
        return rows


class DeviceEmbedding:
    """The whole table on an accelerator in the compute dtype (lookups stay on the device, so a
    decode step can be captured in a CUDA graph); filled chunk by chunk from the file."""

    def __init__(
        self,
        chunks: Iterable[torch.Tensor],
        rows: int,
        scale: float,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.table = torch.empty(0, dtype=dtype, device=device)
        parts, filled = [], 0
        for chunk in chunks:  # float32 (n, hidden) pieces, in row order
            parts.append(chunk.to(device=device, dtype=dtype))
            filled += chunk.shape[0]
        if filled != rows:
            raise ValueError(f"embedding table: {filled} rows read, {rows} expected")
        self.table = torch.cat(parts)
        self.scale = torch.tensor(scale, dtype=dtype, device=device) if scale != 1.0 else None
        self.dtype, self.device = dtype, device

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:  # (T,) -> (T, hidden)
        rows = torch.nn.functional.embedding(ids.to(self.device), self.table)
        return rows * self.scale if self.scale is not None else rows
