"""`ember run MODEL [PROMPT]`: one-shot generation streamed to stdout."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ember.app.commands._engine_flags import add_engine_flags, engine_options

NAME = "run"
HELP = "Generate a reply to one prompt and stream it to stdout (prompt from stdin if omitted)."
ORDER = 10

JSON_FIELDS = (
    "prompt_tokens",
    "cached_tokens",
    "generated_tokens",
    "evicted_tokens",
    "drafted_tokens",
    "accepted_tokens",
    "ttft_s",
    "prefill_tok_s",
    "decode_tok_s",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="a registry name or alias, a .gguf file or a safetensors folder"
    )
    parser.add_argument("prompt", nargs="?", help="the prompt (read from stdin when omitted)")
    parser.add_argument("--system", help="a system prompt")
    parser.add_argument(
        "--raw", action="store_true", help="no chat template: the prompt is the model input"
    )
    parser.add_argument("--max-tokens", type=int, help="most tokens to generate")
    parser.add_argument("--temperature", type=float, help="0 = greedy (exact argmax)")
    parser.add_argument("--top-k", type=int, help="keep the k most likely tokens (0 = off)")
    parser.add_argument("--top-p", type=float, help="nucleus sampling mass (1 = off)")
    parser.add_argument("--min-p", type=float, help="drop tokens below min-p x the top probability")
    parser.add_argument(
        "--repeat-penalty", type=float, help="llama.cpp's repetition penalty (1 = off)"
    )
    parser.add_argument("--seed", type=int, help="random seed for reproducible sampling")
    parser.add_argument(
        "--dry-multiplier", type=float, help="DRY repetition penalty strength (0 = off)"
    )
    parser.add_argument("--dry-base", type=float, help="DRY growth per repeated token (>= 1)")
    parser.add_argument(
        "--dry-allowed-length", type=int, help="DRY: repeats up to this many tokens are free"
    )
    parser.add_argument(
        "--dry-penalty-last-n", type=int, help="DRY: recent tokens searched (-1 = all, 0 = off)"
    )
    parser.add_argument(
        "--dry-sequence-breakers",
        metavar="JSON",
        help='DRY: a JSON list of strings no repeat spans, e.g. \'["\\n", ":"]\'',
    )
    parser.add_argument(
        "--loop-min-tokens",
        type=int,
        help="end a reply once its last N+ tokens are one cycle repeated (0 = off)",
    )
    add_engine_flags(parser)
    parser.add_argument(
        "--json", action="store_true", help="end with one JSON line of text and stats"
    )


def _sampling(args: argparse.Namespace) -> Any:
    from ember.app.config import load_settings, parse_breakers
    from ember.engine.api import SamplingParams

    settings = load_settings()
    breakers = args.dry_sequence_breakers

    def pick(name: str, default: Any) -> Any:
        value = getattr(args, name)
        return default if value is None else value

    return SamplingParams(
        temperature=pick("temperature", settings.temperature),
        top_k=pick("top_k", settings.top_k),
        top_p=pick("top_p", settings.top_p),
        min_p=pick("min_p", settings.min_p),
        repeat_penalty=pick("repeat_penalty", settings.repeat_penalty),
        seed=args.seed,
        max_tokens=pick("max_tokens", settings.max_tokens),
        dry_multiplier=pick("dry_multiplier", settings.dry_multiplier),
        dry_base=pick("dry_base", settings.dry_base),
        dry_allowed_length=pick("dry_allowed_length", settings.dry_allowed_length),
        dry_penalty_last_n=pick("dry_penalty_last_n", settings.dry_penalty_last_n),
        dry_sequence_breakers=parse_breakers(
            settings.dry_sequence_breakers if breakers is None else breakers,
            "--dry-sequence-breakers" if breakers is not None else "dry_sequence_breakers",
        ),
        loop_min_tokens=pick("loop_min_tokens", settings.loop_min_tokens),
    )


def _request(args: argparse.Namespace, prompt: str) -> Any:
    from ember.app.config import load_settings
    from ember.engine.api import ChatMessage, GenerationRequest

    sampling = _sampling(args)
    if args.raw:
        text = f"{args.system}\n\n{prompt}" if args.system else prompt
        return GenerationRequest(prompt=text, sampling=sampling)
    system = args.system if args.system is not None else load_settings().system_prompt
    messages = [ChatMessage("system", system)] if system else []
    messages.append(ChatMessage("user", prompt))
    return GenerationRequest(messages=tuple(messages), sampling=sampling)


def run(args: argparse.Namespace) -> int:
    from ember.engine.api import Finished, TextDelta, load_engine
    from ember.engine.errors import EngineError

    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    if not prompt.strip():
        raise EngineError("empty prompt: give PROMPT or pipe text on stdin")
    request = _request(args, prompt)
    backend = load_engine(engine_options(args))
    final: Finished | None = None
    try:
        handle = backend.submit(request)
        try:
            for event in handle:
                if isinstance(event, TextDelta):
                    sys.stdout.write(event.text)
                    sys.stdout.flush()
                else:
                    final = event
        except KeyboardInterrupt:
            handle.abort()
            raise
    finally:
        backend.close()
    assert final is not None
    if final.reason == "error":
        raise EngineError(final.error or "generation failed")
    sys.stdout.write("\n")
    if args.json:
        stats = final.stats
        record: dict[str, Any] = {
            "text": final.text,
            "finish_reason": final.reason,
            "token_ids": list(final.token_ids),
            "runner": stats.runner,
            "device": stats.device,
        }
        record.update({name: getattr(stats, name) for name in JSON_FIELDS})
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0
