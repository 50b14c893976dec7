"""Token embeddings read straight from the (quantized) weight file: only looked-up rows are
dequantized. The same table can serve as a tied LM head through a QLinear built from it."""

from __future__ import annotations

from collections.abc import Callable

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
