"""Speculative decoding vs plain decoding: decode tok/s side by side, acceptance, same tokens?

Temperature 0, the same model and runner for both, runs interleaved (plain, draft, plain,
draft...) so machine load hits both alike; medians per prompt and overall are printed with the
speculative/plain ratio. The prompts are input-grounded (repeat, edit or quote a given code or
text), where prompt lookup can win; `--prompts chat` adds open-ended ones where it cannot.

    python benchmarks/bench_speculative.py [--model PATH] [--runner llama.cpp|torch]
        [--weights auto|dense|int8|int4] [--draft lookup|self|MODEL] [--draft-tokens 4]
        [--max-tokens 128] [--repeats 3] [--threads 2] [--prompts grounded|chat|all]
        [--fixed-k] [--json]

Default model: the starter GGUF (Gemma 3 270M Q4_K_M). `--runner torch --weights dense` gives a
bf16 target (the self-draft target of the issue).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CODE = (ROOT / "engine" / "sequence.py").read_text().split("class Sequence")[1][:1400]
TEXT = (
    "The StreamingLLM paper observes that language models put a large share of attention on "
    "the first few tokens of a sequence, whatever those tokens are. Keeping these attention "
    "sinks in the cache, together with a window of the most recent tokens, lets a model "
    "generate far beyond its training length with stable perplexity, while a plain sliding "
    "window collapses as soon as the first tokens leave the cache. Prefix caching, in turn, "
    "avoids recomputing a system prompt or the earlier turns of a conversation: identical "
    "prefixes map to the same key-value blocks, found by a hash chained over the tokens."
)
PROMPTS = {
    "repeat-code": f"Repeat this Python code exactly, with no changes:\n\n{CODE}",
    "edit-code": f"Rewrite this code with every `seq` renamed to `sequence`:\n\n{CODE}",
    "quote-text": f"Copy the following paragraph word for word:\n\n{TEXT}",
    "edit-text": f"Rewrite this paragraph in British English, changing nothing else:\n\n{TEXT}",
}
CHAT_PROMPTS = {
    "chat-story": "Write a short story about a lighthouse keeper who finds a map.",
    "chat-explain": "Explain how a hash table works to a new programmer.",
}


@dataclass
class Row:
    """Medians of one prompt: plain vs speculative."""

    prompt: str
    plain_tok_s: list[float] = field(default_factory=list)
    spec_tok_s: list[float] = field(default_factory=list)
    drafted: int = 0
    accepted: int = 0
    generated: int = 0
    same_tokens: bool = True

    def summary(self) -> dict[str, Any]:
        plain, spec = statistics.median(self.plain_tok_s), statistics.median(self.spec_tok_s)
        return {
            "prompt": self.prompt,
            "plain_tok_s": round(plain, 2),
            "spec_tok_s": round(spec, 2),
            "speedup": round(spec / plain, 3),
            "acceptance": round(self.accepted / self.drafted, 3) if self.drafted else 0.0,
            "accepted_per_step": round(self.accepted / max(1, self.generated - self.accepted), 3),
            "same_tokens": self.same_tokens,
        }


def _model(given: str | None) -> Path:
    if given:
        return Path(given)
    from ember.models.registry.starter import starter_path

    return starter_path(ROOT / "tests" / ".cache" / "models")


def build_engine(args: argparse.Namespace, draft: str) -> Any:
    """An Engine over a freshly loaded runner, with the proposer `draft` names."""
    from dataclasses import replace

    from ember.app.loading import resolve_files
    from ember.app.options import EngineFlags, engine_options
    from ember.engine.engine import Engine
    from ember.engine.runners.factory import chat_renderer, create_runner
    from ember.engine.speculative.choice import create_proposer

    path = _model(args.model)
    flags = EngineFlags(
        runner=args.runner, threads=args.threads, draft=draft, draft_tokens=args.draft_tokens
    )
    options = replace(engine_options(str(path), flags=flags), prefix_disk_bytes=0, max_batch=1)
    resolved = resolve_files(str(path))
    if args.runner == "torch" and args.weights != "auto":
        from ember.engine.runners.torch.runner import TorchOptions, TorchRunner

        opts = TorchOptions(
            threads=args.threads,
            weight_format=args.weights,
            packed_cache_dir=options.packed_cache_dir,
        )
        runner: Any = TorchRunner.load(path, opts, digest=resolved.digest)
    else:
        runner = create_runner(options, resolved)
    proposer = create_proposer(options, runner, path.name)
    adaptive = getattr(proposer, "adaptive", None)
    if args.fixed_k and adaptive is not None:
        adaptive.enabled = False  # always draft --draft-tokens (no adaptive k)
    chat = chat_renderer(resolved, runner.tokenizer)
    return Engine(runner, options, chat=chat, proposer=proposer, model_name=path.name)


def generate(engine: Any, prompt: str, max_tokens: int) -> Any:
    from ember.engine.api import ChatMessage, GenerationRequest, SamplingParams

    request = GenerationRequest(
        messages=(ChatMessage("user", prompt),),
        sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True),
    )
    return list(engine.generate(request))[-1]


def bench(args: argparse.Namespace) -> list[Row]:
    prompts = {"grounded": PROMPTS, "chat": CHAT_PROMPTS, "all": {**PROMPTS, **CHAT_PROMPTS}}
    plain, spec = build_engine(args, "none"), build_engine(args, args.draft)
    rows = []
    try:
        for name, text in prompts[args.prompts].items():
            row = Row(name)
            generate(plain, text, 8)  # warm-up (and the prompt enters both prefix caches)
            generate(spec, text, 8)
            for _ in range(args.repeats):
                a = generate(plain, text, args.max_tokens)
                b = generate(spec, text, args.max_tokens)
                row.plain_tok_s.append(a.stats.decode_tok_s)
                row.spec_tok_s.append(b.stats.decode_tok_s)
                row.drafted += b.stats.drafted_tokens
                row.accepted += b.stats.accepted_tokens
                row.generated += b.stats.generated_tokens
                row.same_tokens &= a.token_ids == b.token_ids
            rows.append(row)
            print(json.dumps(row.summary()), file=sys.stderr, flush=True)
    finally:
        plain.close()
        spec.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--runner", default="llama.cpp", choices=("llama.cpp", "torch"))
    parser.add_argument("--weights", default="auto", choices=("auto", "dense", "int8", "int4"))
    parser.add_argument("--draft", default="lookup", help="lookup | self | a draft model")
    parser.add_argument("--draft-tokens", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", default="grounded", choices=("grounded", "chat", "all"))
    parser.add_argument("--fixed-k", action="store_true", help="no adaptive k: always draft K")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    started = time.perf_counter()
    rows = [row.summary() for row in bench(args)]
    overall = {
        "plain_tok_s": round(statistics.median(r["plain_tok_s"] for r in rows), 2),
        "spec_tok_s": round(statistics.median(r["spec_tok_s"] for r in rows), 2),
        "speedup": round(statistics.median(r["speedup"] for r in rows), 3),
    }
    if args.json:
        print(json.dumps({"args": vars(args), "rows": rows, "median": overall}, indent=2))
        return 0
    print(
        f"{args.runner} ({args.weights} weights), draft {args.draft}, k <= {args.draft_tokens}"
        f"{' fixed' if args.fixed_k else ' adaptive'}, "
        f"{args.max_tokens} tokens x {args.repeats} repeats, {args.threads} threads "
        f"({time.perf_counter() - started:.0f} s)"
    )
    print("| prompt | plain tok/s | speculative tok/s | speedup | acceptance | same tokens |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(
            f"| {r['prompt']} | {r['plain_tok_s']} | {r['spec_tok_s']} | {r['speedup']}x "
            f"| {r['acceptance']:.0%} | {'yes' if r['same_tokens'] else 'no'} |"
        )
    print(
        f"| median | {overall['plain_tok_s']} | {overall['spec_tok_s']} | {overall['speedup']}x | | |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
