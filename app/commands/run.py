"""`ember run MODEL [PROMPT]`: one-shot generation streamed to stdout."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ember.app.options import add_engine_flags, add_repetition_flags, add_sampling_flags

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
    "context_limit",
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
    add_sampling_flags(parser)
    add_repetition_flags(parser)
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument(
        "--json-schema",
        metavar="FILE",
        help="the reply is JSON matching this JSON Schema file ('{}' file: any JSON object)",
    )
    shape.add_argument(
        "--grammar",
        metavar="FILE",
        help="the reply matches this grammar: GBNF (.gbnf), Lark (.lark) or a regex (.regex)",
    )
    add_engine_flags(parser)
    parser.add_argument(
        "--json", action="store_true", help="end with one JSON line of text and stats"
    )


GRAMMAR_KINDS = {".gbnf": "gbnf", ".lark": "lark", ".regex": "regex", ".re": "regex"}


MAX_SPEC_BYTES = 1024 * 1024  # a schema or grammar file; a FIFO or device is refused unread


def _read_spec_file(flag: str, path: str) -> str:
    from ember.app.errors import ConfigError
    from ember.user_files import UserFileError, read_user_text

    try:
        return read_user_text(path, flag, MAX_SPEC_BYTES)
    except UserFileError as exc:
        raise ConfigError(str(exc)) from None


def _engine_log_to_file() -> None:
    """The engine's own log (a failed request's traceback) goes to engine.log in the cache
    folder (app/crash.py's), not the terminal, where the one-line error says what failed."""
    import logging

    from ember.app.crash import log_path

    logger = logging.getLogger("ember")
    path = log_path()
    if any(getattr(h, "baseFilename", "") == str(path) for h in logger.handlers):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    logger.addHandler(handler)


def constraint_from_args(args: argparse.Namespace) -> Any:
    """The ConstraintSpec --json-schema or --grammar names (None when neither is given)."""
    from pathlib import Path

    from ember.app.errors import ConfigError
    from ember.engine.api import ConstraintSpec

    if getattr(args, "json_schema", None):
        text = _read_spec_file("--json-schema", args.json_schema)
        try:
            schema = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"--json-schema {args.json_schema}: not valid JSON ({exc})") from None
        if schema == {}:
            return ConstraintSpec("json_object")
        return ConstraintSpec("json_schema", text)
    if getattr(args, "grammar", None):
        suffix = Path(args.grammar).suffix.lower()
        kind = GRAMMAR_KINDS.get(suffix, "gbnf")  # llama.cpp's grammars are GBNF
        return ConstraintSpec(kind, _read_spec_file("--grammar", args.grammar))  # type: ignore[arg-type]
    return None


def _request(args: argparse.Namespace, prompt: str, settings: Any) -> Any:
    from ember.app.options import REPETITION_FLAGS, SAMPLING_FLAGS, sampling_params
    from ember.engine.api import ChatMessage, GenerationRequest

    names = (*SAMPLING_FLAGS, *REPETITION_FLAGS, "reasoning_budget")
    flags = {name: getattr(args, name, None) for name in names}
    sampling = sampling_params(settings, flags, seed=args.seed)
    constraint = constraint_from_args(args)
    if args.raw:
        text = f"{args.system}\n\n{prompt}" if args.system else prompt
        return GenerationRequest(prompt=text, sampling=sampling, constraint=constraint)
    system = args.system if args.system is not None else settings.system_prompt
    messages = [ChatMessage("system", system)] if system else []
    messages.append(ChatMessage("user", prompt))
    return GenerationRequest(messages=tuple(messages), sampling=sampling, constraint=constraint)


class ReplyWriter:
    """Writes a reply as it streams: the answer to stdout, the reasoning (when a splitter
    separates it) to stderr, dimmed on a terminal. On a terminal a reply cannot act on it
    (escape sequences shown, not run); piped, it is written byte for byte."""

    def __init__(self, splitter: Any) -> None:
        self.splitter = splitter
        self.content = self.reasoning = ""

    def write(self, text: str, final: bool = False) -> None:
        if self.splitter is None:
            reasoning, content = "", text
        else:
            reasoning, content, _ = self.splitter.feed(text, final)
        self.reasoning += reasoning
        self.content += content
        if reasoning:
            self._put(sys.stderr, reasoning, dim=True)
        if content:
            if self.reasoning and self.content == content:
                self._put(sys.stderr, "\n")  # the answer starts apart from its reasoning
            self._put(sys.stdout, content)

    @staticmethod
    def _put(stream: Any, text: str, dim: bool = False) -> None:
        from ember.text import visible

        tty = stream.isatty()
        shown = visible(text) if tty else text
        stream.write(f"\x1b[2m{shown}\x1b[0m" if dim and tty else shown)
        stream.flush()


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from ember.app.commands._input_text import argument_text, stdin_text
    from ember.app.config import load_settings
    from ember.app.loading import load_backend
    from ember.app.options import EngineFlags, engine_options
    from ember.app.progress import WaitReporter
    from ember.app.reply_splitter import ReplySplitter
    from ember.engine.api import Finished, TextDelta
    from ember.engine.errors import EngineError

    settings = load_settings()
    _engine_log_to_file()
    options = engine_options(args.model, settings, EngineFlags.from_args(args))
    prompt = argument_text(args.prompt, "prompt") if args.prompt is not None else stdin_text()
    if args.system is not None:
        args.system = argument_text(args.system, "--system")
    if not prompt.strip():
        raise EngineError("empty prompt: give PROMPT or pipe text on stdin")
    request = _request(args, prompt, settings)
    waits = WaitReporter(sys.stderr)  # packing weights, loading, a long prefill (over 2 s)
    options = dataclasses.replace(options, progress=waits)
    with waits.waiting(f"loading {options.model}"):
        backend = load_backend(options)
    if backend.info.context_note:  # --ctx auto: the context it chose, and why (one line)
        sys.stderr.write(f"ember: {backend.info.context_note}\n")
    final: Finished | None = None
    # a chat reply's reasoning (<think>, harmony's analysis channel) goes to stderr, its answer
    # to stdout; a raw prompt's continuation is written as the model wrote it
    out = ReplyWriter(None if args.raw else ReplySplitter(backend.info.tool_format, False))
    try:
        waits.start()  # a long prompt's prefill reports from here
        handle = backend.submit(request)
        try:
            for event in handle:
                if isinstance(event, TextDelta):
                    waits.finish()  # end a progress line before the reply's text
                    out.write(event.text)
                else:
                    final = event
        except KeyboardInterrupt:
            handle.abort()
            raise
        out.write("", final=True)
    finally:
        backend.close()
    assert final is not None
    if final.reason == "error":
        raise EngineError(final.error or "generation failed")
    sys.stdout.write("\n")
    if not (out.content if out.splitter else final.text).strip():  # never pass it off as one
        sys.stderr.write(
            f"ember: empty reply: the model wrote no text ({final.stats.generated_tokens} "
            f"tokens, finish: {final.reason}); run it again, or change --seed or --temperature\n"
        )
    if args.json:
        stats = final.stats
        record: dict[str, Any] = {
            "text": final.text,
            "content": out.content,
            "reasoning": out.reasoning,
            "finish_reason": final.reason,
            "token_ids": list(final.token_ids),
            "runner": stats.runner,
            "device": stats.device,
            "kv_cache": backend.info.kv_cache,
            "kv_element": backend.info.kv_element,
            "kv_cache_bytes": backend.info.kv_cache_bytes,
        }
        record.update({name: getattr(stats, name) for name in JSON_FIELDS})
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0
