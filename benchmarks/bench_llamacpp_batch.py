"""What batching can give on llama.cpp itself: one decode step of 1 vs N sequences, raw llama_decode.

    python benchmarks/bench_llamacpp_batch.py [--threads 2] [--seqs 4] [--contexts 10,500]
        [--steps 8] [--reps 3]

For each context length (tokens already cached per sequence) and KV layout (`unified`: one cell
pool, what Ember's runner uses; `streams`: llama.cpp's per-sequence KV streams, kv_unified=False
with n_seq_max = --seqs), it decodes --steps tokens for 1 sequence and for --seqs sequences in
one batch, and prints the aggregate tok/s ratio (median of --reps, configurations interleaved),
plus the step's CPU time split into the layers and the 262k-row output head (the same steps
with no logits requested: llama.cpp then skips the head). This is the ceiling the engine's
batching runs under; bench_engine_policies.py --only batch measures the engine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ember.engine.runners.llamacpp.lib import TokenBatch, decode, lib, load_model  # noqa: E402
from ember.models.registry.starter import starter_path  # noqa: E402


def _context(model: Any, unified: bool, seqs: int, per_seq: int, threads: int) -> Any:
    llama = lib()
    params = llama.llama_context_default_params()
    # streams: each of n_seq_max streams gets n_ctx / n_seq_max cells
    params.n_ctx = (per_seq + 64) * seqs
    params.n_batch = params.n_ubatch = 512
    params.n_seq_max = seqs
    params.n_threads = params.n_threads_batch = threads
    params.kv_unified = unified
    params.swa_full = True
    params.no_perf = True
    params.flash_attn_type = llama.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = llama.llama_init_from_model(model, params)
    if not ctx:
        raise SystemExit("llama.cpp could not create the context")
    return ctx


def _prefill(ctx: Any, vocab: int, seqs: int, cached: int) -> None:
    """A fresh cache holding `cached` prompt tokens in each of `seqs` sequences."""
    llama = lib()
    llama.llama_memory_clear(llama.llama_get_memory(ctx), True)
    batch = TokenBatch(512)
    for seq in range(seqs):  # in chunks the batch holds
        for start in range(0, cached, 512):
            ids = [1000 + (seq * 7 + i) % 5000 for i in range(start, min(cached, start + 512))]
            batch.clear()
            batch.add(seq, ids, list(range(start, start + len(ids))), 0)
            decode(ctx, batch, vocab)


def _steps(
    ctx: Any, vocab: int, seqs: int, cached: int, steps: int, logits: bool
) -> tuple[float, float]:
    """(wall s, CPU s) of `steps` decode steps of `seqs` sequences; their cells are removed after."""
    llama = lib()
    batch = TokenBatch(512)
    wall = cpu = 0.0
    for step in range(steps):
        batch.clear()
        for seq in range(seqs):
            batch.add(seq, [2000 + step], [cached + step], int(logits))
        w0, c0 = time.perf_counter(), time.process_time()
        decode(ctx, batch, vocab)
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    for seq in range(seqs):
        llama.llama_memory_seq_rm(llama.llama_get_memory(ctx), seq, cached, -1)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seqs", type=int, default=4)
    parser.add_argument("--contexts", default="10,500")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    model_path = starter_path(
        Path(__file__).resolve().parent.parent / "tests" / ".cache" / "models"
    )
    llama = lib()
    model = load_model(model_path, 0)
    vocab = llama.llama_vocab_n_tokens(llama.llama_model_get_vocab(model))
    contexts = [int(c) for c in args.contexts.split(",")]
    layouts = {"unified": True, "streams": False}
    ctxs = {
        (c, name): _context(model, unified, args.seqs, c + args.steps, args.threads)
        for c in contexts
        for name, unified in layouts.items()
    }
    got: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for _ in range(args.reps):
        for key, ctx in ctxs.items():
            for n in (1, args.seqs):
                _prefill(ctx, vocab, n, key[0])
                for logits in (True, False):
                    got.setdefault((*key, n, logits), []).append(
                        _steps(ctx, vocab, n, key[0], args.steps, logits)
                    )
    med = {k: tuple(statistics.median(x[i] for x in v) for i in (0, 1)) for k, v in got.items()}
    print(f"threads {args.threads}, {args.steps} steps, medians of {args.reps}")
    for c, name in ctxs:
        one, many = med[(c, name, 1, True)], med[(c, name, args.seqs, True)]
        rate1, rate_n = args.steps / one[0], args.seqs * args.steps / many[0]
        head1 = one[1] - med[(c, name, 1, False)][1]
        head_n = many[1] - med[(c, name, args.seqs, False)][1]
        print(
            f"context {c:5d} {name:8s}: 1 seq {rate1:6.1f} tok/s, {args.seqs} seqs {rate_n:6.1f} "
            f"tok/s ({rate_n / rate1:.2f}x; by CPU time {args.seqs * one[1] / many[1]:.2f}x); "
            f"CPU ms/step layers {(one[1] - head1) * 1e3 / args.steps:.1f} -> "
            f"{(many[1] - head_n) * 1e3 / args.steps:.1f}, head {head1 * 1e3 / args.steps:.1f} "
            f"-> {head_n * 1e3 / args.steps:.1f}"
        )
    for ctx in ctxs.values():
        llama.llama_free(ctx)
    llama.llama_model_free(model)


if __name__ == "__main__":
    main()
