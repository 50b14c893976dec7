"""The chat screen's actions beyond sending: attach a file (F4 or `/file PATH`), export and import
chats, switch or pull a model. ChatScreen inherits them; the command palette lists them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

from ember.engine.api import ToolCall
from ember.errors import EmberError
from ember.tui.chat_session import ChatBusy, ChatSession
from ember.tui.generation import Generation
from ember.tui.messages import AttachFailed, FileAttached, PromptSubmitted, ToolDecided, ToolRan
from ember.tui.notices import notify_error
from ember.tui.screens.dialogs import PickDialog, TextDialog
from ember.tui.widgets.message_view import MessageBox, MessageView
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.reply_views import ToolCallView

if TYPE_CHECKING:
    from ember.tui.app import EmberApp

FILE_COMMAND = re.compile(r"^/file(?:\s+(?P<path>.+))?$")


def file_command(text: str) -> tuple[str, str] | None:
    """(path, rest) when the prompt's first line is `/file PATH` (the rest is the message to
    send with it); None when it is not such a command."""
    first, _, rest = text.partition("\n")
    match = FILE_COMMAND.match(first.strip())
    if match is None:
        return None
    return (match.group("path") or "").strip(), rest.strip()


class ChatExtras(Screen[None]):
    """Mixed into ChatScreen (which sets `session`)."""

    session: ChatSession

    @property
    def ember(self) -> EmberApp:
        return self.app  # type: ignore[return-value]

    # attachments

    def show_attachments(self) -> None:
        """The line above the prompt that lists the files going with the next message."""
        banner = self.query_one("#attach-banner", Static)
        files = self.session.attachments
        banner.display = bool(files)
        if files:
            names = ", ".join(f"{a.name} ({a.tokens:,} tokens)" for a in files)
            total = sum(a.tokens for a in files)
            banner.update(Content(f"Attached: {names}: {total:,} tokens with the next message"))

    def start_attach(self, path_text: str, then_send: str | None = None) -> None:
        """Read and count a file in a thread worker; FileAttached or AttachFailed follows.
        then_send: the message typed after a `/file PATH` line (None: attached with F4)."""
        if not path_text:
            notify_error(self, "Attach a file", "give a path: /file PATH")
            return
        path, session, post = Path(path_text), self.session, self.post_message

        def work_() -> None:
            try:
                post(FileAttached(session.read_attachment(path, post), then_send))
            except Exception as exc:  # noqa: BLE001 - any failure is a one-line notice
                post(AttachFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))

        self.run_worker(work_, thread=True, group="attach", exit_on_error=False)

    @on(AttachFailed)
    def _attach_failed(self, event: AttachFailed) -> None:
        notify_error(self, "Not attached", event.reason)

    @work(group="dialog")
    async def action_attach(self) -> None:
        """F4: ask for a file's path and attach it to the next message."""
        path = await self.app.push_screen_wait(TextDialog("Attach a text file (path)", ""))
        if path and path.strip():
            self.start_attach(path.strip())

    def action_detach(self) -> None:
        """Drop the files waiting to go with the next message."""
        if self.session.attachments:
            self.session.attachments = []
            self.show_attachments()
            self.notify("attachments removed")

    @on(FileAttached)
    async def _file_attached(self, event: FileAttached) -> None:
        self.session.attachments.append(event.attachment)
        self.show_attachments()
        if event.then_send is None:
            return
        prompt = self.query_one(PromptInput)
        if file_command(prompt.text) is not None:
            prompt.clear()  # the /file line did its work
        if event.then_send:
            self.post_message(PromptSubmitted(event.then_send))

    # export and import

    @work(group="dialog")
    async def action_export(self, fmt: str = "md") -> None:
        """Export this chat: Markdown (the shown branch) or JSON (every branch)."""
        conv = self.session.conversation
        if conv is None:
            self.notify("nothing to export yet: this chat is empty")
            return
        slug = re.sub(r"[^A-Za-z0-9]+", "-", conv.title).strip("-").lower() or "chat"
        default = str(Path.cwd() / f"{slug}.{fmt}")
        kind = "Markdown" if fmt == "md" else "JSON (every branch)"
        answer = await self.app.push_screen_wait(TextDialog(f"Export as {kind} to", default))
        if not answer or not answer.strip():
            return
        from ember.app.history.export import export_json, export_markdown, write_export

        path = Path(answer.strip()).expanduser()
        history = self.session.history
        try:
            conv = history.conversation(conv.id)
            text = (export_markdown if fmt == "md" else export_json)(history, [conv])
            write_export(path, text)
        except EmberError as exc:
            notify_error(self, "Export", exc)
            return
        self.notify(f"exported {conv.title!r} to {path}", markup=False)

    @work(group="dialog")
    async def action_import(self) -> None:
        """Import chats from an Ember JSON export (checked whole first; nothing half-done)."""
        answer = await self.app.push_screen_wait(TextDialog("Import chats from (JSON file)", ""))
        if not answer or not answer.strip():
            return
        from ember.app.history.importer import import_chats, read_export_file

        try:
            chats = read_export_file(Path(answer.strip()).expanduser())
            imported = import_chats(self.session.history, chats)
        except EmberError as exc:
            notify_error(self, "Import", exc)
            return
        await self.refresh_list()
        self.notify(f"imported {len(imported)} chat{'s' if len(imported) != 1 else ''}")

    if TYPE_CHECKING:  # ChatScreen's

        async def refresh_list(self) -> None: ...

        def update_status(self, state: str | None = None) -> None: ...

        def run_reply(self, reply: Generation) -> None: ...

        async def _end_reply(self, message_id: int, status: str, text: str) -> None: ...

    # tool calls

    def _box(self, message_id: int) -> MessageBox | None:
        return self.query_one(MessageView).box(message_id)

    async def show_tool_calls(self, message_id: int) -> None:
        """A reply made tool calls: show them; run the always-allowed ones, ask for the rest."""
        box, reply = self._box(message_id), self.session.reply
        if box is None or reply is None:
            return
        toolbox = self.session.toolbox
        new = [p for p in reply.parts if p.kind == "tool_call" and box.call_view(p.call_id) is None]
        servers = {p.name: toolbox.server_of(p.name) for p in new} if toolbox else {}
        await box.add_calls(new, servers)
        asking = []
        for call in self.session.pending_calls:
            view = box.call_view(call.id)
            if self.session.always_allowed(call):
                self._run_tool(call)
            elif view is not None:
                view.ask()
                asking.append(view)
        if asking:
            asking[0].focus()
            asking[0].scroll_visible()
            self.update_status("waiting for you")

    def _run_tool(self, call: ToolCall) -> None:
        session, post = self.session, self.post_message
        self.run_worker(
            lambda: session.run_tool(call, post), thread=True, group="tools", exit_on_error=False
        )

    @on(ToolDecided)
    async def _tool_decided(self, event: ToolDecided) -> None:
        box = self._box(event.message_id)
        view = box.call_view(event.call_id) if box is not None else None
        if event.decision == "deny":
            follow = self.session.deny(event.call_id)
            self._show_result(event.message_id, event.call_id)
            if follow is not None:
                self.run_reply(follow)
        else:
            call = self.session.confirm(event.call_id, always=event.decision == "always")
            if call is None:
                return
            if view is not None:
                view.asking = False
                view.set_class(False, "asking")
            self._run_tool(call)
            if event.decision == "always":  # the same tool's other calls in this reply run too
                for other in self.session.pending_calls:
                    other_view = box.call_view(other.id) if box is not None else None
                    if other.name == call.name and other_view is not None and other_view.asking:
                        other_view.asking = False
                        self._run_tool(other)
        self._focus_next_question(event.message_id)

    def _focus_next_question(self, message_id: int) -> None:
        box = self._box(message_id)
        views = [v for v in box.query(ToolCallView) if v.asking] if box is not None else []
        if views:
            views[0].focus()
        else:
            self.query_one(PromptInput).focus()

    def _show_result(self, message_id: int, call_id: str) -> None:
        box, reply = self._box(message_id), self.session.reply
        if box is None:
            return
        parts = reply.parts if reply is not None else []
        if not parts:
            parts = list(self.session.history.message(message_id).parts)
        result = next((p for p in parts if p.kind == "tool_result" and p.call_id == call_id), None)
        view = box.call_view(call_id)
        if view is not None and result is not None:
            view.set_result(result)

    @on(ToolRan)
    async def _tool_ran(self, event: ToolRan) -> None:
        follow = self.session.take_tool_result(event)
        self._show_result(event.message_id, event.call_id)
        if follow is not None:
            self.run_reply(follow)

    async def end_waiting_turn(self, message_id: int) -> None:
        """Esc while calls wait: they are denied and the reply ends, marked stopped."""
        box = self._box(message_id)
        for view in box.query(ToolCallView) if box is not None else []:
            if view.asking:
                self._show_result(message_id, view.call.call_id)
        text = self.session.history.message(message_id).content
        await self._end_reply(message_id, "stopped", text)
        self.update_status("idle")
        self.query_one(PromptInput).focus()

    # thinking

    def action_toggle_thinking(self) -> None:
        """F5: this chat's thinking switch, where the model's template has one."""
        info = self.session.host.info
        if info is not None and not info.features.get("thinking_switch"):
            notify_error(self, "Thinking", f"{info.model}'s chat template has no thinking switch")
            return
        current = self.session.thinking
        self.session.set_thinking(not (True if current is None else current))
        state = "on" if self.session.thinking else "off"
        self.notify(f"thinking {state} for this chat (from the next reply)")

    # models

    @work(group="dialog")
    async def action_switch_model(self) -> None:
        """Pick a local model for this chat (it loads in the background)."""
        names = self.ember.model_names()
        if not names:
            self.notify("no local models yet: pull one (Ctrl+O)")
            return
        current = self.session.model
        choice = await self.app.push_screen_wait(PickDialog("Model for this chat", names, current))
        if choice is None or choice == current:
            return
        if self.session.busy:
            notify_error(self, "Switch model", ChatBusy())
            return
        self.session.use_model(choice)
        await self.refresh_list()
        self.update_status()
        self.ember.preload(choice)
        self.notify(f"this chat now uses {choice}", markup=False)

    def action_pull_model(self) -> None:
        """The models screen with the Hub search focused."""
        from ember.tui.screens.models import ModelsScreen

        screen = ModelsScreen()
        self.app.push_screen(screen)
        screen.call_after_refresh(screen.action_search)
