"""CUDA graphs of the one-token decode step: the whole model forward captured once per shape
bucket and replayed, so a decode step costs one graph launch instead of hundreds of kernel
launches from Python.

A bucket is (batch size, full-attention table width, sliding table width), each rounded up to a
power of two. Inputs live in static tensors that each step overwrites: token ids, positions,
KV slots, the padded block tables (decode_attention.py) and the logits rows. Rows beyond the
real batch are padding: they write their K/V into a scratch block the engine never hands out
(the KV store's last block) and their logits are dropped. Graphs are a fast path only: any
step that does not fit (multi-token steps, dynamic RoPE, a table wider than the largest bucket)
runs eagerly, and `EMBER_CUDA_GRAPHS=0` turns them off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ember.engine.runners.torch.layers.decode_attention import DecodeTables
from ember.engine.runners.torch.model import StepContext
from ember.engine.runners.torch.ropes import query_temperature, step_tables

if TYPE_CHECKING:
    from ember.engine.runners.base import SeqStep
    from ember.engine.runners.torch.runner import TorchRunner

MAX_BATCH = 64
MAX_GRAPHS = 24  # captured shapes kept (each holds its own activations in a shared pool)


def _bucket(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def enabled(runner: TorchRunner) -> bool:
    """Graphs are used on CUDA unless EMBER_CUDA_GRAPHS=0, the RoPE depends on the length, or
    the model routes tokens to experts (which experts run is data, a graph replays fixed work)."""
    if runner.device.type != "cuda" or os.environ.get("EMBER_CUDA_GRAPHS", "1") == "0":
        return False
    if runner.cfg.n_experts:
        return False
    return all(r.params.kind != "dynamic" for r in runner.ropes.values())


def decode_tables(
    runner: TorchRunner, steps: list[SeqStep], batch: int, widths: dict[bool, int]
) -> dict[bool, DecodeTables]:
    """Padded tables for one-token steps (rows beyond len(steps) read the scratch block)."""
    kv = runner._store()
    scratch = kv.num_blocks - 1
    tables = [st.block_table for st in steps] + [[scratch]] * (batch - len(steps))
    ends = [st.num_cached + 1 for st in steps] + [1] * (batch - len(steps))
    window = runner.cfg.sliding_window
    return {
        sliding: DecodeTables.build(
            tables, ends, kv.block_size, widths[sliding], window if sliding else None, runner.device
        )
        for sliding in runner.ropes
    }


def table_widths(runner: TorchRunner, steps: list[SeqStep]) -> dict[bool, int]:
    """Blocks each kind of layer reads for the longest step, rounded up to a power of two."""
    bs, window = runner._store().block_size, runner.cfg.sliding_window
    out = {}
    for sliding in runner.ropes:
        need = 1
        for st in steps:
            end = st.num_cached + 1
            start = max(0, end - window) if sliding and window else 0
            need = max(need, (end - 1) // bs - start // bs + 1)
        out[sliding] = _bucket(need)
    return out


@dataclass
class _Graph:
    graph: Any  # torch.cuda.CUDAGraph
    ids: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    tables: dict[bool, DecodeTables]
    logits: torch.Tensor


class DecodeGraphs:
    """Captured decode steps of one runner, by bucket."""

    def __init__(self, runner: TorchRunner) -> None:
        self.runner = runner
        self.graphs: dict[tuple[int, ...], _Graph] = {}
        self.pool: Any = None

    def reset(self) -> None:
        """Forget every graph (the KV pools they point at were reallocated)."""
        self.graphs.clear()
        self.pool = None

    def forward(self, steps: list[SeqStep]) -> list[np.ndarray] | None:
        """Logits per step by graph replay; None when the batch does not fit a graph."""
        kv = self.runner._store()
        if not steps or len(steps) > MAX_BATCH or any(len(s.token_ids) != 1 for s in steps):
            return None
        widths = table_widths(self.runner, steps)
        if any(w * kv.block_size > kv.num_blocks * kv.block_size for w in widths.values()):
            return None
        batch = _bucket(len(steps))
        key = (batch, *(widths[s] for s in sorted(widths)))
        g = self.graphs.get(key)
        if g is None:
            if len(self.graphs) >= MAX_GRAPHS:
                return None
            g = self.graphs[key] = self._capture(batch, widths)
        self._fill(g, steps, batch, widths)
        g.graph.replay()
        logits = g.logits[: len(steps)].cpu().numpy()
        return [logits[i : i + 1] for i in range(len(steps))]

    def _fill(self, g: _Graph, steps: list[SeqStep], batch: int, widths: dict[bool, int]) -> None:
        kv, dev = self.runner._store(), self.runner.device
        pad = batch - len(steps)
        scratch_slot = (kv.num_blocks - 1) * kv.block_size
        ids = [s.token_ids[0] for s in steps] + [0] * pad
        pos = [s.positions[0] for s in steps] + [0] * pad
        slots = [
            s.block_table[s.num_cached // kv.block_size] * kv.block_size
            + s.num_cached % kv.block_size
            for s in steps
        ] + [scratch_slot] * pad
        g.ids.copy_(torch.tensor(ids, dtype=torch.int64), non_blocking=True)
        g.positions.copy_(torch.tensor(pos, dtype=torch.int64), non_blocking=True)
        g.slots.copy_(torch.tensor(slots, dtype=torch.int64), non_blocking=True)
        for sliding, table in decode_tables(self.runner, steps, batch, widths).items():
            g.tables[sliding].copy_(table)
        del dev

    def _run(self, g: _Graph) -> torch.Tensor:
        runner = self.runner
        rope = step_tables(runner.ropes, g.positions)
        q_scale = query_temperature(runner.cfg, g.positions)
        ctx = StepContext(g.slots, [], {}, rope, decode=g.tables, q_scale=q_scale)
        rows = torch.arange(g.ids.shape[0], device=runner.device)
        return runner.model(g.ids, ctx, runner._store(), rows)

    def _capture(self, batch: int, widths: dict[bool, int]) -> _Graph:
        runner, dev = self.runner, self.runner.device
        kv = runner._store()
        scratch_slot = (kv.num_blocks - 1) * kv.block_size
        dummy: list[SeqStep] = []
        g = _Graph(
            graph=torch.cuda.CUDAGraph(),
            ids=torch.zeros(batch, dtype=torch.int64, device=dev),
            positions=torch.zeros(batch, dtype=torch.int64, device=dev),
            slots=torch.full((batch,), scratch_slot, dtype=torch.int64, device=dev),
            tables=decode_tables(runner, dummy, batch, widths),
            logits=torch.empty(0),
        )
        with torch.inference_mode():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # warm up (allocator, kernels) on the scratch block
                    self._run(g)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(g.graph, pool=self.pool):
                g.logits = self._run(g)
            self.pool = g.graph.pool()
        return g
