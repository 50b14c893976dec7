from __future__ import annotations

from pathlib import Path

import pytest

from ember.app.config import Settings, load_settings, save_settings
from ember.app.errors import ConfigError
from ember.paths import get_paths


def test_ember_home_moves_every_path(ember_home: Path) -> None:
    paths = get_paths()
    for p in (paths.config_dir, paths.data_dir, paths.cache_dir):
        assert p.is_relative_to(ember_home)


def test_missing_file_gives_defaults() -> None:
    assert load_settings(env={}) == Settings()


def test_save_then_load_roundtrip() -> None:
    s = Settings(model="my-model", threads=1, prefix_cache=False, system_prompt='say "hi"\nplease')
    save_settings(s)
    assert load_settings(env={}) == s


def test_env_overrides_file() -> None:
    save_settings(Settings(ctx=2048))  # (threads are bounded by the machine: ctx works anywhere)
    assert load_settings(env={"EMBER_CTX": "1024"}).ctx == 1024


def test_bad_value_names_field_and_file() -> None:
    paths = get_paths()
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text("top_p = 2.0\n")
    with pytest.raises(ConfigError, match=r"config.toml.*top_p"):
        load_settings(env={})


def test_bad_env_value_names_variable() -> None:
    with pytest.raises(ConfigError, match="EMBER_THREADS"):
        load_settings(env={"EMBER_THREADS": "many"})


def test_invalid_toml_is_one_line_error() -> None:
    paths = get_paths()
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text("threads = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(env={})
