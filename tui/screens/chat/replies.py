"""A reply on the chat screen as its thread worker reports it: the model loaded, the prompt
counted, text arriving, the end (or a failure); the status bar follows. Functions of the
ChatScreen they act on (ChatSession keeps the state)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.app.history.reply_stats import usable_stats
from ember.tui.chat.session import empty_reply_note
from ember.tui.messages import BackendLoaded, ReplyDelta, ReplyFailed, ReplyFinished, ReplyStarted
from ember.tui.notices import notify_error
from ember.tui.screens.chat import tool_calls
from ember.tui.widgets.message_view import MessageView
from ember.tui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from ember.tui.screens.chat.screen import ChatScreen


def show_last_stats(screen: ChatScreen) -> None:
    """The status bar shows this chat's last reply (nothing for a new chat)."""
    info = screen.query_one(StatusBar).info
    info.clear_reply()
    last = screen.session.last("assistant")
    stats = usable_stats(last.stats) if last is not None else None
    if stats is not None:  # what another version or program stored badly is left out
        info.apply_stats(stats)


def backend_loaded(screen: ChatScreen, event: BackendLoaded) -> None:
    screen.query_one(StatusBar).info.apply_info(event.info)
    screen.update_status("generating" if screen.session.busy else "idle")
    if event.info.context_note:  # --ctx auto: the context it chose, and why
        screen.notify(event.info.context_note, markup=False, timeout=10)


async def reply_delta(screen: ChatScreen, event: ReplyDelta) -> None:
    if not screen.session.take_delta(event):
        return
    box = screen.query_one(MessageView).box(event.message_id)
    if box is not None:
        await box.append(event.text, event.reasoning)
    reply = screen.session.reply
    if reply is not None:
        bar = screen.query_one(StatusBar)
        bar.info.add_reply_tokens(reply.num_tokens, reply.tok_s)
        bar.info.state = "generating"
        bar.show()


def reply_started(screen: ChatScreen, event: ReplyStarted) -> None:
    reply = screen.session.reply
    if reply is None or reply.message_id != event.message_id:
        return
    bar = screen.query_one(StatusBar)
    bar.info.start_reply(event.prompt_tokens)
    bar.info.add_reply_tokens(reply.num_tokens, reply.tok_s)
    screen.update_status("generating")


async def reply_finished(screen: ChatScreen, event: ReplyFinished) -> None:
    finished = event.finished
    status = screen.session.finish(event)
    screen.query_one(StatusBar).info.apply_stats(finished.stats)
    if status is None:  # tool calls: the turn waits for the user's decisions
        await tool_calls.show_tool_calls(screen, event.message_id)
        return
    message = screen.session.history.message(event.message_id)
    await screen.end_reply(event.message_id, status, message.content)
    screen.update_status("idle")
    if status == "empty":  # never a finished answer: say what happened, offer Ctrl+R
        thought = any(p.kind == "reasoning" for p in message.parts)
        note = empty_reply_note(finished, thought)
        screen.notify(note, title="No answer", severity="warning", markup=False, timeout=15)
    if finished.reason == "error":
        notify_error(screen, "Generation failed", finished.error)


async def reply_failed(screen: ChatScreen, event: ReplyFailed) -> None:
    text = screen.session.fail(event)
    await screen.end_reply(event.message_id, "error", text)
    screen.update_status("idle")
    notify_error(screen, "The reply could not run", event.reason, timeout=10)
