from __future__ import annotations

import subprocess
import sys

import pytest

from ember.app.server.security import Guard, is_loopback, require_key_for


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_names(host: str) -> None:
    assert is_loopback(host)


def test_non_loopback_bind_needs_key() -> None:
    assert require_key_for("0.0.0.0", "") is not None
    assert require_key_for("0.0.0.0", "k") is None
    assert require_key_for("127.0.0.1", "") is None


@pytest.mark.parametrize(
    ("bind", "allowed", "host", "ok"),
    [
        ("127.0.0.1", (), "127.0.0.1:8080", True),
        ("127.0.0.1", (), "localhost", True),
        ("127.0.0.1", (), "[::1]:8080", True),
        ("127.0.0.1", (), "attacker.example:8080", False),
        ("192.168.1.5", (), "192.168.1.5:8080", True),
        ("0.0.0.0", (), "box.lan:8080", True),
        ("0.0.0.0", ("box.lan",), "other.lan", False),
        ("0.0.0.0", ("box.lan",), "box.lan:8080", True),
    ],
)
def test_host_header_rules(bind: str, allowed: tuple[str, ...], host: str, ok: bool) -> None:
    assert Guard(bind_host=bind, allowed_hosts=frozenset(allowed)).host_allowed(host) is ok


def test_origin_rules() -> None:
    guard = Guard(bind_host="127.0.0.1")
    assert guard.origin_allowed(None)
    assert guard.origin_allowed("http://localhost:3000")
    assert not guard.origin_allowed("https://evil.example")
    assert not guard.origin_allowed("null")


def test_key_compare() -> None:
    guard = Guard(bind_host="127.0.0.1", api_key="abc")
    assert guard.key_ok("Bearer abc")
    assert not guard.key_ok("Bearer abd")
    assert not guard.key_ok(None)
    assert not guard.key_ok("abc")


def test_serve_refuses_public_bind_without_key() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ember", "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "EMBER_HOME": "/tmp/x"},
    )
    assert out.returncode == 1
    assert "without an API key" in out.stderr and len(out.stderr.strip().splitlines()) == 1
