"""One benchmark run in a fresh process (bench.py starts these): load, prefill a fixed prompt of
random token ids, greedy-decode, report times and memory as one JSON line on stdout.

Runners: "torch" (Ember's torch runner; "torch kernels": its fallback without native kernels), "llama.cpp runner" (Ember's llama.cpp runner, driven
through the same Runner calls), "llama.cpp" (raw llama-cpp-python: `Llama.eval` and its logits,
the reference loop), "mistral.rs" (a peer engine, when installed). Each reports its runtime's baseline RSS (right after importing torch or
llama_cpp), so peak - baseline is what the model itself costs.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

Timings = tuple[float, float, float, float]  # load s, first token s, prefill tok/s, decode tok/s


def current_rss_mb() -> float:
    """Resident set size now (Linux /proc; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def prompt_ids(vocab_size: int, num_tokens: int) -> list[int]:
    import numpy as np

    return [int(x) for x in np.random.default_rng(0).integers(10, vocab_size, num_tokens)]


def _drive(runner: Any, prompt_len: int, decode_len: int, t0: float) -> Timings:
    """Prefill then greedy decode through the Runner contract (both of Ember's runners)."""
    from ember.engine.runners.base import ForwardBatch, SeqStep

    load_s = time.perf_counter() - t0
    block_size, total = 16, prompt_len + decode_len
    runner.init_kv(total // block_size + 1, block_size)
    table = list(range(total // block_size + 1))
    ids = prompt_ids(runner.info.vocab_size, prompt_len)
    t = time.perf_counter()
    logits = runner.forward(ForwardBatch([SeqStep(0, ids, list(range(prompt_len)), 0, table)]))[0]
    prefill_s = time.perf_counter() - t
    first_token_s = time.perf_counter() - t0
    t = time.perf_counter()
    for pos in range(prompt_len, total):
        tok = int(logits[-1].argmax())
        logits = runner.forward(ForwardBatch([SeqStep(0, [tok], [pos], pos, table)]))[0]
    return load_s, first_token_s, prompt_len / prefill_s, decode_len / (time.perf_counter() - t)


def run_torch(
    path: str, threads: int, p: int, d: int, t0: float, cache: tuple[str, str]
) -> Timings:
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    packed_dir, digest = cache
    opts = TorchOptions(device="cpu", threads=threads, packed_cache_dir=packed_dir)
    return _drive(TorchRunner.load(path, opts, digest=digest), p, d, t0)


def run_torch_kernels(
    path: str, threads: int, p: int, d: int, t0: float, cache: tuple[str, str]
) -> Timings:
    """The fallback where no C compiler builds the native kernels: torch's own kernels over
    the packed weights (converted once into the packed cache)."""
    from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

    packed_dir, digest = cache
    opts = TorchOptions(device="cpu", threads=threads, packed_cache_dir=packed_dir, kernels="torch")
    return _drive(TorchRunner.load(path, opts, digest=digest), p, d, t0)


def run_llamacpp_runner(
    path: str, threads: int, p: int, d: int, t0: float, cache: tuple[str, str]
) -> Timings:
    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    return _drive(LlamaCppRunner.load(path, digest=cache[1] or "bench", threads=threads), p, d, t0)


def run_llamacpp_raw(
    path: str, threads: int, p: int, d: int, t0: float, cache: tuple[str, str]
) -> Timings:
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(
        path, n_ctx=p + d + 16, n_batch=p, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    load_s = time.perf_counter() - t0
    ids = prompt_ids(llm.n_vocab(), p)
    t = time.perf_counter()
    llm.eval(ids)
    prefill_s = time.perf_counter() - t
    first_token_s = time.perf_counter() - t0
    vocab = llm.n_vocab()
    t = time.perf_counter()
    for _ in range(d):
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        llm.eval([int(np.argmax(np.ctypeslib.as_array(ptr, shape=(vocab,))))])
    return load_s, first_token_s, p / prefill_s, d / (time.perf_counter() - t)


def run_mistralrs(
    path: str, threads: int, p: int, d: int, t0: float, cache: tuple[str, str]
) -> Timings:
    """mistral.rs (its PyPI wheel) on the same GGUF: a text prompt of about p tokens (it takes
    text, not ids), greedy, d new tokens at most; speeds are its own usage counters. Threads:
    RAYON_NUM_THREADS, set before the import (child_main)."""
    from mistralrs import CompletionRequest, Runner, Which

    gguf = Path(path)
    runner = Runner(
        # the wheel's stub types Which.GGUF(...) as its own class, not as a Which
        which=Which.GGUF(quantized_model_id=str(gguf.parent), quantized_filename=gguf.name),  # type: ignore[arg-type, unused-ignore]
        no_paged_attn=True,
        max_seqs=1,
        prefix_cache_n=0,
    )
    load_s = time.perf_counter() - t0
    sentence = "The river bends past the old mill, where the water turns the wheel. "
    per = max(1, len(runner.tokenize_text(sentence, False, False)))
    prompt = sentence * max(1, p // per)
    request = CompletionRequest(prompt=prompt, model="bench", max_tokens=d, temperature=0.0)
    usage = runner.send_completion_request(request).usage
    first_token_s = load_s + usage.total_prompt_time_sec
    return load_s, first_token_s, usage.avg_prompt_tok_per_sec, usage.avg_compl_tok_per_sec


RUNS = {
    "torch": run_torch,
    "torch, 1st run": run_torch,
    "torch kernels": run_torch_kernels,
    "llama.cpp runner": run_llamacpp_runner,
    "llama.cpp": run_llamacpp_raw,
    "mistral.rs": run_mistralrs,
}


def child_main(argv: list[str]) -> None:
    """Entry: runner path threads prompt_len decode_len packed_dir digest -> one JSON line."""
    t0 = time.perf_counter()
    runner, path = argv[0], argv[1]
    threads, prompt_len, decode_len = (int(a) for a in argv[2:5])
    cache = (argv[5], argv[6])
    if runner.startswith("torch"):
        import torch  # noqa: F401
    elif runner == "mistral.rs":
        os.environ["RAYON_NUM_THREADS"] = str(threads)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tokenizer comes from the GGUF
        import mistralrs  # noqa: F401
    else:
        import llama_cpp  # noqa: F401
    base_mb = current_rss_mb()
    load_s, first_s, prefill, decode = RUNS[runner](
        path, threads, prompt_len, decode_len, t0, cache
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    fields = ("runner", "load_s", "first_token_s", "prefill_tok_s", "decode_tok_s")
    result = dict(zip(fields, (runner, load_s, first_s, prefill, decode), strict=True))
    print(json.dumps({**result, "peak_rss_mb": peak_mb, "base_rss_mb": base_mb}))
