"""Chat turns past the context through a real `ember serve` (issue 25: a second turn past the
context answered 500 "llama_decode failed (invalid batch)"). The official `openai` SDK sends turn
one, whose prompt plus reply overflow --ctx 128, then turn two and three with the whole history: each is
answered under the sink-window policy, never an error."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.server.server_harness import ember_serve

pytestmark = pytest.mark.model
openai = pytest.importorskip("openai")

MODEL = "gemma3"
CTX = 128


@pytest.fixture(scope="module")
def server(starter_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_home")
    env = {**os.environ, "EMBER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    ember = [sys.executable, "-m", "ember"]
    subprocess.run([*ember, "add", str(starter_gguf), "--name", MODEL], env=env, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    with ember_serve(home, env, "--model", MODEL, "--threads", "2", "--ctx", str(CTX)) as url:
        yield url


def test_turns_past_the_context_keep_answering(server: str) -> None:
    client: Any = openai.OpenAI(base_url=f"{server}/v1", api_key="none", max_retries=0)
    messages: list[dict[str, str]] = []
    asks = ["Tell me a long story about a lighthouse keeper.", "Go on, what happened next?",
            "And how did it end?"]  # fmt: skip
    for turn, ask in enumerate(asks):
        messages.append({"role": "user", "content": ask})
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=CTX, temperature=0, seed=turn
        )
        choice = reply.choices[0]
        assert choice.finish_reason in ("length", "stop"), turn
        assert choice.message.content, turn
        messages.append({"role": "assistant", "content": choice.message.content})
    assert reply.usage.prompt_tokens > CTX  # the last turn's history alone is past the context
