"""Model output as literal text: control characters (ANSI escapes included) made visible."""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and C1 controls: a terminal would act on these.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # Unicode control pictures: ESC -> U+241B
    return "\u2421" if code == 0x7F else f"\\x{code:02x}"


def visible(text: str) -> str:
    """Replace characters a terminal would interpret with visible stand-ins (\r\n kept as \n)."""
    return _CONTROL.sub(_picture, text.replace("\r\n", "\n"))
