"""Harmony replies of the tiny gpt-oss through the real engine: reasoning, answer and tool calls
come out apart.

The torch runner runs the tiny gpt-oss (random weights) for every token; a thin wrapper adds a
large logit to the token its script says comes next, so the model writes a harmony reply token
by token through the engine's own loop: its chat template (the tools rendered), scheduler,
sampling, the stop ids (<|return|>, <|call|>; <|end|> only closes the reasoning), detokenizer
and reasoning budget. The forced tool call needs no script: the grammar of tool_choice
"required" makes the random model write one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest

from ember.app.reply_splitter import ReplySplitter
from ember.engine.api import (
    ChatMessage,
    EngineOptions,
    Finished,
    GenerationRequest,
    SamplingParams,
    TextDelta,
    ToolSpec,
)
from ember.engine.engine import Engine
from ember.engine.options import ModelFiles
from ember.engine.runners.base import ForwardBatch, Runner
from ember.engine.runners.factory import load_parts
from ember.models.text.reasoning_markers import HARMONY

SCRIPT_LOGIT = 100.0  # the tiny model's logits span ~40: the script always wins, greedy or not
THOUGHT = "The user wants the capital of France. That is Paris, an easy one to answer."
ANSWER = "The capital of France is Paris."
ASK = (ChatMessage("system", "Answer briefly."), ChatMessage("user", "Capital of France?"))
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"]},
)


class ScriptedGptOss:
    """The tiny gpt-oss's forward, with the script's next token lifted far above the rest.

    script(reply_ids) -> the next token id (None: leave the model's logits alone). The reply
    is what the sequence holds past prompt_tokens, so forced tokens (a spent reasoning budget)
    are part of what the script reads."""

    def __init__(self, runner: Runner, script: Callable[[list[int]], int | None]) -> None:
        self.inner, self.script = runner, script
        self.prompt_tokens = 0
        self.fed: dict[int, list[int]] = {}

    @property
    def info(self) -> Any:
        return self.inner.info

    @property
    def tokenizer(self) -> Any:
        return self.inner.tokenizer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def forward(self, batch: ForwardBatch) -> list[np.ndarray]:
        rows = self.inner.forward(batch)
        out = []
        for step, logits in zip(batch.steps, rows, strict=True):
            fed = self.fed.setdefault(step.seq_id, [-1] * step.num_cached)
            fed += step.token_ids
            logits = np.array(logits, dtype=np.float32)
            assert logits.shape[0] == 1, "no drafts here: one row per step"
            if (
                len(fed) >= self.prompt_tokens
                and (nxt := self.script(fed[self.prompt_tokens :])) is not None
            ):
                logits[0, nxt] += SCRIPT_LOGIT
            out.append(logits)
        return out

    def release(self, seq_id: int) -> None:
        self.fed.pop(seq_id, None)
        self.inner.release(seq_id)


@pytest.fixture(scope="module")
def runners(tiny_gptoss: Any) -> Any:
    """(runner, chat renderer, options) per form, loaded once for the module."""
    loaded: dict[str, Any] = {}

    def load(form: str) -> Any:
        if form not in loaded:
            path = tiny_gptoss.gguf("Q8_0") if form == "gguf" else tiny_gptoss.hf_dir
            files = ModelFiles("tiny-gpt-oss", path, form, "0" * 64)  # type: ignore[arg-type]
            options = EngineOptions(
                model="tiny-gpt-oss", runner="torch", prefix_disk_bytes=0, ctx=1024
            )
            loaded[form] = (*load_parts(options, files)[:2], options)
        return loaded[form]

    yield load
    for runner, _, _ in loaded.values():
        runner.close()


@pytest.fixture
def loaded(runners: Any) -> Any:
    return runners("gguf")


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, parse_special=True))


def _answering(tokenizer: Any, main: str) -> Callable[[list[int]], int | None]:
    """Write `main` (ids), and once the reply holds a final-channel header, the ANSWER then
    <|return|>: so a reply whose reasoning the engine closed early still answers."""
    script, answer = _ids(tokenizer, main), _ids(tokenizer, ANSWER + "<|return|>")
    header = _ids(tokenizer, "<|channel|>final<|message|>")

    def next_token(reply: list[int]) -> int | None:
        for at in range(len(reply) - len(header), -1, -1):
            if reply[at : at + len(header)] == header:
                written = len(reply) - at - len(header)
                return answer[written] if written < len(answer) else None
        return script[len(reply)] if len(reply) < len(script) else None

    return next_token


def _generate(
    loaded: Any, request: GenerationRequest, script: Callable
) -> tuple[list[TextDelta], Finished, Engine]:
    runner, chat, options = loaded
    scripted = ScriptedGptOss(runner, script)
    engine = Engine(cast("Runner", scripted), options, chat=chat, model_name="tiny-gpt-oss")
    scripted.prompt_tokens = len(engine.prompts.encode(request))
    events = list(engine.generate(request))
    final = events[-1]
    assert isinstance(final, Finished) and final.reason != "error", final
    return [e for e in events if isinstance(e, TextDelta)], final, engine


def _split(deltas: list[TextDelta], parse_tools: bool) -> tuple[str, str, list[Any]]:
    splitter = ReplySplitter("harmony", parse_tools)
    reasoning, content, calls = "", "", list[Any]()
    for delta in deltas:
        r, c, more = splitter.feed(delta.text)
        reasoning, content, calls = reasoning + r, content + c, calls + more
    r, c, more = splitter.feed("", final=True)
    return reasoning + r, content + c, calls + more


@pytest.mark.parametrize("form", ["gguf", "safetensors"])  # llama.cpp's vocabulary; tokenizer.json
def test_reasoning_and_answer_come_out_apart(runners: Any, form: str) -> None:
    loaded = runners(form)
    tokenizer = loaded[0].tokenizer
    main = f"<|channel|>analysis<|message|>{THOUGHT}<|end|><|start|>assistant<|channel|>final<|message|>"
    request = GenerationRequest(messages=ASK, sampling=SamplingParams(max_tokens=200))
    deltas, final, engine = _generate(loaded, request, _answering(tokenizer, main))
    assert engine.info.tool_format == "harmony"
    assert final.reason == "stop"  # at <|return|>: <|end|> closed only the reasoning
    assert (
        final.text
        == f"<|channel|>analysis<|message|>{THOUGHT}<|end|><|start|>assistant<|channel|>final<|message|>{ANSWER}"
    )
    assert len(deltas) > 20  # streamed token by token
    assert _split(deltas, parse_tools=False) == (THOUGHT, ANSWER, [])


def test_a_tool_call_comes_out_as_a_call(loaded: Any) -> None:
    tokenizer = loaded[0].tokenizer
    call = (
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Rome"}<|call|>'
    )
    request = GenerationRequest(
        messages=(ChatMessage("user", "Weather in Rome?"),),
        tools=(WEATHER,),
        sampling=SamplingParams(max_tokens=200),
    )
    deltas, final, engine = _generate(loaded, request, _answering(tokenizer, call))
    rendered = tokenizer.decode(engine.prompts.encode(request))
    assert "type get_weather = (_: " in rendered  # the template rendered the tool
    assert final.reason == "stop" and final.text.endswith('{"city": "Rome"}')  # <|call|> stopped it
    reasoning, content, calls = _split(deltas, parse_tools=True)
    assert (reasoning, content) == ("Need the weather.", "")
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Rome"})]


def test_a_spent_reasoning_budget_closes_the_analysis_and_the_answer_follows(loaded: Any) -> None:
    tokenizer = loaded[0].tokenizer
    endless = f"<|channel|>analysis<|message|>{THOUGHT * 8}"
    request = GenerationRequest(
        messages=ASK, sampling=SamplingParams(max_tokens=200, reasoning_budget=6)
    )
    deltas, final, _ = _generate(loaded, request, _answering(tokenizer, endless))
    opened = len(_ids(tokenizer, "<|channel|>analysis<|message|>"))
    forced = _ids(tokenizer, HARMONY.forced_close)
    assert list(final.token_ids[opened + 6 : opened + 6 + len(forced)]) == forced
    reasoning, content, _ = _split(deltas, parse_tools=False)
    assert reasoning == tokenizer.decode(list(final.token_ids[opened : opened + 6]))
    assert content == ANSWER and final.reason == "stop"


def test_a_forced_call_is_a_harmony_call_the_splitter_reads(loaded: Any) -> None:
    pytest.importorskip("llguidance", reason="forced tool calls need llguidance")
    request = GenerationRequest(
        messages=(ChatMessage("user", "Weather?"),),
        tools=(WEATHER,),
        tool_choice="required",
        sampling=SamplingParams(max_tokens=60, temperature=0.9, seed=4),
    )
    deltas, final, _ = _generate(loaded, request, lambda reply: None)  # no script: the grammar
    assert final.text.startswith(
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    )
    reasoning, content, calls = _split(deltas, parse_tools=True)
    assert (reasoning, content) == ("", "")
    assert [c.name for c in calls] == ["get_weather"]
    assert json.loads(calls[0].arguments)["city"] in ("Paris", "Rome")
