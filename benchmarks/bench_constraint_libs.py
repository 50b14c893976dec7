"""llguidance vs xgrammar on the starter model's vocabulary: build, compile and mask costs.

Both libraries get the same vocabulary (Gemma 3's 262,144 tokens, read through llama.cpp as
Ember's tokenizer reads it; control tokens marked special), the same grammars, and the same walk:
the token ids of a valid answer, fed one at a time (mask, check the token is allowed, advance).
Runs alternate between the libraries; medians are printed side by side.

    pip install llguidance==1.9.1 xgrammar==0.2.9    # xgrammar only for this comparison
    python benchmarks/bench_constraint_libs.py [--model PATH] [--repeats 5] [--json]

Compile time is measured on a fresh compiler each time (no cache), so it is the per-schema cost
a request pays the first time its schema is seen.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "bio": {"type": "string"},
    },
    "required": ["name", "age", "tags", "bio"],
    "additionalProperties": False,
}
PERSON_ANSWER = {
    "name": "Ada Lovelace",
    "age": 36,
    "tags": ["mathematics", "poetry", "engines", "notes"],
    "bio": (
        "Ada Lovelace wrote the first published algorithm meant for a machine, the notes on "
        "Babbage's Analytical Engine, and saw that such an engine could handle symbols, not "
        "only numbers."
    ),
}
TOOL = {
    "type": "object",
    "properties": {
        "name": {"const": "get_weather"},
        "arguments": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}
TOOL_ANSWER = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}}
ANY_ANSWER = {"title": "Rain", "lines": ["soft rain on the roof", "the gutters sing"], "n": 2}
CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("person schema", PERSON, PERSON_ANSWER),
    ("tool-call schema", TOOL, TOOL_ANSWER),
    ("any JSON object", {"type": "object"}, ANY_ANSWER),
]


def vocabulary(path: Path) -> tuple[list[bytes], list[int], int]:
    """Every token's bytes, the control-token ids and EOS, as llama.cpp's vocab gives them."""
    import llama_cpp

    from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer

    tok = LlamaCppTokenizer(path)
    vocab = tok._vocab  # noqa: SLF001 (a benchmark reads the same handle the engine uses)
    special = [
        i
        for i in range(tok.vocab_size)
        if llama_cpp.llama_vocab_get_attr(vocab, i) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    ]
    tokens = [tok.token_bytes(i) for i in range(tok.vocab_size)]
    assert tok.eos_id is not None
    return tokens, special, tok.eos_id


class Llg:
    name = "llguidance 1.9.1"

    def __init__(self, tokens: list[bytes], special: list[int], eos: int, encode: Any) -> None:
        import llguidance

        self.lib = llguidance
        started = time.perf_counter()
        control = set(special)
        marked = [b"\xff" + t if i in control else t for i, t in enumerate(tokens)]
        wrapper = _Wrapper(marked, eos, encode)
        self.tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(wrapper))
        self.build_s = time.perf_counter() - started
        self.words = (len(tokens) + 31) // 32

    def compile(self, schema: dict[str, Any]) -> Any:
        schema = {
            **schema,
            "x-guidance": {
                "item_separator": ", ",
                "key_separator": ": ",
                "whitespace_flexible": False,
            },
        }
        grammar = self.lib.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        matcher = self.lib.LLMatcher(self.tokenizer, grammar)
        assert not matcher.is_error(), matcher.get_error()
        return matcher

    def walk(self, matcher: Any, ids: list[int]) -> list[float]:
        import numpy as np

        mask = np.zeros(self.words, dtype=np.int32)
        times = []
        for token in ids:
            started = time.perf_counter()
            matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
            times.append(time.perf_counter() - started)
            assert (int(mask[token >> 5]) >> (token & 31)) & 1, f"token {token} masked"
            assert matcher.consume_token(token), matcher.get_error()
        assert matcher.is_accepting()
        return times


class Xgr:
    name = "xgrammar 0.2.9"

    def __init__(self, tokens: list[bytes], special: list[int], eos: int, encode: Any) -> None:
        import xgrammar  # type: ignore[import-not-found]  # optional: pip install xgrammar

        self.lib = xgrammar
        started = time.perf_counter()
        # xgrammar has no "special" marker: control tokens get an empty spelling (never allowed)
        control = set(special)
        raw = [b"" if i in control else t for i, t in enumerate(tokens)]
        self.info = xgrammar.TokenizerInfo(raw, xgrammar.VocabType.RAW, stop_token_ids=[eos])
        self.build_s = time.perf_counter() - started
        self.vocab = len(tokens)

    def compile(self, schema: dict[str, Any]) -> Any:
        compiler = self.lib.GrammarCompiler(self.info, cache_enabled=False)
        compiled = compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(", ", ": ")
        )
        return self.lib.GrammarMatcher(compiled)

    def walk(self, matcher: Any, ids: list[int]) -> list[float]:
        import numpy as np

        mask = np.zeros((1, (self.vocab + 31) // 32), dtype=np.int32)
        times = []
        for token in ids:
            started = time.perf_counter()
            matcher.fill_next_token_bitmask(mask)
            times.append(time.perf_counter() - started)
            assert (int(mask[0, token >> 5]) >> (token & 31)) & 1, f"token {token} masked"
            assert matcher.accept_token(token)
        return times


class _Wrapper:
    """The object llguidance.TokenizerWrapper wraps: tokens, EOS/BOS, and an encoder."""

    def __init__(self, tokens: list[bytes], eos: int, encode: Any) -> None:
        self.tokens = tokens
        self.eos_token_id = eos
        self.bos_token_id = None
        self._encode = encode

    def __call__(self, text: bytes | str) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return list(self._encode(text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.model is None:
        from ember.models.registry.starter import starter_path

        args.model = starter_path(ROOT / "tests" / ".cache" / "models")
    from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer

    tok = LlamaCppTokenizer(args.model)
    started = time.perf_counter()
    tokens, special, eos = vocabulary(args.model)
    read_s = time.perf_counter() - started
    libs: list[Llg | Xgr] = [
        Llg(tokens, special, eos, tok.encode),
        Xgr(tokens, special, eos, tok.encode),
    ]
    results: dict[str, Any] = {
        lib.name: {"vocab_build_s": lib.build_s, "cases": {}} for lib in libs
    }
    for label, schema, answer in CASES:
        ids = tok.encode(json.dumps(answer, separators=(", ", ": ")))
        compile_s: dict[str, list[float]] = {lib.name: [] for lib in libs}
        mask_s: dict[str, list[float]] = {lib.name: [] for lib in libs}
        for _ in range(args.repeats):
            for lib in libs:  # alternate so machine load hits both alike
                started = time.perf_counter()
                matcher = lib.compile(schema)
                compile_s[lib.name].append(time.perf_counter() - started)
                mask_s[lib.name] += lib.walk(matcher, ids)
        for lib in libs:
            results[lib.name]["cases"][label] = {
                "tokens": len(ids),
                "compile_ms": 1000 * statistics.median(compile_s[lib.name]),
                "mask_us_median": 1e6 * statistics.median(mask_s[lib.name]),
                "mask_us_p90": 1e6 * sorted(mask_s[lib.name])[int(0.9 * len(mask_s[lib.name]))],
                "mask_us_mean": 1e6 * statistics.fmean(mask_s[lib.name]),
            }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"vocabulary: {len(tokens)} tokens ({len(special)} control), read in {read_s:.2f} s")
    for lib in libs:
        print(f"{lib.name}: tokenizer build {results[lib.name]['vocab_build_s']:.2f} s")
    print(
        f"{'case':<18} {'library':<18} {'compile ms':>10} {'mask us (med)':>14} "
        f"{'p90':>8} {'mean':>8}"
    )
    for label, _, _ in CASES:
        for lib in libs:
            row = results[lib.name]["cases"][label]
            print(
                f"{label:<18} {lib.name:<18} {row['compile_ms']:>10.1f} "
                f"{row['mask_us_median']:>14.1f} {row['mask_us_p90']:>8.1f} "
                f"{row['mask_us_mean']:>8.1f}"
            )


if __name__ == "__main__":
    main()
