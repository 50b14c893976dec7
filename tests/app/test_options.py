"""app/options.py: the one EngineOptions builder (settings file + environment + flags) and the
one set of value rules for flags and settings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from ember.app.cli import build_parser
from ember.app.config import Settings, load_settings, save_settings
from ember.app.errors import ConfigError
from ember.app.options import EngineFlags, engine_options, sampling_params
from ember.paths import get_paths


def _flags(*argv: str) -> EngineFlags:
    return EngineFlags.from_args(build_parser().parse_args(["run", "m", "hi", *argv]))


def test_flags_over_env_over_file_over_defaults() -> None:
    save_settings(Settings(ctx=2048, sink=8, threads=1))
    env = {"EMBER_CTX": "1024", "EMBER_PACKED_CACHE": "off"}
    options = engine_options("m", load_settings(env=env), _flags("--sink", "2"), env=env)
    assert (options.ctx, options.sink, options.threads, options.window) == (1024, 2, 1, -1)
    assert options.draft == "auto" and options.prefix_cache


def test_settings_file_values_reach_every_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """sink, window, prefix cache and draft from the settings file: the TUI, `ember run`,
    `ember serve` and `ember eval` all get them (serve used to ignore them)."""
    from ember.app.commands import serve
    from ember.tui.chat.config import engine_options as tui_options

    save_settings(Settings(sink=8, window=256, prefix_cache=False, draft="auto", threads=1))
    settings = load_settings()
    parser = build_parser()
    built = {
        "tui": tui_options("m", settings),
        "run": engine_options("m", settings, _flags()),
        "serve": serve.model_options(parser.parse_args(["serve"]), settings)("m"),
        "eval": engine_options("m", flags=EngineFlags(ctx=512)),
    }
    for caller, options in built.items():
        got = (options.sink, options.window, options.prefix_cache, options.draft, options.threads)
        assert got == (8, 256, False, "auto", 1), caller


def test_draft_auto_reaches_the_engine_as_auto_everywhere() -> None:
    """auto is resolved by the engine once the runner is known (lookup on torch, none on
    llama.cpp: engine/speculative/verify.py); no caller turns it into none on its own."""
    from ember.engine.runners.fake import FakeRunner
    from ember.engine.speculative.choice import create_proposer
    from ember.engine.speculative.lookup import PromptLookupProposer
    from ember.tui.chat.config import engine_options as tui_options

    tui = tui_options("m", Settings())
    cli = engine_options("m", Settings(), _flags())
    assert tui.draft == cli.draft == "auto"
    assert isinstance(create_proposer(tui, FakeRunner()), PromptLookupProposer)  # torch-like
    assert engine_options("m", Settings(), _flags("--draft", "none")).draft == "none"


def test_paths_come_from_ember_paths(tmp_path: Path) -> None:
    paths = get_paths()
    options = engine_options("m", Settings(), env={})
    assert options.prefix_cache_dir == str(paths.prefix_cache_dir)
    assert options.packed_cache_dir == str(paths.cache_dir / "packed")
    moved = engine_options("m", Settings(), env={"EMBER_PACKED_CACHE": str(tmp_path)})
    assert moved.packed_cache_dir == str(tmp_path)
    assert engine_options("m", Settings(), env={"EMBER_PACKED_CACHE": "off"}).packed_cache_dir == ""


def test_remote_and_prefix_flags() -> None:
    options = engine_options("m", Settings(), _flags("--remote", "http://h:1/v1"))
    assert (options.runner, options.remote_url) == ("remote", "http://h:1/v1")
    assert not engine_options("m", Settings(), _flags("--no-prefix-cache")).prefix_cache
    assert engine_options("m", Settings(), _flags("--kv-budget", "1M")).kv_budget_bytes == 1 << 20


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--threads", "10000"], "--threads 10000: must be between 0 (auto: the cores free now) and"),
        (["--threads", "-1"], "--threads -1: must be between 0"),
        (["--ctx", "8"], "--ctx 8: must be auto or between 16"),
        (["--sink", "-2"], "--sink -2: must be between 0"),
        (["--window", "-5"], "--window -5: must be -1"),
        (["--kv-budget", "0"], "--kv-budget 0: must be a positive size"),
        (["--draft-tokens", "0"], "--draft-tokens 0: must be between 1 and 32"),
        (["--draft", " "], "--draft  : must be auto, none"),
        (["--runner", "vllm"], "--runner vllm: choose torch, llama.cpp, remote or auto"),
    ],
)
def test_bad_flags_are_one_line_errors_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        engine_options("m", Settings(), _flags(*argv))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_threads_are_bounded_by_this_machines_cpus() -> None:
    cores = os.cpu_count() or 1
    assert engine_options("m", Settings(), _flags("--threads", str(cores))).threads == cores
    with pytest.raises(ConfigError, match=f"--threads {cores + 1}: .* and {cores} "):
        engine_options("m", Settings(), _flags("--threads", str(cores + 1)))


def test_settings_break_the_same_rules_naming_the_setting_and_its_source() -> None:
    cores = os.cpu_count() or 1
    with pytest.raises(ConfigError, match=f"EMBER_THREADS: setting threads={cores + 1}: "):
        load_settings(env={"EMBER_THREADS": str(cores + 1)})
    paths = get_paths()
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text("draft_tokens = 99\n")
    with pytest.raises(ConfigError, match=r"config\.toml: setting draft_tokens=99: must be betw"):
        load_settings(env={})


def test_sampling_flags_and_seed_by_the_same_rules() -> None:
    settings = Settings(temperature=0.5)
    params = sampling_params(settings, {"top_k": 3}, seed=7)
    assert (params.temperature, params.top_k, params.seed) == (0.5, 3, 7)
    for flags, seed, message in (
        ({"temperature": 11.0}, None, "--temperature 11.0: must be between 0 and 10"),
        ({"top_p": 0.0}, None, "--top-p 0.0: must be in"),
        ({"max_tokens": 0}, None, "--max-tokens 0: must be between 1"),
        ({}, -1, "--seed -1: must be between 0 and"),
        ({}, 1 << 64, f"--seed {1 << 64}: must be between 0 and"),
    ):
        with pytest.raises(ConfigError, match=message):
            sampling_params(settings, flags, seed=seed)


def test_flags_a_command_lacks_count_as_not_given() -> None:
    flags = EngineFlags.from_args(argparse.Namespace(threads=2))
    assert flags == EngineFlags(threads=2)


def test_model_reference_must_not_be_empty() -> None:
    with pytest.raises(ConfigError, match="model: give"):
        engine_options(" ", Settings())
