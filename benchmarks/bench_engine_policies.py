"""Engine policies on the starter model, measured side by side in one run (medians, ratios).

    python benchmarks/bench_engine_policies.py [--runner llama.cpp|torch] [--system-tokens 2000]
        [--reps 3] [--batch 4] [--decode 32] [--endless 0] [--window 1024]

prefix : TTFT of a long system prompt + a short question: cold (no cache), cached in RAM (same
         engine, second request), restored from disk (a new engine over the same loaded runner:
         empty RAM cache, only the disk snapshot; the model load is not part of TTFT).
batch  : aggregate decode tok/s of --batch concurrent requests vs the same requests one at a time.
endless: --endless N tokens with --window W: RSS and decode tok/s over the first/last 1000 tokens.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ember.app.loading import load_runner  # noqa: E402
from ember.app.options import EngineFlags, engine_options  # noqa: E402
from ember.engine.api import (  # noqa: E402
    ChatMessage,
    EngineOptions,
    Event,
    Finished,
    GenerationRequest,
    SamplingParams,
)
from ember.engine.engine import Engine  # noqa: E402
from ember.engine.prefix_store import PrefixStore  # noqa: E402
from ember.engine.prompt import ChatRenderer  # noqa: E402
from ember.models.registry.starter import starter_path  # noqa: E402

if TYPE_CHECKING:
    from ember.engine.runners.base import Runner
    from ember.models.text.tokenizers.base import Tokenizer

QUESTION = "In one word: what color is the sky?"


def _system(tokenizer: Tokenizer, tokens: int) -> str:
    sentence = (
        "Ember is a local assistant that answers briefly and cites the context it was given. "
    )
    per = len(tokenizer.encode(sentence))
    return sentence * max(1, tokens // per)


def _engine(
    runner: Runner, chat: ChatRenderer | None, store_dir: Path | None, **options: Any
) -> Engine:  # options: EngineOptions fields
    store = None
    if store_dir is not None:
        info = runner.info
        store = PrefixStore(
            store_dir,
            model_digest=info.model_digest,
            runner=info.name,
            dtype=info.dtype,
            block_size=16,
        )
    opts = EngineOptions(model="starter", prefix_disk_bytes=1 << 31, draft="none", **options)
    return Engine(runner, opts, chat=chat, prefix_store=store)


def _ttft(engine: Engine, system: str, hits: list[int] | None = None) -> float:
    messages = (ChatMessage("system", system), ChatMessage("user", QUESTION))
    request = GenerationRequest(messages=messages, sampling=SamplingParams(max_tokens=1))
    final = list(engine.generate(request))[-1]
    assert isinstance(final, Finished)
    if hits is not None:
        hits.append(final.stats.cached_tokens)
    return final.stats.ttft_s


def bench_prefix(runner: Runner, chat: ChatRenderer | None, args: argparse.Namespace) -> None:
    system = _system(runner.tokenizer, args.system_tokens)
    cold: list[float] = []
    ram: list[float] = []
    disk: list[float] = []
    ram_hits: list[int] = []
    disk_hits: list[int] = []
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            cold.append(
                _ttft(
                    _engine(runner, chat, None, ctx=args.ctx, prefix_cache=False),
                    system + f" ({rep})",
                )
            )
            warm = _engine(runner, chat, folder, ctx=args.ctx)
            _ttft(warm, system + f" ({rep})")
            ram.append(_ttft(warm, system + f" ({rep})", ram_hits))
            disk.append(
                _ttft(_engine(runner, chat, folder, ctx=args.ctx), system + f" ({rep})", disk_hits)
            )
    c, r, d = (statistics.median(x) for x in (cold, ram, disk))
    print(
        f"prefix  system ~{args.system_tokens} tokens: TTFT cold {c:.3f}s  RAM {r:.3f}s ({c / r:.1f}x)  disk {d:.3f}s ({c / d:.1f}x)"
    )


def bench_batch(runner: Runner, chat: ChatRenderer | None, args: argparse.Namespace) -> None:
    def requests() -> list[GenerationRequest]:
        params = SamplingParams(max_tokens=args.decode, ignore_eos=True)
        return [
            GenerationRequest(prompt=f"Story number {i}: once upon a time", sampling=params)
            for i in range(args.batch)
        ]

    solo: list[float] = []
    together: list[float] = []
    for _ in range(args.reps):
        engine = _engine(runner, chat, None, ctx=args.ctx, prefix_cache=False, max_batch=1)
        start = time.perf_counter()
        for request in requests():
            list(engine.generate(request))
        solo.append(args.batch * args.decode / (time.perf_counter() - start))
        engine = _engine(runner, chat, None, ctx=args.ctx, prefix_cache=False, max_batch=args.batch)
        done: list[object] = []
        start = time.perf_counter()
        for request in requests():
            engine.add_request(request, done.append)
        while engine.has_work:
            engine.step()
        together.append(args.batch * args.decode / (time.perf_counter() - start))
    s, t = statistics.median(solo), statistics.median(together)
    print(
        f"batch   {args.batch} requests x {args.decode} tokens: one at a time {s:.1f} tok/s, batched {t:.1f} tok/s ({t / s:.2f}x)"
    )


def bench_endless(runner: Runner, chat: ChatRenderer | None, args: argparse.Namespace) -> None:
    engine = _engine(
        runner, chat, None, ctx=args.window + 64, window=args.window, prefix_cache=False
    )
    stamps: list[tuple[float, int]] = []
    request = GenerationRequest(
        prompt="Tell an endless story.",
        sampling=SamplingParams(max_tokens=args.endless, ignore_eos=True),
    )
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        stamps.append((time.perf_counter(), _rss_kib()))

    engine.add_request(request, on_event)
    while engine.has_work:
        engine.step()
    first = stamps[: min(1000, len(stamps) // 2)]
    last = stamps[-len(first) :]
    rate = lambda s: (len(s) - 1) / (s[-1][0] - s[0][0])  # noqa: E731
    print(
        f"endless {args.endless} tokens, window {args.window}: RSS {first[-1][1] / 1024:.0f} -> {last[-1][1] / 1024:.0f} MiB, "
        f"decode {rate(first):.1f} -> {rate(last):.1f} tok/s ({rate(last) / rate(first):.2f}x)"
    )


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runner", default="llama.cpp")
    parser.add_argument("--system-tokens", type=int, default=2000)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--endless", type=int, default=0)
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--only", choices=("prefix", "batch", "endless"))
    args = parser.parse_args()
    model = starter_path(Path(__file__).resolve().parent.parent / "tests" / ".cache" / "models")
    start = time.perf_counter()
    options = engine_options(str(model), flags=EngineFlags(runner=args.runner, device="cpu"))
    runner, chat, _ = load_runner(options)
    print(f"runner {runner.info.name}: loaded in {time.perf_counter() - start:.1f}s")
    if args.only in (None, "prefix"):
        bench_prefix(runner, chat, args)
    if args.only in (None, "batch"):
        bench_batch(runner, chat, args)
    if args.endless and args.only in (None, "endless"):
        bench_endless(runner, chat, args)
    runner.close()


if __name__ == "__main__":
    main()
