"""Where Ember keeps its files: platformdirs' config/data/cache folders, or all under EMBER_HOME.

`EMBER_HOME` moves every path under one folder (tests use it): config/, data/, cache/.
Resolved in app and passed down: nothing under engine/ or models/ calls get_paths().
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "ember"


@dataclass(frozen=True)
class Paths:
    """Where Ember keeps its files."""

    config_dir: Path
    data_dir: Path
    cache_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def history_db(self) -> Path:
        return self.data_dir / "history.sqlite3"

    @property
    def registry_db(self) -> Path:
        return self.data_dir / "registry.sqlite3"

    @property
    def prefix_cache_dir(self) -> Path:
        return self.cache_dir / "prefix"


def paths_under(root: Path) -> Paths:
    """Every path under one folder: root/config, root/data, root/cache (EMBER_HOME's layout,
    and `ember --fake`'s throwaway home)."""
    return Paths(root / "config", root / "data", root / "cache")


def get_paths() -> Paths:
    """Paths from `EMBER_HOME` when set, else the platform's config/data/cache folders."""
    home = os.environ.get("EMBER_HOME")
    if home:
        return paths_under(Path(home).expanduser())
    import platformdirs

    return Paths(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_cache_dir(APP_NAME)),
    )
