"""Side-by-side speed and memory of the torch runner and llama-cpp-python on one GGUF.

Each measurement runs in a fresh subprocess (cold start and peak RSS are per process): load,
prefill of a fixed prompt, then greedy decode. The parent takes medians over repetitions.
The torch runner is measured with its packed-weight cache filled (every start after the first),
and once more with an empty cache ("torch, 1st run": the one-time conversion). Besides the peak
RSS, each run reports its runtime's baseline (RSS right after importing torch or llama_cpp),
so "model RSS" = peak - baseline is what the model itself costs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.engine.api import ModelFiles

RUNNERS = ("torch", "llama.cpp")
FIRST_RUN = "torch, 1st run"  # torch with an empty packed-weight cache


@dataclass
class BenchResult:
    """One run of one runner."""

    runner: str
    load_s: float  # process start -> model ready (imports included)
    first_token_s: float  # process start -> first generated token (cold start)
    prefill_tok_s: float
    decode_tok_s: float
    peak_rss_mb: float
    base_rss_mb: float = 0.0  # RSS after importing the runtime, before loading the model

    @property
    def model_rss_mb(self) -> float:
        """Peak RSS beyond the runtime's own."""
        return self.peak_rss_mb - self.base_rss_mb


def current_rss_mb() -> float:
    """Resident set size now (Linux /proc; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _prompt(vocab_size: int, num_tokens: int) -> list[int]:
    import numpy as np

    return [int(x) for x in np.random.default_rng(0).integers(10, vocab_size, num_tokens)]


def _run_torch(
    path: str, threads: int, prompt_len: int, decode_len: int, t0: float, cache: tuple[str, str]
) -> tuple[float, float, float, float]:
    from ember.engine.runners.base import ForwardBatch, SeqStep
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    packed_dir, digest = cache
    opts = TorchOptions(device="cpu", threads=threads, packed_cache_dir=packed_dir)
    runner = TorchRunner.load(path, opts, digest=digest)
    load_s = time.perf_counter() - t0
    block_size = 16
    total = prompt_len + decode_len
    runner.init_kv(total // block_size + 1, block_size)
    table = list(range(total // block_size + 1))
    ids = _prompt(runner.info.vocab_size, prompt_len)
    t = time.perf_counter()
    logits = runner.forward(ForwardBatch([SeqStep(0, ids, list(range(prompt_len)), 0, table)]))[0]
    prefill_s = time.perf_counter() - t
    first_token_s = time.perf_counter() - t0
    t = time.perf_counter()
    for pos in range(prompt_len, total):
        tok = int(logits[-1].argmax())
        logits = runner.forward(ForwardBatch([SeqStep(0, [tok], [pos], pos, table)]))[0]
    return load_s, first_token_s, prompt_len / prefill_s, decode_len / (time.perf_counter() - t)


def _run_llamacpp(
    path: str, threads: int, prompt_len: int, decode_len: int, t0: float, cache: tuple[str, str]
) -> tuple[float, float, float, float]:
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(
        path,
        n_ctx=prompt_len + decode_len + 16,
        n_batch=prompt_len,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    load_s = time.perf_counter() - t0
    ids = _prompt(llm.n_vocab(), prompt_len)
    t = time.perf_counter()
    llm.eval(ids)
    prefill_s = time.perf_counter() - t
    first_token_s = time.perf_counter() - t0
    vocab = llm.n_vocab()

    def last_logits() -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(vocab,))

    t = time.perf_counter()
    for _ in range(decode_len):
        tok = int(np.argmax(last_logits()))
        llm.eval([tok])
    return load_s, first_token_s, prompt_len / prefill_s, decode_len / (time.perf_counter() - t)


def child_main(argv: list[str]) -> None:
    """Subprocess entry: runner path threads prompt_len decode_len packed_dir digest -> one
    JSON line (packed_dir "" = no packed-weight cache)."""
    t0 = time.perf_counter()
    runner, path = argv[0], argv[1]
    threads, prompt_len, decode_len = (int(a) for a in argv[2:5])
    cache = (argv[5], argv[6])
    torch_like = runner.startswith("torch")
    if torch_like:
        import torch  # noqa: F401
    else:
        import llama_cpp  # noqa: F401
    base_mb = current_rss_mb()
    run = _run_torch if torch_like else _run_llamacpp
    load_s, first_s, prefill, decode = run(path, threads, prompt_len, decode_len, t0, cache)
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    result = BenchResult(runner, load_s, first_s, prefill, decode, rss_mb, base_mb)
    print(json.dumps(asdict(result)))


def run_once(
    runner: str,
    model: ModelFiles,
    threads: int,
    prompt_len: int,
    decode_len: int,
    packed_cache: str = "",
) -> BenchResult:
    """One measurement of runner in a fresh Python process (packed_cache: the packed-weight
    folder of the torch runner; "" = none)."""
    import ember

    root = str(Path(ember.__file__).resolve().parent.parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    code = "import sys; from ember.engine.runners.torch.bench import child_main; child_main(sys.argv[1:])"
    args = [
        sys.executable,
        "-c",
        code,
        runner,
        str(model.path),
        str(threads),
        str(prompt_len),
        str(decode_len),
        packed_cache,
        model.digest,
    ]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"bench {runner} failed: {tail}")
    return BenchResult(**json.loads(lines[-1]))


@dataclass
class BenchTable:
    """Medians per runner over repetitions."""

    model: str
    threads: int
    repeats: int
    prompt_tokens: int
    decode_tokens: int
    gguf_mb: float
    medians: dict[str, dict[str, float]]

    def ratios(self) -> dict[str, float]:
        """torch / llama.cpp per metric."""
        return self.ratio("torch")

    def ratio(self, runner: str) -> dict[str, float]:
        """runner / llama.cpp per metric."""
        a, b = self.medians[runner], self.medians["llama.cpp"]
        return {k: a[k] / b[k] if b[k] else float("nan") for k in a}


def run_bench(
    model: ModelFiles, threads: int, repeats: int, prompt_len: int = 512, decode_len: int = 256
) -> BenchTable:
    """Alternate the runners repeats times; medians of every metric."""
    import tempfile

    results: dict[str, list[BenchResult]] = {r: [] for r in (*RUNNERS, FIRST_RUN)}
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        cache = str(Path(tmp) / "packed")
        run_once("torch", model, threads, 16, 4, cache)  # fills the packed-weight cache
        for i in range(repeats):
            for runner in RUNNERS:
                results[runner].append(
                    run_once(runner, model, threads, prompt_len, decode_len, cache)
                )
            empty = str(Path(tmp) / f"empty{i}")
            first = run_once("torch", model, threads, prompt_len, decode_len, empty)
            results[FIRST_RUN].append(first)
    keys = ("load_s", "first_token_s", "prefill_tok_s", "decode_tok_s", "peak_rss_mb")
    medians = {
        r: {
            **{k: statistics.median(getattr(x, k) for x in rs) for k in keys},
            "model_rss_mb": statistics.median(x.model_rss_mb for x in rs),
        }
        for r, rs in results.items()
    }
    size_mb = model.path.stat().st_size / 2**20
    return BenchTable(str(model.path), threads, repeats, prompt_len, decode_len, size_mb, medians)


def format_table(t: BenchTable) -> str:
    """The human-readable table with a ratio column."""
    rows = [
        ("load (s)", "load_s", "{:.2f}"),
        ("first token, cold (s)", "first_token_s", "{:.2f}"),
        (f"prefill tok/s ({t.prompt_tokens} tokens)", "prefill_tok_s", "{:.1f}"),
        (f"decode tok/s ({t.decode_tokens} tokens)", "decode_tok_s", "{:.1f}"),
        ("peak RSS (MiB)", "peak_rss_mb", "{:.0f}"),
        ("model RSS (MiB, - runtime)", "model_rss_mb", "{:.0f}"),
    ]
    ratios, first = t.ratios(), t.medians[FIRST_RUN]
    lines = [
        f"{Path(t.model).name}: {t.gguf_mb:.0f} MiB, {t.threads} threads, median of {t.repeats}",
        f"{'metric':<28}{'torch':>10}{'llama.cpp':>12}{'ratio':>8}{'1st run':>9}",
    ]
    for label, key, fmt in rows:
        a, b = t.medians["torch"][key], t.medians["llama.cpp"][key]
        lines.append(
            f"{label:<28}{fmt.format(a):>10}{fmt.format(b):>12}{ratios[key]:>7.2f}x"
            f"{fmt.format(first[key]):>9}"
        )
    lines.append(
        "torch: packed-weight cache filled (every start after the first); "
        "1st run: torch converting the GGUF (empty cache)"
    )
    return "\n".join(lines)
