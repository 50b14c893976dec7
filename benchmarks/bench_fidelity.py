"""The torch runner's agreement with llama.cpp on the starter, per native ISA path: the numbers
tests/engine/runners/torch/test_vs_llamacpp.py's thresholds are derived from.

Usage: python benchmarks/bench_fidelity.py [--isa avx2,portable] [--json]

For each ISA this CPU runs (or those named) a child process with EMBER_ISA set scores 512
tokens of English text (tests/engine/runners/torch/data/english.txt) teacher-forced: the prompt
path (one 513-token prefill) and the quantized path (16-token steps, the native kernels'
8-bit activations), against llama.cpp's logits on the same ids (computed once). It prints top-1
agreement (and the count of 512) and the perplexity ratio for each, beside the CPU's model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def score(reference: Path) -> dict[str, float]:
    """In this process (EMBER_ISA as set): both paths' agreement and perplexity ratio."""
    import numpy as np

    from ember.engine.runners.base import ForwardBatch
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner
    from ember.models.registry.starter import starter_path
    from tests.engine.runners.torch.helpers import SimpleSeq, prefill_logits, scattered_blocks
    from tests.engine.runners.torch.test_vs_llamacpp import mean_nll

    data = np.load(reference)
    ids, expected = [int(i) for i in data["ids"]], data["logits"]
    path = starter_path(ROOT / "tests" / ".cache" / "models")
    runner = TorchRunner.load(path, TorchOptions(device="cpu", threads=2))
    assert runner.native is not None, "no native kernels"
    fresh = prefill_logits(runner, ids, num_blocks=40)
    runner.init_kv(40, 16)
    seq = SimpleSeq(0, 16, scattered_blocks(40))
    steps = [ids[i : i + 16] for i in range(0, len(ids), 16)]
    stepped = np.concatenate(
        [runner.forward(ForwardBatch([seq.step(s, num_logits=len(s))]))[0] for s in steps]
    )
    ref_nll = mean_nll(expected, ids)
    out: dict[str, float] = {}
    for name, got in (("prompt", fresh), ("quantized", stepped)):
        agree = got.argmax(-1) == expected.argmax(-1)
        out[f"{name}_top1"], out[f"{name}_agree"] = float(agree.mean()), int(agree.sum())
        out[f"{name}_ppl_ratio"] = float(np.exp(mean_nll(got, ids) - ref_nll))
    return out


def reference_file() -> Path:
    import numpy as np
    from llama_cpp import Llama

    from ember.models.registry.starter import starter_path
    from tests.fixtures.llama_reference import llama_logits

    path = starter_path(ROOT / "tests" / ".cache" / "models")
    text = (ROOT / "tests/engine/runners/torch/data/english.txt").read_text()
    ids = Llama(str(path), vocab_only=True, verbose=False).tokenize(text.encode(), add_bos=True)
    ids = ids[:513]
    out = Path(tempfile.mkdtemp(prefix="ember-fidelity-")) / "reference.npz"
    np.savez(out, ids=np.array(ids), logits=llama_logits(path, ids))
    return out


def main(argv: list[str] | None = None) -> None:
    from ember.engine.runners.torch.native.isa import runnable, this_cpu

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--isa", default="", help="comma-separated ISAs (default: all this CPU runs)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(score(Path(args.child))))
        return
    isas = args.isa.split(",") if args.isa else [i.name for i in runnable()]
    reference = reference_file()
    rows = {}
    for isa in isas:
        env = {**os.environ, "EMBER_ISA": isa}
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(reference)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            sys.exit(f"EMBER_ISA={isa}: {proc.stderr.strip().splitlines()[-1]}")
        rows[isa] = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{this_cpu().machine}, CPU flags avx512f={'avx512f' in this_cpu().flags}; 513 positions")
    print(
        f"{'ISA':<10}{'prompt top-1':>16}{'ppl ratio':>11}{'quantized top-1':>19}{'ppl ratio':>11}"
    )
    for isa, r in rows.items():
        print(
            f"{isa:<10}{r['prompt_top1']:>10.4f} ({r['prompt_agree']}){r['prompt_ppl_ratio']:>11.4f}"
            f"{r['quantized_top1']:>13.4f} ({r['quantized_agree']}){r['quantized_ppl_ratio']:>11.4f}"
        )


if __name__ == "__main__":
    main()
