"""System prompt presets: named texts a chat can start from (part of History)."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager

from ember.app.errors import HistoryError
from ember.app.history.records import Preset
from ember.text import clean


class PresetsMixin:
    """The preset methods of History (which provides _db, _reading and _writing)."""

    _db: sqlite3.Connection

    def _reading(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _writing(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def list_presets(self) -> list[Preset]:
        """All system prompt presets by name."""
        with self._reading("the presets"):
            rows = self._db.execute("SELECT * FROM presets ORDER BY name").fetchall()
        return [Preset(r["id"], clean(r["name"]), clean(r["content"])) for r in rows]

    def save_preset(self, name: str, content: str, preset_id: int | None = None) -> Preset:
        """Create a preset, or update the one with preset_id; names are unique."""
        name, content = clean(name).strip(), clean(content)
        if not name:
            raise HistoryError("a preset needs a name")
        try:
            with self._writing(f"preset {name!r}"):
                if preset_id is None:
                    cur = self._db.execute(
                        "INSERT INTO presets (name, content) VALUES (?, ?)", (name, content)
                    )
                    preset_id = int(cur.lastrowid or 0)
                else:
                    self._db.execute(
                        "UPDATE presets SET name=?, content=? WHERE id=?",
                        (name, content, preset_id),
                    )
        except sqlite3.IntegrityError:
            raise HistoryError(f"a preset named {name!r} already exists") from None
        return Preset(preset_id, name, content)

    def delete_preset(self, preset_id: int) -> None:
        """Remove a preset (chats that used it keep their system prompt text)."""
        with self._writing("deleting the preset"):
            self._db.execute(
                "UPDATE conversations SET preset_id=NULL WHERE preset_id=?", (preset_id,)
            )
            self._db.execute("DELETE FROM presets WHERE id=?", (preset_id,))
