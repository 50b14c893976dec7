"""The sampling and repetition rows of the parameter table.

Each range is the engine's (SamplingParams checks the same numbers; tests/app/test_parameters.py
proves they agree): the CLI flags, the settings file and the TUI accept exactly it, and each
server API keeps its own documented range as a narrower view (views.py).
"""

from __future__ import annotations

import json

from ember.app.parameters.types import Parameter, Range

MAX_TOKENS = 1 << 20
MAX_SEED = (1 << 64) - 1  # the engine's SamplingParams takes 0..MAX_SEED
MAX_BREAKERS = 16  # the engine's SamplingParams: at most 16 breakers of 1 to 40 characters
MAX_BREAKER_CHARS = 40
DEFAULT_DRY_BREAKERS = '["\\n", ":", "\\"", "*"]'  # llama.cpp's, as the JSON a setting holds


def parse_breakers(text: str) -> tuple[str, ...] | None:
    """DRY's sequence breakers from their JSON list form (`["\\n", ":"]`), None if not valid:
    a list of at most 16 strings of 1 to 40 characters."""
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return None
    if not isinstance(value, list) or len(value) > MAX_BREAKERS:
        return None
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_BREAKER_CHARS for v in value):
        return None
    return tuple(value)


SAMPLING = (
    Parameter(
        "temperature",
        float,
        0.7,
        "0 = greedy (exact argmax); higher = more varied",
        "sampling",
        Range(0.0, 10.0),
        label="Temperature",
    ),
    Parameter(
        "top_k",
        int,
        40,
        "keep the k most likely tokens (0 = off)",
        "sampling",
        Range(0, MAX_TOKENS),
        reason="must be >= 0 (0 = off)",
        label="Top-k",
    ),
    Parameter(
        "top_p",
        float,
        0.95,
        "nucleus sampling mass (1 = off)",
        "sampling",
        Range(0.0, 1.0, low_open=True),
        label="Top-p",
    ),
    Parameter(
        "min_p",
        float,
        0.05,
        "drop tokens below min-p x the top probability (0 = off)",
        "sampling",
        Range(0.0, 1.0),
        label="Min-p",
    ),
    Parameter(
        "repeat_penalty",
        float,
        1.0,
        "llama.cpp's repetition penalty (1 = off)",
        "sampling",
        Range(0.0, 10.0, low_open=True),
        label="Repeat penalty",
    ),
    Parameter(
        "presence_penalty",
        float,
        0.0,
        "subtract this from every seen token's logit (0 = off)",
        "sampling",
        Range(-2.0, 2.0),
        setting=False,
    ),
    Parameter(
        "frequency_penalty",
        float,
        0.0,
        "subtract this x each token's count so far (0 = off)",
        "sampling",
        Range(-2.0, 2.0),
        setting=False,
    ),
    Parameter(
        "penalty_last_n",
        int,
        64,
        "recent tokens the repeat/presence/frequency penalties see",
        "sampling",
        Range(0, MAX_TOKENS),
        setting=False,
    ),
    Parameter(
        "max_tokens",
        int,
        1024,
        "most tokens to generate",
        "sampling",
        Range(1, MAX_TOKENS),
        label="Max reply tokens",
    ),
    Parameter(
        "reasoning_budget",
        int,
        None,
        "most tokens in the reply's <think> block, then </think> is forced (no block: no effect)",
        "sampling",
        Range(0, MAX_TOKENS),
        setting=False,
        metavar="TOKENS",
    ),
    Parameter(
        "seed",
        int,
        None,
        "random seed for reproducible sampling",
        "sampling",
        Range(0, MAX_SEED),
        setting=False,
    ),
)

REPETITION = (
    Parameter(
        "dry_multiplier",
        float,
        # off by default, like llama.cpp and Ollama: on input-grounded prompts DRY 0.8 mangled
        # copies (a rewritten signature) with no loop it prevented; the loop detector stays on
        # (benchmarks/bench_dry_default.py, docs/benchmarks.md)
        0.0,
        "DRY repetition penalty strength (0 = off, the default; try 0.8 against repeats)",
        "repetition",
        Range(0.0, 100.0),
        reason="must be between 0 (off) and 100",
        label="DRY multiplier (0 = off)",
    ),
    Parameter(
        "dry_base",
        float,
        1.75,
        "DRY growth per repeated token (>= 1)",
        "repetition",
        Range(1.0, 100.0),
        label="DRY base",
    ),
    Parameter(
        "dry_allowed_length",
        int,
        2,
        "DRY: repeats up to this many tokens are free",
        "repetition",
        Range(1, 1 << 16),
        reason="must be between 1 and 65536 tokens",
        label="DRY allowed length",
    ),
    Parameter(
        "dry_penalty_last_n",
        int,
        -1,
        "DRY: recent tokens searched (-1 = all, 0 = off)",
        "repetition",
        Range(-1, MAX_TOKENS),
        reason="must be -1 (all), 0 (off) or a count",
        label="DRY range (-1 = all)",
    ),
    Parameter(
        "dry_sequence_breakers",
        str,
        DEFAULT_DRY_BREAKERS,
        'DRY: a JSON list of strings no repeat spans, e.g. \'["\\n", ":"]\'',
        "repetition",
        rule=lambda v: parse_breakers(v) is not None,
        reason=f"must be a JSON list of at most {MAX_BREAKERS} strings of 1 to "
        f'{MAX_BREAKER_CHARS} characters, e.g. ["\\n", ":"]',
        label="DRY sequence breakers (JSON)",
        metavar="JSON",
    ),
    Parameter(
        "loop_min_tokens",
        int,
        64,
        "end a reply once its last N+ tokens are one cycle repeated (0 = off)",
        "repetition",
        Range(0, MAX_TOKENS),
        reason="must be >= 0 tokens (0 = off)",
        label="Loop stop after (tokens, 0 = off)",
    ),
)
