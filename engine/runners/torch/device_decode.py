"""One-token decode steps on an accelerator: the whole batch through padded block tables in one
forward (static shapes), replayed from a CUDA graph where one was captured (cuda_graphs.py).

On the CPU the runner uses its native step instead; `decode_batch` still runs there (the tests
compare it with the per-sequence path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ember.engine.errors import EngineError
from ember.engine.runners.torch.cuda_graphs import decode_tables, table_widths
from ember.engine.runners.torch.model import StepContext
from ember.engine.runners.torch.ropes import query_temperature, step_tables

if TYPE_CHECKING:
    from ember.engine.runners.base import SeqStep
    from ember.engine.runners.torch.runner import TorchRunner


def one_token_steps(steps: list[SeqStep]) -> bool:
    """Every step decodes exactly one token and wants its logits."""
    return bool(steps) and all(len(s.token_ids) == 1 and s.num_logits == 1 for s in steps)


def decode_batch(runner: TorchRunner, steps: list[SeqStep]) -> list[np.ndarray]:
    """Logits (1, vocab) per one-token step, all sequences in one static-shape forward."""
    kv = runner._store()
    bs = kv.block_size
    for st in steps:
        if len(st.block_table) * bs < st.num_cached + 1:
            raise EngineError(f"seq {st.seq_id}: bad step (1 token, {len(st.block_table)} blocks)")
    dev = runner.device
    widths = table_widths(runner, steps)
    tables = decode_tables(runner, steps, len(steps), widths)
    positions = torch.tensor([s.positions[0] for s in steps], dtype=torch.int64, device=dev)
    slots = torch.tensor(
        [s.block_table[s.num_cached // bs] * bs + s.num_cached % bs for s in steps],
        dtype=torch.int64,
        device=dev,
    )
    rope = step_tables(runner.ropes, positions)
    ids = torch.tensor([s.token_ids[0] for s in steps], dtype=torch.int64, device=dev)
    q_scale = query_temperature(runner.cfg, positions)
    ctx = StepContext(slots, [], {}, rope, decode=tables, q_scale=q_scale)
    with torch.inference_mode():
        rows = torch.arange(len(steps), device=dev)
        logits = runner.model(ids, ctx, kv, rows).cpu().numpy()
    return [logits[i : i + 1] for i in range(len(steps))]
