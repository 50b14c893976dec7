"""A new user's first questions: how many does a model answer on topic, and does it stop?

Each question of benchmarks/data/first_questions.json goes through the real chat path (Engine
with the model's chat format: its template, or the base-model scaffold) as a one-message chat.
Rule, checkable by hand: a reply is *answered* when it contains one of the question's keywords
as a whole word (case-insensitive) and the reply ended on its own (finish reason "stop");
it *looped* when it ran to --max-tokens ("length") or the loop detector ended it ("loop").

    python benchmarks/bench_first_questions.py [--model PATH] [--chat-format auto|template|scaffold]
        [--modes greedy,default] [--seeds 3] [--max-tokens 128] [--threads 2]
        [--sampling JSON] [--variants '{"dry 0.8": {}, "dry off": {"dry_multiplier": 0}}']
        [--show] [--json]

`default` is the settings defaults of app/config.py (temperature 0.7, top-k 40, top-p 0.95,
min-p 0.05, DRY and the loop detector as set there), run once per seed (seeds 1..N, one request
seed per question); `greedy` is the same at temperature 0. `--sampling '{"dry_multiplier": 0}'`
overrides any SamplingParams field (here: DRY off).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember.engine.api import SamplingParams
    from ember.engine.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
QUESTIONS = ROOT / "benchmarks" / "data" / "first_questions.json"


def answered_on_topic(text: str, keywords: list[str]) -> bool:
    """Whether text names one of the keywords as a whole word (case-insensitive)."""
    return any(re.search(rf"\b{re.escape(k)}\b", text, re.IGNORECASE) for k in keywords)


@dataclass
class Tally:
    """One mode's results over every question (and seed)."""

    mode: str
    replies: int = 0
    answered: int = 0
    ended: int = 0
    looped: int = 0
    tokens: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def row(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "replies": self.replies,
            "answered": self.answered,
            "answered_pct": round(100 * self.answered / max(1, self.replies), 1),
            "ended_on_its_own": self.ended,
            "looped_per_100": round(100 * self.looped / max(1, self.replies), 1),
            "median_tokens": statistics.median(self.tokens) if self.tokens else 0,
            "seconds": round(self.seconds, 1),
        }


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="")
    parser.add_argument("--runner", default="llama.cpp")
    parser.add_argument("--chat-format", default="auto", choices=("auto", "template", "scaffold"))
    parser.add_argument("--modes", default="greedy,default")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="first N questions only")
    parser.add_argument("--sampling", default="{}", help="JSON of extra SamplingParams fields")
    parser.add_argument(
        "--variants",
        default="",
        help='JSON {"name": {SamplingParams fields}}: each run interleaved with the others',
    )
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def _starter() -> str:
    from ember.models.registry.starter import starter_path

    return str(starter_path(ROOT / "tests" / ".cache" / "models"))


def _sampling(mode: str, max_tokens: int, extra: dict[str, Any]) -> SamplingParams:
    """The settings defaults (app/options.py: DRY and the loop detector included); greedy sets
    temperature 0."""
    from ember.app.config import Settings
    from ember.app.options import sampling_params

    flags: dict[str, Any] = {"max_tokens": max_tokens}
    if mode == "greedy":
        flags["temperature"] = 0.0
    return replace(sampling_params(Settings(), flags), **extra)


def run_mode(
    engine: Engine, mode: str, seed: int | None, args: argparse.Namespace, extra: dict[str, Any]
) -> Tally:
    from ember.engine.api import ChatMessage, Finished, GenerationRequest

    questions = json.loads(QUESTIONS.read_text())["questions"]
    questions = questions[: args.limit] if args.limit else questions
    base = _sampling(mode, args.max_tokens, {**json.loads(args.sampling), **extra})
    tally = Tally(mode if seed is None else f"{mode} seed {seed}")
    started = time.perf_counter()
    for i, question in enumerate(questions):
        sampling = base if seed is None else replace(base, seed=seed * 1000 + i)
        request = GenerationRequest((ChatMessage("user", question["q"]),), sampling=sampling)
        final = next(e for e in engine.generate(request) if isinstance(e, Finished))
        hit = final.reason == "stop" and answered_on_topic(final.text, question["keywords"])
        tally.replies += 1
        tally.answered += hit
        tally.ended += final.reason == "stop"
        tally.looped += final.reason in ("length", "loop")
        tally.tokens.append(len(final.token_ids))
        if args.show:
            print(f"{'OK' if hit else '--'} [{final.reason}] {question['q']} -> {final.text!r}")
    tally.seconds = time.perf_counter() - started
    return tally


def main() -> int:
    args = _parse()
    from ember.app.config import Settings
    from ember.app.loading import resolve_files
    from ember.app.options import EngineFlags, engine_options
    from ember.engine.engine import Engine

    flags = EngineFlags(runner=args.runner, threads=args.threads, chat_format=args.chat_format)
    options = replace(
        engine_options(args.model or _starter(), Settings(), flags), prefix_disk_bytes=0
    )
    engine = Engine.load(options, resolve_files(options.model))
    variants: dict[str, dict[str, Any]] = json.loads(args.variants) if args.variants else {"": {}}
    rows = []
    try:
        for mode in args.modes.split(","):
            seeds: list[int | None] = [None] if mode == "greedy" else list(range(1, args.seeds + 1))
            totals = {name: Tally(f"{name} {mode}".strip()) for name in variants}
            for seed in seeds:  # variants interleaved, so machine load hits them alike
                for name, extra in variants.items():
                    t = run_mode(engine, mode, seed, args, extra)
                    t.mode = f"{name} {t.mode}".strip()
                    if len(seeds) > 1:
                        rows.append(t.row())
                        print(json.dumps(rows[-1]) if args.json else _line(rows[-1]), flush=True)
                    total = totals[name]
                    total.replies += t.replies
                    total.answered += t.answered
                    total.ended += t.ended
                    total.looped += t.looped
                    total.tokens += t.tokens
                    total.seconds += t.seconds
            for total in totals.values():
                rows.append(total.row())
                print(json.dumps(rows[-1]) if args.json else _line(rows[-1]), flush=True)
    finally:
        engine.close()
    header = {"model": options.model, "chat_format": args.chat_format, "sampling": args.sampling}
    print(json.dumps({"setup": header, "rows": rows}) if args.json else f"setup: {header}")
    return 0


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['mode']:<22} answered {row['answered']:>3}/{row['replies']:<3} "
        f"({row['answered_pct']:5.1f}%)  ended {row['ended_on_its_own']:>3}  "
        f"looped/100 {row['looped_per_100']:5.1f}  median tokens {row['median_tokens']}  "
        f"{row['seconds']:.0f} s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
