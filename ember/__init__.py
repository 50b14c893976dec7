"""Ember: a local LLM app for the terminal."""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

# In a source checkout the sub-packages live beside this folder (app/, engine/, models/, tui/);
# an installed wheel maps them under ember/ through setuptools package-dir. Adding the checkout
# root to __path__ lets `python -m pytest` and `python -m ember` run from a clone without an install.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "pyproject.toml")) and _os.path.isfile(
    _os.path.join(_root, "engine", "__init__.py")
):
    __path__.append(_root)
