"""The few-shot conversational scaffold a pretrained (base) model chats through.

A base model continues text; it has never seen turn markers. Shown a short transcript (a
preamble, a few example exchanges), then the conversation so far and the assistant's name, it
writes the assistant's next line, and the stop string at the next turn ("\\nUser:") ends the
reply where the model would go on to invent the user's side. This is how llama.cpp's old
chat-with-bob prompt drove base models.

Wording measured on the starter (benchmarks/bench_first_questions.py, 25 questions, greedy):
the chat-with-bob prompt answered 15, the same with four examples 17, this one 19. None of the
examples is a benchmark question or answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember.models.text.tokenizers.base import Tokenizer

PREAMBLE = (
    "A conversation between a curious User and a helpful Assistant. The Assistant answers every "
    "question correctly, briefly and in plain words."
)
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Hello!", "Hello! How can I help you today?"),
    (
        "Please tell me the largest city in Europe.",
        "Sure. The largest city in Europe is Moscow, the capital of Russia.",
    ),
    ("What color is grass?", "Grass is green."),
    (
        "Which animal is called the king of the jungle?",
        "The lion is called the king of the jungle.",
    ),
)


@dataclass(frozen=True)
class Scaffold:
    """A transcript frame: preamble, example exchanges, speaker names; renders conversations."""

    preamble: str = PREAMBLE
    examples: tuple[tuple[str, str], ...] = EXAMPLES
    user: str = "User"
    assistant: str = "Assistant"

    def __post_init__(self) -> None:
        for name in (self.user, self.assistant):
            if not name or ":" in name or "\n" in name:
                raise ValueError(f"scaffold speaker name {name!r}: one line without ':'")

    @property
    def stop(self) -> tuple[str, ...]:
        """Where a reply ends: the start of the next turn of either speaker."""
        return (f"\n{self.user}:", f"\n{self.assistant}:")

    def render(self, messages: Sequence[dict[str, Any]]) -> str:
        """The transcript text, ending with the assistant's name and a colon."""
        system = [str(m.get("content", "")).strip() for m in messages if m.get("role") == "system"]
        head = "\n\n".join([self.preamble, *(s for s in system if s)])
        lines = []
        for question, answer in self.examples:
            lines += [f"{self.user}: {question}", f"{self.assistant}: {answer}"]
        for message in messages:
            role = message.get("role")
            if role == "system":
                continue
            speaker = self.assistant if role == "assistant" else self.user
            lines.append(f"{speaker}: {str(message.get('content', '')).strip()}")
        lines.append(f"{self.assistant}:")
        return head + "\n\n" + "\n".join(lines)

    def render_ids(self, tokenizer: Tokenizer, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Prompt ids: BOS when the model wants one, then the transcript as plain text (no text,
        the user's included, can become a special token)."""
        ids = tokenizer.encode(self.render(messages), parse_special=False)
        if tokenizer.add_bos and tokenizer.bos_id is not None:
            ids.insert(0, tokenizer.bos_id)
        return ids
