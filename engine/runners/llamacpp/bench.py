"""Ember's llama.cpp runner vs raw llama-cpp-python on the same GGUF and threads, side by side.

Raw: `llama_cpp.Llama.eval` (prefill; one token at a time for decode) plus reading the last
logits row and taking its argmax, the least Python a raw greedy loop can do. Ember runner: the
same work through `LlamaCppRunner.forward`. Ember engine: a whole greedy request through
`load_engine` (scheduler, sampling, detokenizer, events) as `ember run` does it. Repeats are
interleaved (raw, runner, raw, runner...) so machine noise hits both; medians are reported.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ember.engine.api import ModelFiles

TEXT = (
    "The river bends past the old mill, where the water turns the wheel and the wheel turns "
    "the stones that grind the grain for the village bread. "
)


def _prompt(tokenize: Any, count: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < count:
        ids += tokenize(TEXT)
    return ids[:count]


def _raw_pass(llm: Any, prompt: list[int], decode_tokens: int) -> tuple[float, float]:
    import llama_cpp

    vocab = llm.n_vocab()
    llm.reset()
    start = time.perf_counter()
    llm.eval(prompt)
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(vocab,))
    token = int(logits.argmax())
    prefill_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(decode_tokens):
        llm.eval([token])
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(vocab,))
        token = int(logits.argmax())
    return prefill_s, time.perf_counter() - start


def _runner_pass(runner: Any, prompt: list[int], decode_tokens: int) -> tuple[float, float]:
    from ember.engine.runners.base import ForwardBatch, SeqStep

    block_size = 16
    total = len(prompt) + decode_tokens
    runner.init_kv(-(-total // block_size) + 1, block_size)  # a fresh cache, not timed
    table = list(range(-(-total // block_size)))
    start = time.perf_counter()
    step = SeqStep(1, prompt, list(range(len(prompt))), 0, table, 1)
    token = int(runner.forward(ForwardBatch([step]))[0][-1].argmax())
    prefill_s = time.perf_counter() - start
    start = time.perf_counter()
    for pos in range(len(prompt), total):
        step = SeqStep(1, [token], [pos], pos, table, 1)
        token = int(runner.forward(ForwardBatch([step]))[0][-1].argmax())
    return prefill_s, time.perf_counter() - start


def _engine_pass(model: ModelFiles, threads: int, prompt: list[int], decode_tokens: int) -> Any:
    from ember.engine.api import EngineOptions, GenerationRequest, SamplingParams
    from ember.engine.load import load_engine

    options = EngineOptions(
        model=model.name, runner="llama.cpp", threads=threads, ctx=2048, prefix_cache=False
    )
    backend = load_engine(options, model)
    try:
        sampling = SamplingParams(temperature=0.0, max_tokens=decode_tokens + 1, ignore_eos=True)
        request = GenerationRequest(prompt_ids=tuple(prompt), sampling=sampling)
        return backend.submit(request).result().stats
    finally:
        backend.close()


def bench_llamacpp_runner(
    model: ModelFiles,
    threads: int,
    *,
    prompt_tokens: int = 256,
    decode_tokens: int = 64,
    repeats: int = 3,
    with_engine: bool = True,
) -> dict[str, Any]:
    """Medians (tokens/s) and Ember/raw ratios for prefill and decode."""
    import llama_cpp

    from ember.engine.runners.llamacpp.runner import LlamaCppRunner

    path = model.path
    raw = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=prompt_tokens + decode_tokens + 64,
        n_threads=threads,
        n_threads_batch=threads,
        n_batch=512,
        swa_full=True,
        verbose=False,
    )
    runner = LlamaCppRunner.load(path, digest=model.digest, threads=threads, max_sequences=16)
    prompt = _prompt(lambda text: raw.tokenize(text.encode(), add_bos=False), prompt_tokens)
    timings: dict[str, list[float]] = {"raw_pre": [], "raw_dec": [], "run_pre": [], "run_dec": []}
    try:
        _raw_pass(raw, prompt[:32], 4)  # warm-up: page in the weights, build graphs
        _runner_pass(runner, prompt[:32], 4)
        for _ in range(repeats):
            pre, dec = _raw_pass(raw, prompt, decode_tokens)
            timings["raw_pre"].append(prompt_tokens / pre)
            timings["raw_dec"].append(decode_tokens / dec)
            pre, dec = _runner_pass(runner, prompt, decode_tokens)
            timings["run_pre"].append(prompt_tokens / pre)
            timings["run_dec"].append(decode_tokens / dec)
    finally:
        runner.close()
        raw.close()
    med = {k: statistics.median(v) for k, v in timings.items()}
    result: dict[str, Any] = {
        "model": path.name,
        "threads": threads,
        "prompt_tokens": prompt_tokens,
        "decode_tokens": decode_tokens,
        "repeats": repeats,
        "raw_prefill_tok_s": med["raw_pre"],
        "ember_prefill_tok_s": med["run_pre"],
        "prefill_ratio": med["run_pre"] / med["raw_pre"],
        "raw_decode_tok_s": med["raw_dec"],
        "ember_decode_tok_s": med["run_dec"],
        "decode_ratio": med["run_dec"] / med["raw_dec"],
    }
    if with_engine:
        stats = _engine_pass(model, threads, prompt, decode_tokens)
        result["engine_prefill_tok_s"] = stats.prefill_tok_s
        result["engine_decode_tok_s"] = stats.decode_tok_s
        result["engine_decode_ratio"] = stats.decode_tok_s / med["raw_dec"]
    return result
