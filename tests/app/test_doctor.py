"""`ember doctor`: every section present, JSON and text, failures reported not raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.app.cli import main
from ember.app.commands import doctor


def test_json_report_has_every_section(
    ember_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == set(doctor.PROBES)
    assert report["ember"]["data_dir"].startswith(str(ember_home))
    assert report["ember"]["config_file_exists"] is False
    assert report["memory"]["ram_total_bytes"] > 0 and report["memory"]["disk_free_bytes"] > 0
    assert report["cpu"]["logical_cores"] >= 1
    llama = report["llama_cpp"]
    assert llama["mmap"] is True and isinstance(llama["gpu_offload"], bool)
    assert "backends" in llama["features"]
    amx = llama["features"].get("AMX_INT8") == "1"  # this build's own system info
    assert llama["extra_weight_buffers"] == ("off (AMX build)" if amx else "on")
    assert report["torch"]["cuda_available"] in (True, False)


def test_text_report_and_a_broken_probe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> dict[str, object]:
        raise RuntimeError("no such library")

    monkeypatch.setitem(doctor.PROBES, "torch", broken)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch:\n  error: RuntimeError: no such library" in out
    assert "llama_cpp:" in out and "ram_total_bytes:" in out and " GB" in out


def test_bad_settings_are_reported(ember_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ember_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('runner = "warp"\n')
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["ember"]
    assert report["config_file_exists"] is True and "runner" in report["settings_error"]


def test_parse_system_info() -> None:
    text = "CPU : SSE3 = 1 | AVX2 = 1 | LLAMAFILE = 1 | CUDA : ARCHS = 890 | USE_GRAPHS = 1 |"
    features = doctor.parse_system_info(text)
    assert features["backends"] == "CPU,CUDA"
    assert features["AVX2"] == "1" and features["ARCHS"] == "890"


def test_auto_says_what_it_picks_and_why(
    ember_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMBER_RUNNER_CHOICE")  # this home's cache: nothing measured yet
    assert main(["doctor", "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)["auto"]
    assert auto["threads"] >= 1 and auto["threads_why"].startswith(f"auto: {auto['threads']} = ")
    assert "CPUs in affinity" in auto["threads_why"] and "other programs busy" in auto["threads_why"]
    assert auto["default_model"] == "gemma3-270m" and auto["runner"] == "not measured yet"
    assert auto["runner_why"].startswith("the first load of gemma3-270m times llama.cpp and torch")
    assert auto["native_isa"] == auto["native_isas_here"][0]
    monkeypatch.setenv("EMBER_ISA", "sse9")
    assert main(["doctor", "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)["auto"]
    assert auto["native_isa_error"].startswith("EMBER_ISA=sse9: choose one of auto, avx512")


def test_auto_shows_the_measured_choice_of_the_default_model(
    ember_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the first load measured (runner_choice.py's cache) is what doctor reports."""
    monkeypatch.delenv("EMBER_RUNNER_CHOICE")
    from ember.app.loading import resolve_files
    from ember.app.options import engine_options
    from ember.engine.runners.runner_choice import (
        ChoiceCache,
        RunnerChoice,
        cache_key,
        versions,
    )

    options = engine_options("gemma3-270m")
    assert options.runner_choice_dir == str(ember_home / "cache")
    model = resolve_files("gemma3-270m")
    measured = RunnerChoice(
        "torch",
        "torch: measured faster here, decode 31.0 vs llama.cpp 27.5 tok/s",
        {"llama.cpp": 27.5, "torch": 31.04},
        1.13,
        3,
        2.5,
        versions(),
        1.8e9,
    )
    ChoiceCache(options.runner_choice_dir).put(cache_key(options, model), measured)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "  runner: torch\n  runner_why: torch: measured faster here, decode 31.0 vs" in out
    assert "  decode_tok_s: llama.cpp=27.5, torch=31.0\n" in out
    assert "choosing took 2.5 s" in out
    assert f"runner_choice_cache: {ember_home / 'cache' / 'runner-choice.json'}" in out


def test_runner_choice_cache_moves_or_turns_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from ember.app.options import engine_options

    monkeypatch.setenv("EMBER_RUNNER_CHOICE", "/somewhere/else")
    assert engine_options("m").runner_choice_dir == "/somewhere/else"
    monkeypatch.setenv("EMBER_RUNNER_CHOICE", "off")
    assert engine_options("m").runner_choice_dir == ""
