"""`ember history list|export|import`: the chat history from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.app.history.store import Conversation, History

NAME = "history"
HELP = "List, export (Markdown or JSON with branches) and import chats."
ORDER = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="history_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="list chats (id, title, messages, last change)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    export = sub.add_parser(
        "export", help="export chats (all of them when none is named) to stdout or a file"
    )
    export.add_argument("chats", nargs="*", metavar="CHAT", help="a chat's id or exact title")
    export.add_argument(
        "--format",
        choices=("md", "json"),
        help="md: the shown branch as Markdown; json: every branch (default: from -o's suffix, "
        "else json)",
    )
    export.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    imports = sub.add_parser("import", help="import chats from an Ember JSON export")
    imports.add_argument("file", type=Path, help="the .json file `ember history export` wrote")


def run(args: argparse.Namespace) -> int:
    from ember.app.history.store import History
    from ember.paths import get_paths

    history = History.open(get_paths().history_db)
    try:
        if args.history_command == "list":
            return _list(history, args.json)
        if args.history_command == "export":
            return _export(history, args.chats, args.format, args.output)
        return _import(history, args.file)
    finally:
        history.close()


def _list(history: History, as_json: bool) -> int:
    import time

    from ember.app.commands._model_format import print_json, print_table

    chats = history.list_conversations()
    rows = [(c, len(history.tree(c.id))) for c in chats]
    if as_json:
        print_json(
            [
                {"id": c.id, "title": c.title, "messages": n, "updated_at": c.updated_at}
                for c, n in rows
            ]
        )
        return 0
    if not rows:
        print("no chats yet")
        return 0
    when = "%Y-%m-%d %H:%M"
    table = [
        [str(c.id), c.title, str(n), time.strftime(when, time.localtime(c.updated_at))]
        for c, n in rows
    ]
    print_table(table, ["ID", "TITLE", "MESSAGES", "UPDATED"])
    return 0


def select_chats(history: History, names: list[str]) -> list[Conversation]:
    """Chats by id or exact title (all of them when names is empty); EmberError for a name
    that matches none."""
    from ember.app.errors import HistoryError

    chats = history.list_conversations()
    if not names:
        return chats
    chosen: list[Conversation] = []
    for name in names:
        found = [c for c in chats if str(c.id) == name or c.title == name]
        if not found:
            raise HistoryError(f"no chat with the id or title {name!r} (see `ember history list`)")
        chosen += [c for c in found if c not in chosen]
    return chosen


def _export(history: History, names: list[str], fmt: str | None, output: Path | None) -> int:
    import sys

    from ember.app.history.export import export_json, export_markdown, write_export

    chats = select_chats(history, names)
    if fmt is None:
        fmt = (
            "md" if output is not None and output.suffix.lower() in (".md", ".markdown") else "json"
        )
    text = export_markdown(history, chats) if fmt == "md" else export_json(history, chats)
    if output is None:
        sys.stdout.write(text)
        return 0
    write_export(output, text)
    print(f"exported {len(chats)} chat{'s' if len(chats) != 1 else ''} to {output}")
    return 0


def _import(history: History, path: Path) -> int:
    from ember.app.history.importer import import_chats, read_export_file

    chats = read_export_file(path)
    imported = import_chats(history, chats)
    messages = sum(len(c.messages) for c in chats)
    print(f"imported {len(imported)} chat{'s' if len(imported) != 1 else ''} ({messages} messages)")
    for note in (n for c in chats for n in c.notes):
        print(f"left out {note}")
    return 0
