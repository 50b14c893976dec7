"""tokenizer_config.json and chat_template.jinja, read once and typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.models.errors import ModelFileError
from ember.models.files.tokenizer_config import TokenizerConfig, read_tokenizer_config


def _folder(tmp_path: Path, config: object, jinja: bytes | None = None) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    if jinja is not None:
        (folder / "chat_template.jinja").write_bytes(jinja)
    return folder


def test_tokens_as_strings_or_added_token_objects(tmp_path: Path) -> None:
    config = {
        "bos_token": {"content": "<s>", "lstrip": False, "__type": "AddedToken"},
        "eos_token": "</s>",
        "add_bos_token": True,
        "chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ],
    }
    assert read_tokenizer_config(_folder(tmp_path, config)) == TokenizerConfig(
        "<s>", "</s>", True, None, "D", "tokenizer_config.json"
    )


def test_template_file_wins_and_blank_templates_count_as_none(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"chat_template": "from config"}, jinja="{{ x }} é".encode())
    read = read_tokenizer_config(folder)
    assert (read.chat_template, read.chat_template_source) == ("{{ x }} é", "chat_template.jinja")
    (folder / "chat_template.jinja").write_text("  \n")
    assert read_tokenizer_config(folder).chat_template is None
    assert read_tokenizer_config(tmp_path).chat_template_source is None  # no files at all


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ([], "m/tokenizer_config.json: must be a JSON object, got []"),
        ({"bos_token": 5}, "bos_token: must be a string or an object with content, got 5"),
        ({"eos_token": {"content": ["x"]}}, "eos_token.content: must be a string, got ['x']"),
        ({"add_bos_token": "yes"}, "add_bos_token: must be true or false, got 'yes'"),
        ({"chat_template": 3}, "chat_template: must be a list, got 3"),
        ({"chat_template": ["x"]}, "chat_template[0]: must be an object, got 'x'"),
        ({"chat_template": [{"name": "default"}]}, "chat_template[0].template: missing"),
    ],
)
def test_wrong_types_name_the_field(tmp_path: Path, config: object, fragment: str) -> None:
    with pytest.raises(ModelFileError) as info:
        read_tokenizer_config(_folder(tmp_path, config))
    assert fragment in str(info.value) and str(info.value).startswith("m/tokenizer_config.json: ")
