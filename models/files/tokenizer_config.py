"""What a Hugging Face folder's tokenizer_config.json and chat_template.jinja say, typed.

Public API:
    TokenizerConfig                 bos_token, eos_token, add_bos_token, add_eos_token,
                                    chat_template, chat_template_source
    read_tokenizer_config(folder)   -> TokenizerConfig; ModelFileError naming the file and field

Special tokens are spelled as a string or as an AddedToken object {"content": ..., ...}. The
chat template is chat_template.jinja when the folder has one (transformers 4.43+ writes it
there), else tokenizer_config.json's chat_template: a string, or a list of {"name", "template"}
of which "default" is the chat template. A template file that is not UTF-8 is refused, not
guessed at: a template decoded with replacement characters would render something else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.models.errors import ModelFileError
from ember.models.files.fields import Fields, describe, read_json_file, read_text_file

TEMPLATE_FILE = "chat_template.jinja"
CONFIG_FILE = "tokenizer_config.json"
MAX_TEMPLATE_BYTES = 1 << 20  # the largest released templates are ~20 kB


@dataclass(frozen=True)
class TokenizerConfig:
    """The tokenizer settings a chat needs, each validated."""

    bos_token: str | None = None
    eos_token: str | None = None
    add_bos_token: bool | None = None
    add_eos_token: bool | None = None
    chat_template: str | None = None
    chat_template_source: str | None = None  # TEMPLATE_FILE | CONFIG_FILE | None


def _token(f: Fields, key: str) -> str | None:
    """A special token's text: a string, or an AddedToken object's content."""
    value = f.raw(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        token = f.object(key)
        return token.string("content") if token is not None else None
    raise f.error(key, f"must be a string or an object with content, got {describe(value)}")


def _config_template(f: Fields) -> str | None:
    value = f.raw("chat_template")
    if value is None or isinstance(value, str):
        return value or None
    templates = f.array("chat_template")  # raises for anything but a list
    named: dict[str, str] = {}
    for i, item in enumerate(templates or []):
        if not isinstance(item, dict):
            raise f.error(f"chat_template[{i}]", f"must be an object, got {describe(item)}")
        entry = Fields(item, f.source, f"chat_template[{i}].")
        named[entry.string("name")] = entry.string("template")
    return named.get("default") or None


def read_tokenizer_config(folder: Path) -> TokenizerConfig:
    """folder's tokenizer_config.json ({} when absent) and chat template, validated."""
    path = folder / CONFIG_FILE
    data: Any = {}
    label = f"{folder.name}/{CONFIG_FILE}"
    if path.is_file():
        data = read_json_file(path, label)
        if not isinstance(data, dict):
            raise ModelFileError(f"{label}: must be a JSON object, got {describe(data)}")
    f = Fields(data, label)
    template: str | None = _config_template(f)
    source: str | None = CONFIG_FILE
    jinja = folder / TEMPLATE_FILE
    if jinja.is_file():
        text = read_text_file(jinja, f"{folder.name}/{TEMPLATE_FILE}", MAX_TEMPLATE_BYTES)
        template, source = text, TEMPLATE_FILE
    if template is None or not template.strip():
        template, source = None, None
    return TokenizerConfig(
        bos_token=_token(f, "bos_token"),
        eos_token=_token(f, "eos_token"),
        add_bos_token=f.opt_boolean("add_bos_token"),
        add_eos_token=f.opt_boolean("add_eos_token"),
        chat_template=template,
        chat_template_source=source,
    )
