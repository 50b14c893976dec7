"""Shared settings of the standing fuzz tests (hypothesis): bounded, deterministic, seconds each.

derandomize=True: the same examples every run (a failure reproduces; CI cannot flake on a new
draw); the examples still cover the strategy's edges (hypothesis shrinks toward them first).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=60,
    deadline=None,  # a loaded CI machine is slow; the bound is max_examples, not a clock
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Text that has broken things at the boundaries: controls, escapes, lone surrogates, private-use
# characters (the segmenter's markers), bidi overrides, special-token spellings, NULs.
NASTY_PIECES = [
    "\x00", "\x1b[2J", "\r\n", "\udce9", "\ud800", "\ue000", "\uf8ff", "\U000f0000", "\u202e",
    "<start_of_turn>", "<end_of_turn>", "<|im_end|>", "<bos>", "<eot>", "{{ 7*7 }}", "{%",
    "\ufffd", "日本語", "🙂", "\\", "'", '"',
]  # fmt: skip

nasty_text = st.lists(
    st.one_of(st.sampled_from(NASTY_PIECES), st.text(max_size=12)), max_size=12
).map("".join)
