"""llama-server's utility routes against a real `ember serve --metrics` on the starter model:
the tokenizer's ids (checked against llama.cpp's vocabulary directly), the rendered prompt,
FIM refused on a model without FIM tokens, and the Prometheus counters after a request."""

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


@pytest.fixture(scope="module")
def url(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    env = {**os.environ, "EMBER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    ember = [sys.executable, "-m", "ember"]
    subprocess.run([*ember, "add", str(starter_gguf), "--name", MODEL], env=env, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    serve = ("--model", MODEL, "--threads", "2", "--ctx", "1024", "--metrics")
    with ember_serve(home, env, *serve) as base:
        yield base


def _post(url: str, route: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{route}", json=body, timeout=300)


def test_tokenize_detokenize(url: str, starter_gguf: Path) -> None:
    from ember.models.text.tokenizers.llamacpp import LlamaCppTokenizer

    vocab = LlamaCppTokenizer(starter_gguf)
    text = "Hello world <start_of_turn>"
    tokens = _post(url, "/tokenize", {"content": text}).json()["tokens"]
    assert tokens == vocab.encode(text, parse_special=True)
    plain = _post(url, "/tokenize", {"content": text, "parse_special": False}).json()["tokens"]
    assert plain == vocab.encode(text) and len(plain) > len(tokens)
    with_bos = _post(url, "/tokenize", {"content": text, "add_special": True}).json()["tokens"]
    assert with_bos == [vocab.bos_id, *tokens]
    pieces = _post(url, "/tokenize", {"content": "héllo", "with_pieces": True}).json()["tokens"]
    assert "".join(p["piece"] for p in pieces) == "héllo"
    assert [p["id"] for p in pieces] == vocab.encode("héllo")
    assert _post(url, "/detokenize", {"tokens": tokens}).json()["content"] == text
    too_big = _post(url, "/detokenize", {"tokens": [vocab.vocab_size]})
    assert too_big.status_code == 400 and too_big.json()["error"]["param"] == "tokens[0]"


def test_apply_template(url: str) -> None:
    messages = [{"role": "user", "content": "What is 2+2?"}]
    prompt = _post(url, "/apply-template", {"messages": messages}).json()["prompt"]
    assert "What is 2+2?" in prompt
    count = len(_post(url, "/tokenize", {"content": prompt}).json()["tokens"])
    reply = _post(url, "/v1/chat/completions", {"messages": messages, "max_tokens": 1}).json()
    assert reply["usage"]["prompt_tokens"] == count  # the prompt the chat route reads


def test_infill_and_suffix_refused_without_fim_tokens(url: str) -> None:
    infill = _post(url, "/infill", {"input_prefix": "def f(", "input_suffix": "):"})
    assert infill.status_code == 400 and "fill-in-the-middle" in infill.json()["error"]["message"]
    body = {"model": MODEL, "prompt": "def f(", "suffix": "):", "stream": False}
    generate = _post(url, "/api/generate", body)
    assert generate.status_code == 400 and "fill-in-the-middle" in generate.json()["error"]


def test_metrics(url: str) -> None:
    body = {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    assert _post(url, "/v1/completions", body).status_code == 200
    text = httpx.get(f"{url}/metrics", timeout=60).text
    values = {k: float(v) for k, v in (ln.split(" ") for ln in text.splitlines() if ln[:1] != "#")}
    assert values["llamacpp:tokens_predicted_total"] >= 5
    assert values["llamacpp:predicted_tokens_seconds"] > 0
    assert 0 <= values["llamacpp:kv_cache_usage_ratio"] <= 1
    assert values["llamacpp:requests_processing"] == 0
