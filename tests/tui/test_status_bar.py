"""The status bar during a reply (live context fill and tokens so far) and across chats (a new
chat shows no old numbers; reopening a chat shows its last reply's)."""

from __future__ import annotations

import pytest

from ember.tui.screens.chat.screen import ChatScreen
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


async def test_live_numbers_while_a_reply_streams(make_app, backends) -> None:
    backends.script.replies = ["word " * 400]
    backends.script.tokens_per_s = 200
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "count with me")
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        bar = chat.query_one(StatusBar)  # show(info) may put a new StatusInfo in: read it fresh
        await wait_for(pilot, lambda: (bar.info.reply_tokens or 0) >= 10)
        info = bar.info
        prompt_tokens = backends.last.count_tokens(backends.last.requests[-1])
        line = info.render_line()
        assert info.prompt_tokens == prompt_tokens > 0
        assert info.context_tokens == prompt_tokens + info.reply_tokens
        assert f"ctx {info.context_tokens}/{info.context_limit}" in line
        assert info.context_limit == backends.last.info.context_limit
        assert f"{info.reply_tokens} tokens so far" in line and "generating" in line
        await pilot.press("escape")
        await wait_idle(pilot)
        assert bar.info.reply_tokens is None and "so far" not in bar.info.render_line()


async def test_new_chat_clears_and_reopening_restores(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "Hi")
        await wait_idle(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        info = chat.query_one(StatusBar).info
        after_reply = (info.context_tokens, info.ttft_s, info.cached_tokens)
        assert after_reply[0] > 0 and after_reply[1] is not None
        first_id = chat.session.conversation.id if chat.session.conversation else None
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: chat.session.conversation is None)
        assert (info.context_tokens, info.ttft_s, info.tok_s, info.cached_tokens) == (
            0, None, None, None,
        )  # fmt: skip
        assert "ctx 0/" in info.render_line() and "TTFT -" in info.render_line()
        assert first_id is not None
        await chat.open_conversation(first_id)
        assert (info.context_tokens, info.ttft_s, info.cached_tokens) == after_reply
