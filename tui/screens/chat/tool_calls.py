"""A reply's tool calls on the chat screen: shown in its message box, run when the user
allow-listed the tool on this machine, asked about otherwise (ToolConsentDialog, one call at a
time); a decision runs or denies them, a result goes back to the model.
Functions of the ChatScreen they act on (ChatSession keeps the state)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.errors import EmberError
from ember.tui.messages import ToolDecided, ToolRan
from ember.tui.notices import notify_error
from ember.tui.screens.tool_consent import ToolConsentDialog
from ember.tui.widgets.message_view import MessageBox, MessageView
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.reply_views import ToolCallView, call_summary

if TYPE_CHECKING:
    from ember.engine.api import ToolCall
    from ember.tui.screens.chat.screen import ChatScreen


def _box(screen: ChatScreen, message_id: int) -> MessageBox | None:
    return screen.query_one(MessageView).box(message_id)


async def show_tool_calls(screen: ChatScreen, message_id: int) -> None:
    """A reply made tool calls: show them; run the ones the user allow-listed on this
    machine, ask about the rest one at a time (ToolConsentDialog)."""
    session = screen.session
    box, reply = _box(screen, message_id), session.reply
    if box is None or reply is None:
        return
    toolbox = session.toolbox
    new = [p for p in reply.parts if p.kind == "tool_call" and box.call_view(p.call_id) is None]
    servers = {p.name: toolbox.server_of(p.name) for p in new} if toolbox else {}
    await box.add_calls(new, servers)
    for call in session.pending_calls:
        view = box.call_view(call.id)
        if session.always_allowed(call):
            _run_tool(screen, call)
        elif view is not None:
            view.ask()
    _ask_next(screen, message_id)


def _ask_next(screen: ChatScreen, message_id: int) -> None:
    """The first call still waiting gets the dialog (one at a time); none: the prompt."""
    box = _box(screen, message_id)
    views = [v for v in box.query(ToolCallView) if v.asking] if box is not None else []
    if not views:
        screen.query_one(PromptInput).focus()
        return
    if any(isinstance(s, ToolConsentDialog) for s in screen.app.screen_stack):
        return  # one question at a time: the next comes when this one is answered
    view = views[0]
    view.scroll_visible()
    screen.update_status("waiting for you")
    toolbox, name = screen.session.toolbox, view.call.name
    dialog = ToolConsentDialog(
        call_summary(view.call),
        view.server,
        toolbox.description_of(name) if toolbox is not None else "",
    )
    call_id = view.call.call_id

    def answered(answer: str | None) -> None:
        screen.post_message(ToolDecided(message_id, call_id, answer or "deny"))

    screen.app.push_screen(dialog, answered)


def _run_tool(screen: ChatScreen, call: ToolCall) -> None:
    session, post = screen.session, screen.post_message
    screen.run_worker(
        lambda: session.run_tool(call, post), thread=True, group="tools", exit_on_error=False
    )


def tool_decided(screen: ChatScreen, event: ToolDecided) -> None:
    """The user answered a call: deny it (the turn may go on), or run it (and, for "always",
    the same tool's other waiting calls in this reply)."""
    session = screen.session
    box = _box(screen, event.message_id)
    view = box.call_view(event.call_id) if box is not None else None
    if event.decision == "deny":
        follow = session.deny(event.call_id)
        _show_result(screen, event.message_id, event.call_id)
        if follow is not None:
            screen.run_reply(follow)
    else:
        try:
            call = session.confirm(event.call_id, always=event.decision == "always")
        except EmberError as exc:  # the settings file could not be written: run once
            notify_error(screen.app, "Always allow", exc)
            call = session.confirm(event.call_id)
        if call is None:
            return
        if view is not None:
            view.asking = False
            view.set_class(False, "asking")
        _run_tool(screen, call)
        if event.decision == "always":  # the same tool's other calls in this reply run too
            for other in session.pending_calls:
                other_view = box.call_view(other.id) if box is not None else None
                if other_view is not None and other_view.asking and session.always_allowed(other):
                    other_view.asking = False
                    _run_tool(screen, other)
    _ask_next(screen, event.message_id)


def _show_result(screen: ChatScreen, message_id: int, call_id: str) -> None:
    box, reply = _box(screen, message_id), screen.session.reply
    if box is None:
        return
    parts = reply.parts if reply is not None else []
    if not parts:
        parts = list(screen.session.history.message(message_id).parts)
    result = next((p for p in parts if p.kind == "tool_result" and p.call_id == call_id), None)
    view = box.call_view(call_id)
    if view is not None and result is not None:
        view.set_result(result)


def tool_ran(screen: ChatScreen, event: ToolRan) -> None:
    """A call's result came back: show it; the reply goes on once no call waits."""
    follow = screen.session.take_tool_result(event)
    _show_result(screen, event.message_id, event.call_id)
    if follow is not None:
        screen.run_reply(follow)


async def end_waiting_turn(screen: ChatScreen, message_id: int) -> None:
    """Esc while calls wait: they are denied and the reply ends, marked stopped."""
    box = _box(screen, message_id)
    for view in box.query(ToolCallView) if box is not None else []:
        if view.asking:
            _show_result(screen, message_id, view.call.call_id)
    text = screen.session.history.message(message_id).content
    await screen.end_reply(message_id, "stopped", text)
    screen.update_status("idle")
    screen.query_one(PromptInput).focus()
