"""Base-model detection and the few-shot scaffold (models/text/base_chat, chat_format)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.engine.api import ChatMessage, ModelFiles, ToolSpec
from ember.engine.runners.factory import chat_renderer
from ember.engine.runners.fake import BOS_ID, FakeTokenizer
from ember.models.errors import TemplateError
from ember.models.files.gguf import open_gguf
from ember.models.text.base_chat.model_kind import decide_model_kind, gguf_model_kind
from ember.models.text.base_chat.scaffold import Scaffold
from tests.fixtures.tiny_models import TinyModels

CATALOG = Path(__file__).parents[3] / "models" / "hub" / "catalog.json"


@pytest.mark.parametrize(
    ("finetune", "names", "has_template", "base"),
    [
        ("", ["Gemma 3 270m", "gemma-3-270m-q4_k_m"], False, True),  # the starter's facts
        ("it", ["Gemma 3 270m It"], True, False),
        ("", ["gemma-3-270m-it-Q4_K_M"], False, False),  # an IT file without a template
        ("Instruct", ["Qwen2.5 0.5B Instruct"], True, False),
        ("", ["Qwen3 0.6B", "Qwen3-0.6B-Q8_0"], True, False),  # post-trained, no marker
        ("", ["Qwen3-0.6B-Base"], True, True),  # a base marker beats the template
        ("", ["gemma-3-1b-pt"], True, True),
        ("base", ["SmolLM2 360M Instruct"], True, True),  # finetune field first
        ("", ["Meta-Llama-3-8B"], False, True),
    ],
)
def test_model_kind_rule(finetune: str, names: list[str], has_template: bool, base: bool) -> None:
    kind = decide_model_kind(finetune, names, has_template)
    assert kind.base is base and kind.reason


def test_curated_catalog_models_are_not_base() -> None:
    """Every catalog entry is an instruction-tuned release: its names say so, or (Qwen3) its
    template does; none may chat through the scaffold."""
    models = json.loads(CATALOG.read_text())["models"]
    unmarked = []
    for entry in models:
        names = [entry["repo"], entry["repo"].split("/")[-1], entry["name"]]
        assert not decide_model_kind("", names, has_template=True).base, entry["repo"]
        if decide_model_kind("", names, has_template=False).base:
            unmarked.append(entry["repo"])
    assert unmarked == ["Qwen/Qwen3-0.6B-GGUF", "Qwen/Qwen3-1.7B-GGUF"]  # template decides


@pytest.mark.model
def test_starter_is_detected_as_base(starter_gguf: Path) -> None:
    gguf = open_gguf(starter_gguf)
    assert gguf.chat_template is None and "general.finetune" not in gguf.metadata
    kind = gguf_model_kind(gguf, ["gemma3-270m"])
    assert kind.base and "no chat template" in kind.reason


def test_tiny_models_with_templates_are_instruct(tiny_models: TinyModels) -> None:
    assert not gguf_model_kind(open_gguf(tiny_models.gguf("gemma3", "Q8_0"))).base


CONVERSATION = [
    {"role": "system", "content": "Answer like a pirate."},
    {"role": "user", "content": "Hi there "},
    {"role": "assistant", "content": "Ahoy!"},
    {"role": "user", "content": "Where is Paris?"},
]


def test_scaffold_renders_preamble_examples_turns_and_assistant_marker() -> None:
    scaffold = Scaffold(preamble="A chat.", examples=(("Q1?", "A1."),))
    assert scaffold.render(CONVERSATION) == (
        "A chat.\n\nAnswer like a pirate.\n\n"
        "User: Q1?\nAssistant: A1.\n"
        "User: Hi there\nAssistant: Ahoy!\nUser: Where is Paris?\nAssistant:"
    )
    assert scaffold.stop == ("\nUser:", "\nAssistant:")
    with pytest.raises(ValueError, match="speaker name"):
        Scaffold(user="Us:er")


def test_scaffold_ids_keep_user_text_plain() -> None:
    tok = FakeTokenizer()
    ids = Scaffold().render_ids(tok, [{"role": "user", "content": "<bos><eot>"}])
    assert ids[0] == BOS_ID and ids.count(BOS_ID) == 1 and 3 not in ids  # no <eot> id
    assert tok.decode(ids[1:]).endswith("User: <bos><eot>\nAssistant:")


def test_default_scaffold_examples_are_not_benchmark_questions() -> None:
    questions = json.loads(
        (CATALOG.parents[2] / "benchmarks" / "data" / "first_questions.json").read_text()
    )["questions"]
    asked = {q["q"].lower() for q in questions}
    assert len(questions) >= 20
    assert not asked & {question.lower() for question, _ in Scaffold().examples}


def _files(path: Path, name: str = "tiny") -> ModelFiles:
    return ModelFiles(name, path, "gguf", "0" * 64)


def test_chat_format_auto_and_forced(tiny_models: TinyModels) -> None:
    path = tiny_models.gguf("gemma3", "Q8_0")
    tok = FakeTokenizer()
    auto = chat_renderer(_files(path), tok)
    assert auto.kind == "template" and not hasattr(auto, "stop")  # type: ignore[attr-defined]
    assert "chat template" in auto.reason  # type: ignore[attr-defined]
    forced = chat_renderer(_files(path), tok, "scaffold")
    assert forced.kind == "scaffold" and forced.lstrip_reply  # type: ignore[attr-defined]
    assert forced.stop == Scaffold().stop  # type: ignore[attr-defined]
    hi = [ChatMessage("user", "hi")]
    assert tok.decode(forced(hi)).endswith("User: hi\nAssistant:")
    with pytest.raises(TemplateError, match="chat format 'bob'"):
        chat_renderer(_files(path), tok, "bob")


def test_scaffold_sends_tools_through_the_template(tiny_models: TinyModels) -> None:
    """A base model offered tools renders them in its template's tool format (the scaffold has
    none); plain turns still go through the scaffold."""
    path = tiny_models.gguf("gemma3", "Q8_0")
    tok = FakeTokenizer()
    scaffold = chat_renderer(_files(path), tok, "scaffold")
    template = chat_renderer(_files(path), tok, "template")
    hi = [ChatMessage("user", "hi")]
    weather = ToolSpec("get_weather", "the weather", {"type": "object"})
    assert scaffold(hi) != template(hi)
    assert scaffold(hi, tools=[weather]) == template(hi, tools=[weather])
    assert "get_weather" in tok.decode(scaffold(hi, tools=[weather]))
    kwargs = {"enable_thinking": False}
    assert scaffold(hi, template_kwargs=kwargs) == template(hi, template_kwargs=kwargs)
    assert scaffold.tool_format == template.tool_format  # type: ignore[attr-defined]


@pytest.mark.model
def test_starter_chats_through_the_scaffold(starter_gguf: Path) -> None:
    from ember.models.text.tokenizers.open import open_tokenizer

    tok = open_tokenizer(starter_gguf)
    chat = chat_renderer(_files(starter_gguf, "gemma3-270m"), tok)
    assert chat.kind == "scaffold"  # type: ignore[attr-defined]
    assert chat.reason.startswith("pretrained")  # type: ignore[attr-defined]
    template = chat_renderer(_files(starter_gguf, "gemma3-270m"), tok, "template")
    assert template.kind == "template"  # type: ignore[attr-defined]
