"""`logit_bias` on /v1/chat/completions and /v1/completions, in every form OpenAI and
llama-server accept: an object {"15043": 5} (keys are token ids as strings, or a text as
llama-server allows), or llama.cpp's lists [[15043, 5]] and [["Hello", -1]]; a bias of -100 or
false bans the token. A text's bias goes to each of its token ids (the engine tokenizes it and
checks every id against the vocabulary: engine/logit_bias.py)."""

from __future__ import annotations

import math
from typing import Any

from ember.app.server.errors import RequestInvalid
from ember.engine.api import MAX_LOGIT_BIAS

Bias = tuple[tuple[tuple[int, float], ...], tuple[tuple[str, float], ...]]


def parse_logit_bias(body: dict[str, Any]) -> Bias:
    """(id entries, text entries) of body's logit_bias; a 400 naming the entry if wrong."""
    value = body.get("logit_bias")
    if value is None:
        return (), ()
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = [_pair(entry, f"logit_bias[{i}]") for i, entry in enumerate(value)]
    else:
        raise RequestInvalid("logit_bias", "must be an object or a list of [token, bias] pairs")
    if len(pairs) > MAX_LOGIT_BIAS:
        raise RequestInvalid("logit_bias", f"at most {MAX_LOGIT_BIAS} entries")
    ids: list[tuple[int, float]] = []
    texts: list[tuple[str, float]] = []
    for key, bias in pairs:
        param = f"logit_bias[{str(key)[:40]!r}]"
        amount = _bias(bias, param)
        token = _token(key, param)
        if isinstance(token, int):
            ids.append((token, amount))
        else:
            texts.append((token, amount))
    return tuple(ids), tuple(texts)


def _pair(entry: Any, param: str) -> tuple[Any, Any]:
    if not isinstance(entry, list) or len(entry) != 2:
        raise RequestInvalid(param, "must be a [token, bias] pair")
    return entry[0], entry[1]


def _token(key: Any, param: str) -> int | str:
    """An id (an int, or a string of digits) or a non-empty text."""
    if isinstance(key, bool):
        raise RequestInvalid(param, "the token must be an id or a text")
    if isinstance(key, int):
        if key < 0:
            raise RequestInvalid(param, "a token id must be >= 0")
        return key
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return _token(int(key), param)
    if isinstance(key, str) and 0 < len(key) <= 256:
        return key
    raise RequestInvalid(param, "the token must be an id or a text of 1 to 256 characters")


def _bias(bias: Any, param: str) -> float:
    """A number in [-100, 100]; false is a ban (-inf)."""
    if bias is False:
        return -math.inf
    if isinstance(bias, bool) or not isinstance(bias, (int, float)):
        raise RequestInvalid(param, "the bias must be a number in [-100, 100] or false")
    if not -100.0 <= float(bias) <= 100.0:
        raise RequestInvalid(param, "the bias must be in [-100, 100]")
    return float(bias)
