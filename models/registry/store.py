"""The local model index: one SQLite file (WAL) in the data dir with models, aliases and digests."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ember.models.errors import RegistryError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    format TEXT NOT NULL,
    architecture TEXT,
    parameters INTEGER,
    quant TEXT,
    size_bytes INTEGER NOT NULL DEFAULT 0,
    sha256 TEXT,
    source_repo TEXT,
    source_revision TEXT,
    source_file TEXT,
    owned INTEGER NOT NULL DEFAULT 0,
    added_at REAL NOT NULL,
    last_used_at REAL
);
CREATE TABLE IF NOT EXISTS aliases (
    alias TEXT PRIMARY KEY,
    name TEXT NOT NULL REFERENCES models(name) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS digests (
    path TEXT PRIMARY KEY,
    size_bytes INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class ModelRecord:
    """One registered model: where it lives, what it is, where it came from."""

    name: str
    path: Path
    format: str  # "gguf" | "safetensors" | "remote"
    architecture: str | None = None
    parameters: int | None = None
    quant: str | None = None
    size_bytes: int = 0
    sha256: str | None = None
    source_repo: str | None = None
    source_revision: str | None = None
    source_file: str | None = None
    owned: bool = False  # True when Ember downloaded/assembled the files (rm may delete them)
    added_at: float = 0.0
    last_used_at: float | None = None
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (paths as strings)."""
        out = dataclasses.asdict(self)
        out["path"] = str(self.path)
        out["aliases"] = list(self.aliases)
        return out


_COLUMNS = [f.name for f in dataclasses.fields(ModelRecord) if f.name != "aliases"]


class RegistryStore:
    """Thin SQLite access to the index; every method opens a short transaction."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.db_path, timeout=30.0)
        except (OSError, sqlite3.Error) as exc:
            raise RegistryError(f"{self.db_path}: cannot open the model registry ({exc})") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            with conn:
                yield conn
        except sqlite3.DatabaseError as exc:
            hint = ""
            if "not a database" in str(exc) or "malformed" in str(exc):
                hint = "; move the damaged file aside, then re-register models (`ember pull`, `ember add`)"
            raise RegistryError(f"{self.db_path}: model registry error ({exc}){hint}") from None
        finally:
            conn.close()

    def _row_to_record(self, conn: sqlite3.Connection, row: tuple[object, ...]) -> ModelRecord:
        values = dict(zip(_COLUMNS, row, strict=True))
        aliases = tuple(
            a
            for (a,) in conn.execute(
                "SELECT alias FROM aliases WHERE name=? ORDER BY alias", (values["name"],)
            )
        )
        values["path"] = Path(str(values["path"]))
        values["owned"] = bool(values["owned"])
        return ModelRecord(**values, aliases=aliases)  # type: ignore[arg-type]

    def all(self) -> list[ModelRecord]:
        """Every record, by name."""
        with self._connect() as conn:
            rows = conn.execute(f"SELECT {','.join(_COLUMNS)} FROM models ORDER BY name").fetchall()
            return [self._row_to_record(conn, r) for r in rows]

    def find(self, name_or_alias: str) -> ModelRecord | None:
        """The record registered under a name or an alias, or None."""
        with self._connect() as conn:
            target = conn.execute(
                "SELECT name FROM aliases WHERE alias=?", (name_or_alias,)
            ).fetchone()
            name = target[0] if target else name_or_alias
            row = conn.execute(
                f"SELECT {','.join(_COLUMNS)} FROM models WHERE name=?", (name,)
            ).fetchone()
            return self._row_to_record(conn, row) if row else None

    def find_by_path(self, path: Path) -> ModelRecord | None:
        """The record whose path is path, or None."""
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT {','.join(_COLUMNS)} FROM models WHERE path=?", (str(path),)
            ).fetchone()
            return self._row_to_record(conn, row) if row else None

    def put(self, record: ModelRecord) -> None:
        """Insert or replace a record (its aliases are kept)."""
        values = record.to_dict()
        values["owned"] = int(record.owned)
        if not record.added_at:
            values["added_at"] = time.time()
        with self._connect() as conn:
            if conn.execute("SELECT 1 FROM aliases WHERE alias=?", (record.name,)).fetchone():
                raise RegistryError(f"{record.name}: already used as an alias; pick another name")
            placeholders = ",".join("?" for _ in _COLUMNS)
            updates = ",".join(
                f"{c}=excluded.{c}" for c in _COLUMNS if c not in ("name", "added_at")
            )
            conn.execute(
                f"INSERT INTO models ({','.join(_COLUMNS)}) VALUES ({placeholders}) "
                f"ON CONFLICT(name) DO UPDATE SET {updates}",
                [values[c] for c in _COLUMNS],
            )

    def delete(self, name: str) -> None:
        """Forget a record and its aliases."""
        with self._connect() as conn:
            conn.execute("DELETE FROM aliases WHERE name=?", (name,))
            conn.execute("DELETE FROM models WHERE name=?", (name,))

    def set_alias(self, alias: str, name: str) -> None:
        """Point alias at name (replacing an older target)."""
        with self._connect() as conn:
            if conn.execute("SELECT 1 FROM models WHERE name=?", (alias,)).fetchone():
                raise RegistryError(f"{alias}: is already a model name; an alias cannot shadow it")
            conn.execute(
                "INSERT INTO aliases (alias, name) VALUES (?, ?) "
                "ON CONFLICT(alias) DO UPDATE SET name=excluded.name",
                (alias, name),
            )

    def touch(self, name: str, when: float | None = None) -> None:
        """Set last_used_at of name to now."""
        with self._connect() as conn:
            conn.execute(
                "UPDATE models SET last_used_at=? WHERE name=?", (when or time.time(), name)
            )

    def cached_digest(self, path: Path, size_bytes: int, mtime_ns: int) -> str | None:
        """A SHA-256 computed earlier for this exact file (same size and mtime), or None."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT sha256 FROM digests WHERE path=? AND size_bytes=? AND mtime_ns=?",
                (str(path), size_bytes, mtime_ns),
            ).fetchone()
            return row[0] if row else None

    def remember_digest(self, path: Path, size_bytes: int, mtime_ns: int, sha256: str) -> None:
        """Cache a file's SHA-256 keyed by path, size and mtime."""
        with self._connect() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO digests (path, size_bytes, mtime_ns, sha256) VALUES (?,?,?,?)",
                (str(path), size_bytes, mtime_ns, sha256),
            )
