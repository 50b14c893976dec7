"""--kv-cache and --ctx auto: flag, settings file and EMBER_<KEY> reach EngineOptions through the
one builder (app/options.py) under one rule (app/rules.py); each runner maps the type."""

from __future__ import annotations

import pytest

from ember.app.cli import build_parser
from ember.app.config import Settings, load_settings, save_settings
from ember.app.errors import ConfigError
from ember.app.options import EngineFlags, engine_options
from ember.engine.api import AUTO_CTX
from ember.engine.errors import EngineError
from ember.paths import get_paths


def _flags(command: str, *argv: str) -> EngineFlags:
    args = ["run", "m", "hi"] if command == "run" else [command]
    return EngineFlags.from_args(build_parser().parse_args([*args, *argv]))


@pytest.mark.parametrize("command", ["run", "serve"])
def test_the_flag_reaches_the_options(command: str) -> None:
    flags = _flags(command, "--kv-cache", "q4", "--ctx", "auto")
    options = engine_options("m", Settings(), flags)
    assert (options.kv_cache, options.ctx) == ("q4", AUTO_CTX)


def test_flag_over_env_over_file_over_default() -> None:
    assert engine_options("m", Settings()).kv_cache == "f16"
    save_settings(Settings(kv_cache="q4"))
    assert engine_options("m", load_settings(env={})).kv_cache == "q4"
    env = {"EMBER_KV_CACHE": "q8"}
    assert engine_options("m", load_settings(env=env)).kv_cache == "q8"
    flags = _flags("run", "--kv-cache", "f16")
    assert engine_options("m", load_settings(env=env), flags).kv_cache == "f16"


def test_ctx_auto_from_the_file_and_the_environment() -> None:
    cfg = get_paths().config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('ctx = "auto"\nkv_cache = "q8"\n')
    settings = load_settings(env={})
    assert (settings.ctx, settings.kv_cache) == (AUTO_CTX, "q8")
    assert load_settings(env={"EMBER_CTX": "AUTO"}).ctx == AUTO_CTX
    assert load_settings(env={"EMBER_CTX": "8192"}).ctx == 8192
    save_settings(settings)  # written back readable, and read back the same
    assert 'ctx = "auto"' in cfg.read_text() and load_settings(env={}).ctx == AUTO_CTX


def test_a_bad_flag_is_one_line_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"^--kv-cache q5: must be one of f16, q8, q4$"):
        engine_options("m", Settings(), _flags("run", "--kv-cache", "q5"))
    with pytest.raises(SystemExit):  # argparse: "argument --ctx: 'lots' is not auto or ..."
        build_parser().parse_args(["run", "m", "hi", "--ctx", "lots"])


def test_a_bad_setting_names_the_file_or_variable() -> None:
    cfg = get_paths().config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('kv_cache = "int4"\n')
    with pytest.raises(ConfigError, match=r"config.toml: setting kv_cache='int4': must be one"):
        load_settings(env={})
    cfg.unlink()
    with pytest.raises(ConfigError, match=r"^EMBER_KV_CACHE: setting kv_cache='fp8'"):
        load_settings(env={"EMBER_KV_CACHE": "fp8"})
    with pytest.raises(ConfigError, match=r"^EMBER_CTX: setting ctx='big' is not a valid int"):
        load_settings(env={"EMBER_CTX": "big"})


def test_the_chat_command_checks_its_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from ember.__main__ import build_parser as full_parser
    from ember.tui import command as chat

    args = full_parser().parse_args(["chat", "--kv-cache", "q2"])
    with pytest.raises(ConfigError, match=r"^--kv-cache q2: must be one of f16, q8, q4$"):
        chat.run(args)
    args = full_parser().parse_args(["chat", "--ctx", "auto", "--kv-cache", "q8"])
    assert (args.ctx, args.kv_cache) == (AUTO_CTX, "q8")


def test_the_torch_runner_maps_q8_to_int8_pools_and_refuses_q4() -> None:
    from ember.engine.api import EngineOptions
    from ember.engine.runners.torch.runner import _torch_options

    assert _torch_options(EngineOptions(model="m", kv_cache="q8")).kv_dtype == "int8"
    assert _torch_options(EngineOptions(model="m", kv_cache="f16")).kv_dtype == "auto"
    with pytest.raises(EngineError, match=r"^--kv-cache q4: the torch runner") as info:
        _torch_options(EngineOptions(model="m", kv_cache="q4"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("cache", "kv_type"), [("f16", "f16"), ("q8", "q8_0"), ("q4", "q4_0")])
def test_the_llamacpp_runner_maps_each_type(cache: str, kv_type: str) -> None:
    pytest.importorskip("llama_cpp")
    from ember.engine.api import EngineOptions
    from ember.engine.runners.llamacpp.runner import LlamaCppConfig

    options = EngineOptions(model="m", device="cpu", kv_cache=cache)
    assert LlamaCppConfig.from_options(options).kv_type == kv_type


def test_engine_options_refuse_an_unknown_type() -> None:
    from ember.engine.api import EngineOptions

    with pytest.raises(EngineError, match="kv_cache='q2'"):
        EngineOptions(model="m", kv_cache="q2")
