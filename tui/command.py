"""`ember chat` (also plain `ember`): the Textual chat app."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from ember.app.config import Settings
    from ember.app.history.store import History
    from ember.paths import Paths
    from ember.tui.app import EmberApp

NAME = "chat"
HELP = "open the chat app (the default when no command is given)"
ORDER = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags that override the settings for this session."""
    parser.add_argument("--model", help="model name, alias or path (default: the settings' model)")
    parser.add_argument("--runner", help="auto | torch | llama.cpp")
    parser.add_argument("--device", help="auto | cpu | cuda | mps")
    from ember.app.options import add_context_flags

    add_context_flags(parser)  # --ctx N|auto, --kv-cache
    parser.add_argument(
        "--fake", action="store_true", help="use a fake model that replays canned replies (demo)"
    )


def run(args: argparse.Namespace) -> int:
    """Open the history (locked), build the backend factory, run the app. `--fake` runs in a
    throwaway home (its own settings, history and registry), deleted on exit: a demo never
    writes into the real history."""
    import sys
    import tempfile

    from ember.paths import get_paths, paths_under

    if not args.fake:
        return _run(args, get_paths(), "")
    with tempfile.TemporaryDirectory(prefix="ember-demo-") as home:
        notice = f"Demo: a fake model in a throwaway home ({home}), deleted on exit"
        sys.stderr.write(f"ember: {notice}; your history and settings are not touched\n")
        try:
            return _run(args, paths_under(Path(home)), notice)
        finally:
            sys.stderr.write(f"ember: the demo's throwaway home {home} is deleted\n")


def _run(args: argparse.Namespace, paths: Paths, demo_notice: str) -> int:
    import dataclasses

    from ember.app.config import load_settings
    from ember.app.crash import log_path
    from ember.app.history.store import History

    settings = load_settings(paths)
    from ember.app.rules import check_flag

    overrides = {k: getattr(args, k) for k in ("model", "runner", "device", "ctx", "kv_cache")}
    for name in ("ctx", "kv_cache"):
        check_flag("--" + name.replace("_", "-"), overrides[name])
    settings = dataclasses.replace(
        settings, **{k: v for k, v in overrides.items() if v is not None}
    )
    history = History.open(paths.history_db)
    log = log_path()
    try:
        app = _build_app(args.fake, settings, history, paths)
        app.first_run_check = args.model is None  # a model named on the command line: no welcome
        app.demo_notice = demo_notice
        from ember.tui.stderr_guard import native_stderr_to

        try:
            with native_stderr_to(log):
                app.run()
        finally:
            app.host.close()  # after the screen is restored: an engine step may take a moment
            app.close_tools()
    finally:
        history.close()
    if app.return_code:  # Textual stopped on an exception: never exit 0 after that
        _fail(getattr(app, "_exception", None), log)
    return 0


def _fail(exc: BaseException | None, log: Path) -> NoReturn:
    """Keep the traceback in the log and end with one line naming it."""
    from ember.app.crash import report
    from ember.errors import EmberError

    if exc is None:
        raise EmberError(f"the chat app stopped on an unexpected error (details in {log})")
    raise EmberError(report("the chat app", exc, log))


def _build_app(fake: bool, settings: Settings, history: History, paths: Paths) -> EmberApp:
    from ember.tui.app import EmberApp

    if fake:
        from ember.app.catalog.fake import FakeCatalog
        from ember.tui.fake_backend import FakeBackend, FakeScript

        catalog = FakeCatalog(starter=True)
        catalog.install_starter()
        script = FakeScript(tokens_per_s=25.0, ttft_s=0.2)  # slow enough to watch it stream
        return EmberApp(settings, history, lambda o: FakeBackend(o, script), catalog, paths)
    from ember.app.catalog.registry import RegistryCatalog
    from ember.app.loading import load_backend

    return EmberApp(settings, history, load_backend, RegistryCatalog(paths), paths)
