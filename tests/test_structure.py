"""The import graph is one-way (tui -> app -> engine, models; engine -> models; ember/'s errors,
paths and text under all) and has no cycle, counting imports inside functions; TYPE_CHECKING
blocks aside. `python -m tests.import_graph` prints the same report."""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import Edge, cycles, edges, report, upward


def test_imports_point_one_way_without_cycles() -> None:
    assert report() == "", "\n" + report()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in ("ember", "app", "engine", "models", "tui"):
        (tmp_path / folder).mkdir(exist_ok=True)
    return tmp_path


def test_the_graph_sees_lazy_imports_and_skips_type_checking(tmp_path: Path) -> None:
    repo = _package(tmp_path, {
        "engine/api.py": "def load():\n    from ember.engine.thread import run\n",
        "engine/thread.py": "from ember.engine import api\n",
        "engine/seq.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from ember.engine.thread import run\nelse:\n    import ember.models.files\n",
        "models/files.py": "",
    })
    found = edges(repo)
    pairs = {(e.source, e.target) for e in found}
    assert pairs == {
        ("ember.engine.api", "ember.engine.thread"),  # inside a function: counted
        ("ember.engine.thread", "ember.engine.api"),  # `from pkg import module`: the module
        ("ember.engine.seq", "ember.models.files"),  # the else of TYPE_CHECKING runs
    }
    assert cycles(found) == [["ember.engine.api", "ember.engine.thread"]]
    assert "cycle among 2 modules" in report(repo)


def test_upward_and_sideways_imports_are_named(tmp_path: Path) -> None:
    repo = _package(tmp_path, {
        "engine/a.py": "import ember.app.config\n",
        "models/b.py": "from ember.engine import a\n",
        "tui/c.py": "from ember.app.server import app\nfrom ember.engine.sampling import x\n"
        "from ember.models import b\nfrom ember.engine.api import Backend\nimport ember.errors\n",
        "app/config.py": "",
        "app/server/app.py": "",
        "engine/sampling.py": "",
        "engine/api.py": "",
    })
    bad = {(e.source, e.target) for e in upward(edges(repo))}
    assert bad == {
        ("ember.engine.a", "ember.app.config"),
        ("ember.models.b", "ember.engine.a"),
        ("ember.tui.c", "ember.app.server.app"),
        ("ember.tui.c", "ember.engine.sampling"),
        ("ember.tui.c", "ember.models.b"),
    }
    line = str(Edge("ember.engine.a", "ember.app.config", "engine/a.py", 1))
    assert line in report(repo)
