"""What llama-server's, OpenAI's and Ollama's own tests expect, against a real `ember serve
--api-key` on the starter model: OpenAI's error object with 400 on every OpenAI route, CORS
preflights that need no key, a history whose tool-call arguments are not JSON refused by name;
Ollama's durations, load / unload, `name:latest`, details, `images: []` and its options."""

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
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve_home")


@pytest.fixture(scope="module")
def url(starter_gguf: Path, home: Path) -> Iterator[str]:
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


def _ollama(url: str, route: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{route}", json=body, headers=AUTH, timeout=300)


def test_ollama_unload_load_and_durations(url: str) -> None:
    gone = _ollama(url, "/api/generate", {"model": MODEL, "keep_alive": 0}).json()
    assert gone["done_reason"] == "unload"
    ask = {"model": f"{MODEL}:latest", "prompt": "Hi", "stream": False, "images": [],
           "options": {"num_predict": 4, "temperature": 0, "num_keep": 5, "num_thread": 2}}  # fmt: skip
    reply = _ollama(url, "/api/generate", ask)
    assert reply.status_code == 200, reply.text
    done = reply.json()
    assert done["model"] == MODEL  # name:latest is the name
    assert done["load_duration"] > 1e6  # this request loaded the model: > 1 ms
    assert done["prompt_eval_duration"] > 0 and done["eval_duration"] > 0
    parts = done["load_duration"] + done["prompt_eval_duration"] + done["eval_duration"]
    assert done["total_duration"] >= parts
    again = _ollama(url, "/api/generate", ask).json()
    assert again["load_duration"] < done["load_duration"]  # already loaded
    loaded = _ollama(url, "/api/generate", {"model": MODEL}).json()
    assert loaded["done_reason"] == "load"


def test_ollama_refusals(url: str, home: Path) -> None:
    no_model = _ollama(url, "/api/chat", {"messages": [{"role": "user", "content": "hi"}]})
    assert no_model.status_code == 400 and no_model.json()["error"].startswith("model")
    image = {"model": MODEL, "prompt": "What is this?", "images": ["aGk="]}
    refused = _ollama(url, "/api/generate", image)
    assert refused.status_code == 400 and "text only" in refused.json()["error"]
    assert "num_keep" in (home / "serve.log").read_text()  # a documented option: logged


def test_ollama_details(url: str) -> None:
    shown = _ollama(url, "/api/show", {"model": MODEL}).json()["details"]
    listed = httpx.get(f"{url}/api/tags", headers=AUTH, timeout=60).json()["models"]
    tags = next(m["details"] for m in listed if m["name"] == MODEL)
    for details in (shown, tags):
        assert details["family"] == "gemma3" and details["quantization_level"] == "Q4_K_M"
        assert details["parameter_size"] == "268M"


def _openai(url: str):  # the SDK's literal types would refuse the plain dicts below
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=300)


def test_n_choices_whole_and_streamed(url: str) -> None:
    client = _openai(url)
    ask = dict(model=MODEL, messages=[{"role": "user", "content": "Tell a story."}],
               max_tokens=4, temperature=1.0, seed=7, n=3)  # fmt: skip
    whole = client.chat.completions.create(**ask)
    assert [c.index for c in whole.choices] == [0, 1, 2]
    assert 3 <= whole.usage.completion_tokens <= 12  # each choice generated its own tokens
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    for chunk in client.chat.completions.create(**ask, stream=True):
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    assert sorted(finishes) == [0, 1, 2] and all(texts[i] for i in range(3))
    plain = client.completions.create(model=MODEL, prompt="Once", max_tokens=3, n=2, seed=1,
                                      temperature=1.0)  # fmt: skip
    assert [c.index for c in plain.choices] == [0, 1]


def _post_tokens(url: str, text: str) -> list[int]:
    """The ids a text prompt becomes (BOS included: token-id prompts are taken verbatim)."""
    body = {"content": text, "parse_special": False, "add_special": True}
    reply = httpx.post(f"{url}/tokenize", json=body, headers=AUTH, timeout=60)
    return list(reply.json()["tokens"])


def test_completion_prompt_forms(url: str) -> None:
    client = _openai(url)
    greedy = dict(model=MODEL, max_tokens=3, temperature=0)
    one = client.completions.create(prompt="Once upon a time", **greedy)
    ids = _post_tokens(url, "Once upon a time")
    by_ids = client.completions.create(prompt=ids, **greedy)
    assert by_ids.choices[0].text == one.choices[0].text
    two = client.completions.create(prompt=["Once upon a time", "The sky is"], **greedy)
    assert [c.index for c in two.choices] == [0, 1]
    assert two.choices[0].text == one.choices[0].text
    assert two.usage.prompt_tokens == one.usage.prompt_tokens + _prompt_tokens(url, "The sky is")
    lists = client.completions.create(prompt=[ids, _post_tokens(url, "The sky is")], **greedy)
    assert [c.text for c in lists.choices] == [c.text for c in two.choices]


def _prompt_tokens(url: str, prompt: str) -> int:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 1}
    reply = httpx.post(f"{url}/v1/completions", json=body, headers=AUTH, timeout=300)
    return int(reply.json()["usage"]["prompt_tokens"])
