"""StreamingLLM's perplexity table on the starter model: sinks + window vs recompute vs no sinks.

    python benchmarks/bench_streaming_ppl.py [--model gemma3-270m] [--runner llama.cpp|torch]
        [--window 256] [--sink 4] [--stride 64] [--min-tokens 20000] [--threads 1]
        [--no-paper-recompute] [--windows] [--json]

The corpus: the license texts of /usr/share/common-licenses in sorted order (symlinked
duplicates skipped), whole files, until the text holds at least --min-tokens tokens (then the
/usr/share/doc/*/copyright files in sorted order, if the licenses are too short). Its token count
and SHA-256 are printed; the whole text is scored. Each row is one `python -m ember eval ppl
MODEL FILE --json` run (a fresh process, same interpreter), all scoring the same tokens (every
token after the text's BOS):

  sinks + window  : --mode streaming --sink 4 --window W --chunk 16. Sink 4 keeps the first
                    16-token block. Chunk 16 = one KV block is exactly the paper's
                    token-at-a-time protocol (eviction drops whole blocks only before a step),
                    so each token sees the sinks + the previous W..W+15 tokens.
  window, no sinks: the same with --sink 0 (the paper's failure case).
  recompute       : --mode recompute --window W' --stride S: every S tokens, BOS + the last W'
                    tokens are recomputed from scratch and the last S are scored. Stride 1 is
                    the exact per-token baseline but costs W' forwards per token; stride S is
                    its approximation, each token sees W'-S..W'-1 recent tokens. W' = W + S/2 + 8
                    gives every token on average the same number of recent tokens (W + 7.5) as
                    the streaming rows.
  recompute w/o BOS: the same recompute without the BOS (the paper's literal protocol: the
                    window's first token is whatever text token it is); run in-process by this
                    script since the CLI always opens a fresh context with the model's BOS.
  --windows       : llama.cpp's protocol, independent windows of sink + W + 16 tokens with BOS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LICENSES = Path("/usr/share/common-licenses")
DOCS = Path("/usr/share/doc")
BLOCK_SIZE = 16  # the engine's KV block: eval ppl sizes its cache in these


@dataclass
class Row:
    """One measured configuration."""

    label: str
    mode: str
    sinks: str
    window: str
    context: str  # recent tokens each scored token sees
    flags: list[str]
    tokens: int = 0
    ppl: float = float("nan")
    evicted_tokens: int = 0
    seconds: float = 0.0


def corpus_files() -> list[Path]:
    """Licenses (sorted, no symlinks), then copyright files: the candidate corpus in order."""
    licenses = sorted(p for p in LICENSES.iterdir() if p.is_file() and not p.is_symlink())
    extra = sorted(p for p in DOCS.glob("*/copyright") if p.is_file() and not p.is_symlink())
    return licenses + extra


def build_corpus(tokenizer: Any, min_tokens: int) -> tuple[str, int, list[str]]:
    """Whole files in order until the text has min_tokens tokens (BOS included)."""
    parts: list[str] = []
    names: list[str] = []
    seen: set[str] = set()
    count = 0
    for path in corpus_files():
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        if not text or digest in seen:
            continue  # identical copies (many packages ship the same copyright file)
        seen.add(digest)
        parts.append(text)
        names.append(str(path))
        count = len(tokenizer.encode("\n\n".join(parts), add_bos=tokenizer.add_bos))
        if count >= min_tokens:
            break
    if count < min_tokens:
        raise SystemExit(f"only {count} tokens of offline English text found (< {min_tokens})")
    return "\n\n".join(parts), count, names


def plan(args: argparse.Namespace) -> list[Row]:
    """The rows to measure, with the flags each passes to `ember eval ppl`."""
    w, s = args.window, args.stride
    sink_kept = -(-args.sink // BLOCK_SIZE) * BLOCK_SIZE
    recompute_window = w + s // 2 + BLOCK_SIZE // 2
    ctx = sink_kept + w + 2 * BLOCK_SIZE  # covers every mode's cache (streaming: + one block)
    recent = f"{w}..{w + BLOCK_SIZE - 1}"
    stream = ["--mode", "streaming", "--window", str(w), "--chunk", str(BLOCK_SIZE)]
    recompute = ["--mode", "recompute", "--window", str(recompute_window), "--stride", str(s)]
    recompute_ctx = ["--ctx", str(recompute_window + 1)]
    rows = [
        Row(
            "sinks + window",
            "streaming",
            f"{args.sink} (first {sink_kept} kept)",
            str(w),
            f"first {sink_kept} + {recent}",
            [*stream, "--sink", str(args.sink), "--ctx", str(ctx)],
        ),
        Row(
            "window, no sinks",
            "streaming",
            "0",
            str(w),
            recent,
            [*stream, "--sink", "0", "--ctx", str(ctx)],
        ),
        Row(
            f"recompute, stride {s}",
            "recompute",
            "BOS",
            str(recompute_window),
            f"BOS + {recompute_window - s}..{recompute_window - 1}",
            [*recompute, *recompute_ctx],
        ),
    ]
    if args.paper_recompute:
        label = f"recompute without BOS, stride {s}"
        context = f"{recompute_window - s}..{recompute_window - 1}"
        rows.append(
            Row(
                label,
                "recompute",
                "0",
                str(recompute_window),
                context,
                [*recompute, *recompute_ctx, "--no-bos"],
            )
        )
    if args.windows:
        rows.append(
            Row(
                "windows (llama.cpp)",
                "windows",
                "BOS",
                "-",
                f"BOS + 0..{ctx - 2}",
                ["--ctx", str(ctx)],
            )
        )
    return rows


def measure(row: Row, args: argparse.Namespace, text_file: Path) -> None:
    """Run one row in a fresh process and fill in its numbers."""
    common = [args.model, str(text_file), "--runner", args.runner, "--threads", str(args.threads)]
    if "--no-bos" in row.flags:  # the CLI has no such flag: this script's in-process worker
        flags = [f for f in row.flags if f != "--no-bos"]
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", *common, *flags]
    else:
        cmd = [sys.executable, "-m", "ember", "eval", "ppl", *common, *row.flags, "--json"]
    print("$", " ".join(cmd[1:]), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{row.label}: exit {done.returncode}\n{done.stderr.strip()}")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    row.tokens, row.ppl = int(record["tokens"]), float(record["ppl"])
    row.evicted_tokens, row.seconds = int(record["evicted_tokens"]), float(record["seconds"])


def worker(argv: list[str]) -> int:
    """`eval ppl` in this process with the recompute windows left without BOS; one JSON line."""
    parser = argparse.ArgumentParser()
    for name in ("model", "file"):
        parser.add_argument(name)
    for flag, kind in (("--runner", str), ("--threads", int), ("--mode", str)):
        parser.add_argument(flag, type=kind)
    for flag in ("--window", "--stride", "--ctx"):
        parser.add_argument(flag, type=int)
    args = parser.parse_args(argv)
    from ember.app.loading import load_runner
    from ember.app.options import EngineFlags, engine_options
    from ember.engine.perplexity import perplexity

    flags = EngineFlags(runner=args.runner, threads=args.threads, ctx=args.ctx)
    runner, _, _ = load_runner(engine_options(args.model, flags=flags))
    try:
        tokenizer = runner.tokenizer
        ids = tokenizer.encode(
            Path(args.file).read_text(encoding="utf-8"), add_bos=tokenizer.add_bos
        )
        started = time.perf_counter()
        result = perplexity(
            runner,
            ids,
            mode=args.mode,
            ctx=args.ctx,
            window=args.window,
            stride=args.stride,
            bos_id=tokenizer.bos_id if tokenizer.add_bos else None,
            recompute_bos=False,
        )
        seconds = time.perf_counter() - started
    finally:
        runner.close()
    record = {
        "ppl": result.ppl,
        "tokens": result.tokens,
        "evicted_tokens": 0,
        "seconds": round(seconds, 3),
    }
    print(json.dumps(record))
    return 0


def check(rows: list[Row], num_tokens: int, args: argparse.Namespace) -> list[str]:
    """Like with like: every row scored the same tokens; the streaming rows really evicted."""
    problems = []
    for row in rows:
        if row.tokens != num_tokens - 1:
            problems.append(f"{row.label}: scored {row.tokens} tokens, expected {num_tokens - 1}")
        if row.mode == "streaming":
            sink_kept = -(-int(row.flags[row.flags.index("--sink") + 1]) // BLOCK_SIZE) * BLOCK_SIZE
            limit = sink_kept + args.window + BLOCK_SIZE
            fed = num_tokens - 1  # the last token is only a target
            if row.evicted_tokens <= 0 or fed - row.evicted_tokens > limit:
                problems.append(
                    f"{row.label}: evicted {row.evicted_tokens} of {fed} (limit {limit})"
                )
    return problems


def table(rows: list[Row]) -> str:
    """The markdown table."""
    lines = [
        "| mode | sinks | window | recent tokens seen | tokens scored | ppl | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.sinks} | {r.window} | {r.context} | {r.tokens:,} | "
            f"{r.ppl:.3f} | {r.seconds:.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--runner", default="llama.cpp", choices=("llama.cpp", "torch"))
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--sink", type=int, default=4)
    parser.add_argument("--stride", type=int, default=64)
    parser.add_argument("--min-tokens", type=int, default=20_000)
    # 1 thread: on a shared 2-core box a 2-thread llama.cpp waits on its preempted twin (4.8x
    # slower than 1 thread, measured beside another benchmark); 0 = physical cores
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--paper-recompute",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add the recompute without BOS (default: on)",
    )
    parser.add_argument("--windows", action="store_true", help="add the windows mode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.window % BLOCK_SIZE or args.stride % 2:
        raise SystemExit(f"--window must be a multiple of {BLOCK_SIZE} and --stride even")

    from ember.app.loading import resolve_files
    from ember.models.text.tokenizers.open import open_tokenizer

    tokenizer = open_tokenizer(resolve_files(args.model).path)
    text, num_tokens, names = build_corpus(tokenizer, args.min_tokens)
    digest = hashlib.sha256(text.encode()).hexdigest()
    print(f"corpus: {len(names)} files, {len(text):,} characters, {num_tokens:,} tokens")
    print(f"corpus files: {' '.join(Path(n).name for n in names)}")
    print(f"corpus sha256: {digest}", flush=True)
    rows = plan(args)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        text_file = Path(tmp) / "corpus.txt"
        text_file.write_text(text, encoding="utf-8")
        for row in rows:
            measure(row, args, text_file)
            print(
                f"  {row.label}: ppl {row.ppl:.3f} ({row.seconds:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    total = time.perf_counter() - started
    print(table(rows))
    print(f"total {total:.0f} s, runner {args.runner}, model {args.model}")
    problems = check(rows, num_tokens, args)
    for problem in problems:
        print(f"CHECK FAILED: {problem}")
    if args.json:
        corpus = {"files": names, "tokens": num_tokens, "sha256": digest}
        print(json.dumps({"corpus": corpus, "rows": [asdict(r) for r in rows], "seconds": total}))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
