"""The torch runner on a GPU against llama.cpp's GPU build, on the same GGUF, side by side.

    python benchmarks/bench_gpu.py [--model gemma3-270m] [--prompt 512] [--decode 256]
        [--repeats 3] [--batch 1,4,16] [--json]

Rows: prefill tok/s of one --prompt-token prompt; decode tok/s of --decode greedy tokens for
each batch size (that many sequences decoding together, aggregate tok/s), torch with CUDA
graphs and without (EMBER_CUDA_GRAPHS=0 in a fresh process), and llama-cpp-python with every
layer offloaded when its build supports GPU offload (else that column says why). Medians over
--repeats, each repeat in a fresh process, runners alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _prompt(vocab: int, n: int, seed: int = 0) -> list[int]:
    import numpy as np

    return [int(x) for x in np.random.default_rng(seed).integers(10, vocab, n)]


def _torch(model: str, prompt: int, decode: int, batch: int) -> dict[str, float]:
    import torch

    from ember.engine.runners.base import ForwardBatch, SeqStep
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    runner = TorchRunner.load(model, TorchOptions(device="cuda"))
    bs, per_seq = 16, (prompt + decode) // 16 + 1
    runner.init_kv(per_seq * batch, bs)
    tables = [list(range(i * per_seq, (i + 1) * per_seq)) for i in range(batch)]
    ids = _prompt(runner.info.vocab_size, prompt)
    torch.cuda.synchronize()
    t = time.perf_counter()
    logits = [
        runner.forward(ForwardBatch([SeqStep(i, ids, list(range(prompt)), 0, tables[i])]))[0]
        for i in range(batch)
    ]
    torch.cuda.synchronize()
    prefill = batch * prompt / (time.perf_counter() - t)
    t = time.perf_counter()
    for pos in range(prompt, prompt + decode):
        steps = [
            SeqStep(i, [int(logits[i][-1].argmax())], [pos], pos, tables[i]) for i in range(batch)
        ]
        logits = runner.forward(ForwardBatch(steps))
    torch.cuda.synchronize()
    return {"prefill": prefill, "decode": batch * decode / (time.perf_counter() - t)}


def _llamacpp(model: str, prompt: int, decode: int, batch: int) -> dict[str, float]:
    import llama_cpp

    from ember.engine.runners.base import ForwardBatch, SeqStep
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    if not llama_cpp.llama_supports_gpu_offload():
        raise RuntimeError("this llama-cpp-python build has no GPU offload")
    runner = LlamaCppRunner.load(model, gpu_layers=-1)
    bs, per_seq = 16, (prompt + decode) // 16 + 1
    runner.init_kv(per_seq * batch, bs)
    tables = [list(range(i * per_seq, (i + 1) * per_seq)) for i in range(batch)]
    ids = _prompt(runner.info.vocab_size, prompt)
    t = time.perf_counter()
    logits = [
        runner.forward(ForwardBatch([SeqStep(i, ids, list(range(prompt)), 0, tables[i])]))[0]
        for i in range(batch)
    ]
    prefill = batch * prompt / (time.perf_counter() - t)
    t = time.perf_counter()
    for pos in range(prompt, prompt + decode):
        steps = [
            SeqStep(i, [int(logits[i][-1].argmax())], [pos], pos, tables[i]) for i in range(batch)
        ]
        logits = runner.forward(ForwardBatch(steps))
    return {"prefill": prefill, "decode": batch * decode / (time.perf_counter() - t)}


CONFIGS = {
    "torch + CUDA graphs": ("torch", {"EMBER_CUDA_GRAPHS": "1"}),
    "torch eager": ("torch", {"EMBER_CUDA_GRAPHS": "0"}),
    "llama.cpp (GPU)": ("llama.cpp", {}),
}


def _child(argv: list[str]) -> None:
    kind, model = argv[0], argv[1]
    prompt, decode, batch = (int(a) for a in argv[2:5])
    run = _torch if kind == "torch" else _llamacpp
    print(json.dumps(run(model, prompt, decode, batch)))


def _once(name: str, model: str, args: argparse.Namespace, batch: int) -> dict[str, float] | str:
    kind, env = CONFIGS[name]
    cmd = [sys.executable, __file__, "--child", kind, model]
    cmd += [str(args.prompt), str(args.decode), str(batch)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(lines[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--decode", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", default="1,4,16")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from ember.app.loading import resolve_files

    model = str(resolve_files(args.model).path)
    table: dict[str, dict[str, object]] = {}
    for batch in (int(b) for b in args.batch.split(",")):
        runs: dict[str, list[dict[str, float]]] = {n: [] for n in CONFIGS}
        notes: dict[str, str] = {}
        for _ in range(args.repeats):
            for name in CONFIGS:
                result = _once(name, model, args, batch)
                if isinstance(result, str):
                    notes[name] = result
                else:
                    runs[name].append(result)
        for name in CONFIGS:
            row = table.setdefault(name, {})
            if runs[name]:
                row[f"decode x{batch}"] = statistics.median(r["decode"] for r in runs[name])
                if batch == 1:
                    row["prefill"] = statistics.median(r["prefill"] for r in runs[name])
            else:
                row["note"] = notes.get(name, "no result")
    if args.json:
        print(json.dumps(table))
        return
    columns = ["prefill"] + [f"decode x{b}" for b in args.batch.split(",")]
    print(
        f"{Path(model).name}, prompt {args.prompt}, decode {args.decode}, medians of {args.repeats}"
    )
    print("| runner | " + " | ".join(f"{c} tok/s" for c in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, row in table.items():
        cells = [f"{row[c]:.1f}" if c in row else "-" for c in columns]
        note = f" ({row['note']})" if "note" in row else ""
        print(f"| {name}{note} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
