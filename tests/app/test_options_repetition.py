"""Base-model chat and repetition control through the one builder (app/options.py) and the one
rule table (app/rules.py): chat_format, DRY and the loop detector reach every caller the same
way, from flags, EMBER_<FIELD> variables and the settings file, with one-line errors."""

from __future__ import annotations

import pytest

from ember.app.cli import build_parser
from ember.app.config import Settings, load_settings, save_settings
from ember.app.errors import ConfigError
from ember.app.options import EngineFlags, engine_options, sampling_params
from ember.paths import get_paths


def test_chat_format_from_flag_env_and_file_reaches_every_caller() -> None:
    from ember.app.commands import serve
    from ember.tui.chat.config import engine_options as tui_options

    save_settings(Settings(chat_format="template"))
    parser = build_parser()
    settings = load_settings(env={})
    assert tui_options("m", settings).chat_format == "template"
    serve_args = parser.parse_args(["serve", "--chat-format", "scaffold"])
    assert serve.model_options(serve_args, settings)("m").chat_format == "scaffold"
    run_args = parser.parse_args(["run", "m", "hi", "--chat-format", "auto"])
    assert engine_options("m", settings, EngineFlags.from_args(run_args)).chat_format == "auto"
    from_env = load_settings(env={"EMBER_CHAT_FORMAT": "scaffold"})
    assert engine_options("m", from_env, EngineFlags()).chat_format == "scaffold"


def test_chat_format_rules() -> None:
    with pytest.raises(ConfigError, match=r"^EMBER_CHAT_FORMAT: setting chat_format='jinja': "):
        load_settings(env={"EMBER_CHAT_FORMAT": "jinja"})
    with pytest.raises(ConfigError, match=r"^--chat-format jinja: must be one of auto, templ"):
        engine_options("m", Settings(), EngineFlags(chat_format="jinja"))
    with pytest.raises(SystemExit):  # argparse's choices, before any of ours
        build_parser().parse_args(["run", "m", "hi", "--chat-format", "jinja"])


def test_repetition_defaults_come_from_the_settings_and_flags_win() -> None:
    params = sampling_params(Settings(), {})
    got = (params.dry_multiplier, params.dry_base, params.dry_allowed_length)
    assert got == (0.0, 1.75, 2)  # DRY off by default (benchmarks/bench_dry_default.py)
    assert (params.dry_penalty_last_n, params.loop_min_tokens) == (-1, 64)
    assert params.dry_sequence_breakers == ("\n", ":", '"', "*")
    args = build_parser().parse_args(
        ["run", "m", "hi", "--dry-multiplier", "0.8", "--dry-sequence-breakers", '["\\n"]']
    )
    flags = {name: getattr(args, name) for name in ("dry_multiplier", "dry_sequence_breakers")}
    params = sampling_params(Settings(dry_base=2.0, loop_min_tokens=0), flags)
    assert (params.dry_multiplier, params.dry_base, params.loop_min_tokens) == (0.8, 2.0, 0)
    assert params.dry_sequence_breakers == ("\n",)


def test_the_tui_gets_the_repetition_settings_under_its_per_chat_sampling() -> None:
    from ember.tui.chat.config import new_chat_settings
    from ember.tui.chat.config import sampling_params as chat_sampling

    settings = load_settings(env={"EMBER_DRY_MULTIPLIER": "0.5", "EMBER_LOOP_MIN_TOKENS": "0"})
    chat = {**new_chat_settings(settings), "temperature": 0.2, "seed": 3}
    params = chat_sampling(chat, settings)
    assert (params.temperature, params.seed) == (0.2, 3)
    assert (params.dry_multiplier, params.loop_min_tokens) == (0.5, 0)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dry_multiplier": -1.0}, "--dry-multiplier -1.0: must be between 0 (off) and 100"),
        ({"dry_base": 0.5}, "--dry-base 0.5: must be between 1 and 100"),
        ({"dry_allowed_length": 0}, "--dry-allowed-length 0: must be between 1 and"),
        ({"dry_penalty_last_n": -2}, "--dry-penalty-last-n -2: must be -1 (all), 0 (off)"),
        ({"loop_min_tokens": -1}, "--loop-min-tokens -1: must be >= 0 tokens"),
        ({"dry_sequence_breakers": "[\\n]"}, "--dry-sequence-breakers [\\n]: must be a JSON"),
        ({"dry_sequence_breakers": '[""]'}, '--dry-sequence-breakers [""]: must be a JSON'),
        ({"dry_sequence_breakers": '"x"'}, '--dry-sequence-breakers "x": must be a JSON list'),
    ],
)
def test_bad_repetition_flags_are_one_line_errors_naming_the_flag(
    flags: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        sampling_params(Settings(), flags)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_bad_repetition_settings_name_the_setting_and_its_source() -> None:
    paths = get_paths()
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text("dry_sequence_breakers = '[1, 2]'\n")
    with pytest.raises(ConfigError, match=r"config\.toml: setting dry_sequence_breakers='\[1, 2"):
        load_settings(env={})
    paths.config_file.unlink()
    with pytest.raises(ConfigError, match=r"^EMBER_DRY_BASE: setting dry_base=0\.9: must be "):
        load_settings(env={"EMBER_DRY_BASE": "0.9"})
    with pytest.raises(ConfigError, match=r"^setting dry_multiplier=200\.0: must be between"):
        Settings(dry_multiplier=200.0)


def test_the_default_breakers_are_the_engines() -> None:
    import json

    from ember.app.rules import DEFAULT_DRY_BREAKERS
    from ember.engine.api import DRY_BREAKERS

    assert tuple(json.loads(DEFAULT_DRY_BREAKERS)) == DRY_BREAKERS
