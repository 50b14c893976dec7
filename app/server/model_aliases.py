"""Model names a server answers for another model: `ember serve --alias 'claude-*=gemma3-270m'`.

Agents send their own model names (Claude Code: claude-sonnet-4-5, claude-haiku-4-5-...); an
alias maps a glob pattern (fnmatch: *, ?, [seq]; case-sensitive) onto a served model. A name the
server serves itself is never remapped; the first pattern that matches wins."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from ember.errors import EmberError


@dataclass(frozen=True)
class ModelAlias:
    pattern: str
    model: str

    @classmethod
    def parse(cls, text: str) -> ModelAlias:
        """PATTERN=MODEL, e.g. 'claude-*=gemma3-270m'."""
        pattern, sep, model = text.partition("=")
        pattern, model = pattern.strip(), model.strip()
        if not sep or not pattern or not model:
            raise EmberError(f"--alias {text!r}: give PATTERN=MODEL, e.g. 'claude-*=gemma3-270m'")
        return cls(pattern, model)

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)


@dataclass(frozen=True)
class ModelAliases:
    aliases: tuple[ModelAlias, ...] = ()

    @classmethod
    def parse(cls, texts: list[str]) -> ModelAliases:
        return cls(tuple(ModelAlias.parse(t) for t in texts))

    def target(self, name: str) -> str | None:
        """The model name stands for, if an alias matches it."""
        return next((a.model for a in self.aliases if a.matches(name)), None)
