"""What llama-server's and OpenAI's own tests expect, against a real `ember serve --api-key` on
the starter model: OpenAI's error object with 400 on every OpenAI route, CORS preflights that
need no key, a history whose tool-call arguments are not JSON refused by name."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.app.server.server_harness import ember_serve

pytestmark = pytest.mark.model
MODEL = "gemma3"
KEY = "sekrit"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def url(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    env = {**os.environ, "EMBER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    ember = [sys.executable, "-m", "ember"]
    subprocess.run([*ember, "add", str(starter_gguf), "--name", MODEL], env=env, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    serve = ("--model", MODEL, "--threads", "2", "--ctx", "1024", "--api-key", KEY)
    with ember_serve(home, env, *serve) as base:
        yield base


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "echo": 1}, "echo"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "top_p": 7}, "top_p"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": "many"}, "max_tokens"),
        ("/v1/embeddings", {"input": "hi", "user_id": 3}, "user_id"),
        ("/v1/responses", {"input": "hi", "temperature": -1}, "temperature"),
    ],
)  # fmt: skip
def test_invalid_request_is_400_with_openai_error(
    url: str, route: str, body: dict, param: str
) -> None:
    reply = httpx.post(f"{url}{route}", json={"model": MODEL, **body}, headers=AUTH, timeout=300)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["message"] and error["code"] == 400


def test_bad_tool_call_arguments_in_history(url: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    reply = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL, "messages": messages},
                       headers=AUTH, timeout=300)  # fmt: skip
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "messages[1].tool_calls[0].function.arguments"


def test_cors_preflight_needs_no_key(url: str) -> None:
    origin = "http://localhost:3000"
    ask = {"Origin": origin, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip
    pre = httpx.options(f"{url}/v1/chat/completions", headers=ask, timeout=60)
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == origin
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert "authorization" in pre.headers["access-control-allow-headers"]
    without = httpx.get(f"{url}/v1/models", headers={"Origin": origin}, timeout=60)
    assert without.status_code == 401  # the request itself still needs the key
    models = httpx.get(f"{url}/v1/models", headers={"Origin": origin, **AUTH}, timeout=60)
    assert models.status_code == 200 and models.headers["access-control-allow-origin"] == origin
    evil = httpx.options(f"{url}/v1/models", headers=ask | {"Origin": "https://evil.example"})
    assert evil.status_code == 403 and "access-control-allow-origin" not in evil.headers
