"""Constrained decoding: a grammar compiled once per request, applied as a token mask.

A ConstraintSpec (engine/api.py: JSON schema, any JSON object, regex, Lark or GBNF grammar; the
tool-call layer builds Lark grammars with inline `%json` schemas) is compiled by llguidance
against the model's vocabulary. Each step the request's Constraint gives the allowed-token mask,
which the engine applies to the logits before sampling (both runners: the engine samples), and
it advances with every accepted token. When the grammar is complete the request stops.

Why llguidance and not xgrammar (docs/structured-output.md has the numbers, measured by
benchmarks/bench_constraint_libs.py on the starter model's 262,144-token vocabulary): a schema
compiles in about 1 ms instead of 100-700 ms, which matters because every request may bring its
own schema or tools; masks cost tens of microseconds per token in both; the wheel is 7.6 MB with
no dependencies, where xgrammar pulls triton (about 1 GB) and transformers.

The vocabulary index (every token's bytes, control tokens marked) is built once per loaded
model, on the first constrained request; compiled grammars are cached by spec (LRU) and each
request gets a copy of the compiled matcher.

Mask layout: llguidance writes one bit per token, little-endian within int32 words:
token t is allowed iff (words[t >> 5] >> (t & 31)) & 1.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from ember.engine.api import ConstraintSpec
from ember.engine.errors import EngineError
from ember.engine.json_schema import check_repeats, prepare_schema

if TYPE_CHECKING:
    from ember.models.text.tokenizers.base import Tokenizer

# Single-line JSON with the usual separators: what small models write anyway, and no room for
# the runaway-whitespace failure of flexible grammars. A schema's own "x-guidance" overrides it.
JSON_DEFAULTS: Any = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
CACHE_SIZE = 64


def _grammar(spec: ConstraintSpec) -> str:
    """The llguidance grammar text of a spec (not yet checked against a vocabulary)."""
    import llguidance

    matcher = llguidance.LLMatcher
    if spec.kind in ("json_schema", "json_object"):
        text = spec.text if spec.kind == "json_schema" else '{"type": "object"}'
        try:
            schema = json.loads(text)
        except RecursionError:
            raise EngineError("constraint json_schema: nested too deeply") from None
        except ValueError as exc:
            raise EngineError(f"constraint json_schema: not valid JSON ({exc})") from None
        if not isinstance(schema, dict | bool):
            raise EngineError("constraint json_schema: must be a JSON object")
        text = json.dumps(prepare_schema(schema))  # checked, numbers bounded
        try:
            return str(matcher.grammar_from_json_schema(text, defaults=JSON_DEFAULTS))
        except ValueError as exc:
            raise EngineError(f"constraint json_schema: {short_error(str(exc))}") from None
    check_repeats(spec.text, f"constraint {spec.kind}")
    if spec.kind == "regex":
        try:
            return str(matcher.grammar_from_regex(spec.text))
        except ValueError as exc:
            raise EngineError(f"constraint regex: {short_error(str(exc))}") from None
    if spec.kind == "gbnf":
        from llguidance.gbnf_to_lark import any_to_lark

        try:
            return str(matcher.grammar_from_lark(any_to_lark(spec.text)))
        except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
            raise EngineError(f"constraint gbnf: {short_error(str(exc))}") from None
    try:
        return str(matcher.grammar_from_lark(spec.text))
    except ValueError as exc:
        raise EngineError(f"constraint {spec.kind}: {short_error(str(exc))}") from None


def short_error(message: str) -> str:
    """llguidance's message without the parser state it appends: its first line, at most 200
    characters (a client sees why, not the compiler's internals)."""
    first = message.split("<state>")[0].strip().splitlines()
    line = first[0] if first else "rejected"
    return line if len(line) <= 200 else line[:199] + "\u2026"


class _Encoder:
    """What llguidance.TokenizerWrapper wraps: the vocabulary's bytes plus an encoder."""

    def __init__(self, tokenizer: Tokenizer, width: int) -> None:
        special = tokenizer.special_ids
        tokens = []
        for token_id in range(tokenizer.vocab_size):
            piece = tokenizer.token_bytes(token_id)
            # llguidance's convention: a leading 0xFF byte marks a special token, which no
            # grammar text can match (only EOS is allowed, when the grammar is complete)
            tokens.append(b"\xff" + piece if token_id in special else piece)
        tokens += [b"\xff<unused>"] * (width - len(tokens))  # logits wider than the vocab
        self.tokens = tokens
        self.eos_token_id = tokenizer.eos_id if tokenizer.eos_id is not None else 0
        self.bos_token_id = tokenizer.bos_id
        self.special_token_ids = sorted(special)
        self._tokenizer = tokenizer

    def __call__(self, text: bytes | str) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return list(self._tokenizer.encode(text, parse_special=False))


class ConstraintCompiler:
    """Compiles ConstraintSpecs for one model's vocabulary; thread-safe; caches by spec."""

    def __init__(self, tokenizer: Tokenizer, vocab_width: int, cache_size: int = CACHE_SIZE):
        self.tokenizer = tokenizer
        self.width = max(vocab_width, tokenizer.vocab_size)
        self.end_ids = sorted(
            set(tokenizer.eot_ids) | ({tokenizer.eos_id} if tokenizer.eos_id is not None else set())
        )
        self.cache_size = cache_size
        self._ll_tokenizer: Any = None
        self._cache: OrderedDict[ConstraintSpec, Any] = OrderedDict()
        self._lock = threading.Lock()

    def _vocabulary(self) -> Any:
        if self._ll_tokenizer is None:
            try:
                import llguidance
            except ImportError:
                raise EngineError(
                    "constrained decoding needs llguidance: pip install llguidance"
                ) from None
            wrapper = llguidance.TokenizerWrapper(_Encoder(self.tokenizer, self.width))
            self._ll_tokenizer = llguidance.LLTokenizer(
                wrapper, n_vocab=self.width, eos_token=self.end_ids or None
            )
        return self._ll_tokenizer

    def compile(self, spec: ConstraintSpec) -> Constraint:
        """A fresh Constraint for one request (EngineError naming the problem if invalid)."""
        with self._lock:
            pristine = self._cache.get(spec)
            if pristine is None:
                pristine = self._build(spec)
                self._cache[spec] = pristine
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(spec)
            return Constraint(pristine.deep_copy(), self.width, spec.kind)

    def _build(self, spec: ConstraintSpec) -> Any:
        import llguidance

        tokenizer = self._vocabulary()
        grammar = _grammar(spec)
        error = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if error:
            raise EngineError(f"constraint {spec.kind}: {short_error(error)}")
        matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise EngineError(f"constraint {spec.kind}: {short_error(matcher.get_error())}")
        return matcher


class Constraint:
    """One request's grammar state: mask logits, advance by accepted tokens, roll back drafts."""

    def __init__(self, matcher: Any, width: int, kind: str = "grammar") -> None:
        self._matcher = matcher
        self.width = width
        self.kind = kind
        self._words = np.zeros((width + 31) // 32, dtype=np.int32)

    def allowed(self) -> np.ndarray:
        """(width,) bool: which tokens the grammar allows next."""
        self._matcher.unsafe_compute_mask_ptr(self._words.ctypes.data, self._words.nbytes)
        self._check()
        bits = np.unpackbits(self._words.view(np.uint8), bitorder="little")
        return bits[: self.width].astype(bool)

    def apply(self, logits: np.ndarray) -> np.ndarray:
        """A copy of logits (vocab,) with every disallowed token at -inf."""
        allowed = self.allowed()
        width = logits.shape[-1]
        if width != self.width:  # a runner whose rows are narrower/wider than the vocab index
            fitted = np.zeros(width, dtype=bool)
            fitted[: min(width, self.width)] = allowed[:width]
            allowed = fitted
        if not allowed.any():
            raise EngineError(f"constraint {self.kind}: the grammar allows no next token")
        return np.where(allowed, np.asarray(logits, dtype=np.float32), np.float32(-np.inf))

    def advance(self, token_id: int) -> None:
        """Accept one token (EngineError if the grammar forbids it)."""
        if not self._matcher.consume_token(int(token_id)):
            raise EngineError(
                f"constraint {self.kind}: token {token_id} is not allowed here "
                f"({short_error(self._matcher.get_error() or 'rejected')})"
            )

    def rollback(self, num_tokens: int) -> None:
        """Undo the last num_tokens advances (tentatively accepted drafts)."""
        if num_tokens and not self._matcher.rollback(num_tokens):
            raise EngineError(f"constraint {self.kind}: cannot roll back {num_tokens} tokens")

    def count_valid(self, token_ids: list[int]) -> int:
        """How many of token_ids, in order, the grammar would accept from here."""
        return int(self._matcher.validate_tokens([int(t) for t in token_ids])) if token_ids else 0

    @property
    def done(self) -> bool:
        """The grammar is complete and allows nothing more (generation ends here)."""
        return bool(self._matcher.is_stopped())

    @property
    def accepting(self) -> bool:
        """What was generated so far is a complete match (it may still go on)."""
        return bool(self._matcher.is_accepting())

    def lookahead(self) -> Lookahead:
        """Masks for the positions after tentatively accepted tokens (speculative steps)."""
        return Lookahead(self)

    def _check(self) -> None:
        if self._matcher.is_error():
            raise EngineError(f"constraint {self.kind}: {short_error(self._matcher.get_error())}")


class Lookahead:
    """Masks rows as if the tokens emitted so far in this step were accepted; `with` rolls
    them back at the end, so the request's state only moves through RequestState.accept."""

    def __init__(self, constraint: Constraint) -> None:
        self.constraint = constraint
        self.consumed = 0

    def mask(self, row: np.ndarray, emitted: list[int]) -> np.ndarray:
        """row (vocab,) masked for the position after `emitted` (this step's tokens so far)."""
        for token in emitted[self.consumed :]:
            self.constraint.advance(token)
            self.consumed += 1
        return self.constraint.apply(row)

    def __enter__(self) -> Lookahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.constraint.rollback(self.consumed)
        self.consumed = 0
