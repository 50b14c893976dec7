"""The token ids of a finished reply as the client saw it: what a later request continues from
(prompt ids + these are Ollama's `context`).

The generated ids can run past the visible reply: a stop string that ended it is cut from the
text but its tokens were generated, and a token may straddle the cut ("." + "\\nUser" in one
token). Those tokens would put the stop string into a continued prompt, so the ids kept are the
whole tokens inside the visible text (the leading whitespace the scaffold's lstrip hid counts as
visible: the model did write it), and a straddled token's visible part is encoded afresh. The
common case, nothing cut, returns the generated ids unchanged, so a continued prompt hits the
prefix cache for the whole exchange. No torch, no numpy.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from ember.models.text.tokenizers.base import Tokenizer


def visible_reply_ids(
    output_ids: Sequence[int], tokenizer: Tokenizer, shown: str, stripped: str
) -> tuple[int, ...]:
    """output_ids trimmed to the reply text `stripped + shown` (stripped: the leading
    whitespace the detokenizer dropped, shown: the reply it released). Bytes are decoded as the
    detokenizer decodes them (invalid UTF-8 as U+FFFD), so such a reply trims the same way."""
    visible = stripped + shown
    pieces = [tokenizer.token_bytes(t) for t in output_ids]
    if b"".join(pieces).decode("utf-8", errors="replace") == visible:
        return tuple(output_ids)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text_len, kept, kept_len = 0, 0, 0
    for i, piece in enumerate(pieces):  # whole tokens that end inside the visible text
        new = decoder.decode(piece)
        if not visible.startswith(new, text_len) or text_len + len(new) > len(visible):
            break
        text_len += len(new)
        if not decoder.getstate()[0]:  # no half character pending: a clean cut after token i
            kept, kept_len = i + 1, text_len
    rest = visible[kept_len:]
    tail = tokenizer.encode(rest, add_bos=False, parse_special=False) if rest else []
    return (*output_ids[:kept], *tail)
