"""The Ollama routes on the real engine (fake runner): NDJSON, options, format, keep_alive."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ember.app.server.errors import RequestInvalid
from ember.app.server.ollama_requests import keep_alive_s, sampling
from ember.app.server.pool import ModelPool
from ember.app.server.security import Guard
from ember.engine.api import EngineOptions
from ember.engine.load import load_engine
from ember.models.errors import RegistryError
from tests.app.scripted_backend import ScriptedBackend
from tests.app.server.server_harness import running_server
from tests.models.hub.hub_server import HubServer

pytest.importorskip("llguidance", reason="format needs llguidance")


def _load(name: str):
    if name in ("fake", "other"):
        return load_engine(EngineOptions(model="fake", runner="fake", prefix_disk_bytes=0))
    raise RegistryError(name)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ModelPool]]:
    pool = ModelPool(
        _load, lambda: ["fake", "other"], default_model="fake", max_loaded=2, max_tokens_cap=256
    )
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        yield url, pool


def _lines(reply: httpx.Response) -> list[dict[str, object]]:
    return [json.loads(line) for line in reply.text.splitlines() if line]


def test_version_tags_and_streamed_chat(server: tuple[str, ModelPool]) -> None:
    url, _ = server
    assert httpx.get(f"{url}/api/version", timeout=30).json()["version"]
    assert {m["name"] for m in httpx.get(f"{url}/api/tags", timeout=30).json()["models"]} == {
        "fake",
        "other",
    }
    body = {
        "model": "fake",
        "messages": [{"role": "user", "content": "hi"}],
        "options": {"num_predict": 5, "seed": 1, "temperature": 0},
    }
    lines = _lines(httpx.post(f"{url}/api/chat", json=body, timeout=60))
    assert lines[-1]["done"] is True and lines[-1]["eval_count"] == 5
    assert all(line["done"] is False for line in lines[:-1]) and len(lines) > 1


def test_generate_with_a_schema_format(server: tuple[str, ModelPool]) -> None:
    url, _ = server
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    body = {
        "model": "fake",
        "prompt": "ok?",
        "stream": False,
        "format": schema,
        "options": {"seed": 3},
    }
    reply = httpx.post(f"{url}/api/generate", json=body, timeout=60).json()
    assert isinstance(json.loads(reply["response"])["ok"], bool) and reply["done"]


def test_keep_alive_zero_unloads_and_ps_shows_loaded(server: tuple[str, ModelPool]) -> None:
    url, pool = server
    httpx.post(f"{url}/api/generate", json={"model": "other", "prompt": ""}, timeout=60)
    assert "other" in [m["name"] for m in httpx.get(f"{url}/api/ps", timeout=30).json()["models"]]
    done = httpx.post(
        f"{url}/api/generate", json={"model": "other", "prompt": "", "keep_alive": 0}, timeout=60
    ).json()
    assert done["done_reason"] == "unload" and "other" not in pool.loaded()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"options": {"frobnicate": 2}}, "options.frobnicate"),  # documented ones are logged
        ({"options": {"num_ctx": 100000}}, "options.num_ctx"),
        ({"format": "yaml"}, "format"),
        (
            {"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]},
            "messages[0].images",
        ),
        ({"suffix": "x"}, "suffix"),
    ],
)
def test_bad_fields_are_400_naming_them(
    server: tuple[str, ModelPool], body: dict[str, object], field: str
) -> None:
    url, _ = server
    full = {"model": "fake", "messages": [{"role": "user", "content": "x"}]} | body
    reply = httpx.post(f"{url}/api/chat", json=full, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"].startswith(field)


def test_option_and_duration_parsing() -> None:
    params = sampling({"num_predict": -1, "top_k": 20, "repeat_last_n": 32, "stop": ["\n"]}, 256)
    assert (params.max_tokens, params.top_k, params.penalty_last_n, params.stop) == (
        256,
        20,
        32,
        ("\n",),
    )
    assert keep_alive_s("5m") == 300 and keep_alive_s(0) == 0 and keep_alive_s("-1") == -1
    with pytest.raises(RequestInvalid):
        keep_alive_s("soon")


def test_pull_streams_status_then_delete(
    server: tuple[str, ModelPool], hub: HubServer, tmp_path: Path
) -> None:
    import ollama

    from ember.app.loading import open_registry
    from tests.fixtures.quick_gguf import write_tiny_gguf

    url, _ = server
    data = write_tiny_gguf(tmp_path / "tiny.gguf", n_vocab=64, seed=1).read_bytes()
    hub.add_repo("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": data})
    client = ollama.Client(host=url, timeout=60)
    statuses = [p.status for p in client.pull("org/tiny-GGUF", stream=True)]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    assert any(s and s.startswith("pulling tiny-Q4_K_M.gguf") for s in statuses)
    record = open_registry().find("org/tiny-GGUF:Q4_K_M")
    assert record is not None and record.path.read_bytes() == data
    failed = httpx.post(
        f"{url}/api/pull", json={"model": "org/missing", "stream": False}, timeout=60
    )
    assert failed.status_code == 400 and "missing" in failed.json()["error"]
    client.delete("org/tiny-GGUF:Q4_K_M")
    assert open_registry().find("org/tiny-GGUF:Q4_K_M") is None and not record.path.exists()
    gone = httpx.request(
        "DELETE", f"{url}/api/delete", json={"model": "org/tiny-GGUF:Q4_K_M"}, timeout=30
    )
    assert gone.status_code == 404


CALL_WORDS = ["Let me check.", "\n<tool", '_call>\n{"name": "get_', 'weather", "arguments": {"ci']
CALL_END = ['ty": "Par', 'is"}}\n</tool_', "call>"]
WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


def test_streamed_chat_sends_each_tool_call_whole() -> None:
    scripts = {"caller": CALL_WORDS + CALL_END, "cutter": CALL_WORDS}
    pool = ModelPool(
        lambda name: ScriptedBackend(name, scripts[name]), lambda: list(scripts), max_loaded=2
    )
    ask = {"messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL]}
    with running_server(pool, Guard(bind_host="127.0.0.1")) as url:
        lines = _messages(
            httpx.post(f"{url}/api/chat", json={"model": "caller", **ask}, timeout=60)
        )
        cut = _messages(httpx.post(f"{url}/api/chat", json={"model": "cutter", **ask}, timeout=60))
    calls = [c for m in lines for c in m.get("tool_calls", [])]
    assert calls == [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    assert "".join(m["content"] for m in lines).strip() == "Let me check."
    # the reply ended inside the arguments: no call to run, the text is given back
    assert not any(m.get("tool_calls") for m in cut)
    assert "".join(m["content"] for m in cut) == "".join(CALL_WORDS)


def _messages(reply: httpx.Response) -> list[Any]:
    return [line["message"] for line in _lines(reply)]
