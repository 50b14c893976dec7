"""Chat screen flows with the FakeBackend: send, stream, stop, regenerate, edit/branch, copy, chats."""

from __future__ import annotations

import pytest

from ember.app.config import Settings
from ember.app.history.store import History
from ember.tui.app import EmberApp
from ember.tui.screens.chat.screen import ChatScreen
from ember.tui.widgets.message_view import MessageView
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, send, send_turns, wait_for, wait_idle

pytestmark = pytest.mark.anyio


def _chat(app: EmberApp) -> ChatScreen:
    screen = app.screen
    assert isinstance(screen, ChatScreen)
    return screen


def _path(history: History, chat: ChatScreen) -> list[tuple[str, str, str]]:
    assert chat.session.conversation is not None
    return [(m.role, m.status, m.content) for m in history.path(chat.session.conversation.id)]


async def test_send_streams_reply_and_stores_it(make_app, history, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "Hi there")
        await wait_idle(pilot)
        chat = _chat(app)
        assert _path(history, chat) == [
            ("user", "complete", "Hi there"),
            ("assistant", "complete", "Hello **there**, friend."),
        ]
        boxes = chat.query_one(MessageView).boxes()
        assert [b.message.role for b in boxes] == ["user", "assistant"]
        assert boxes[1].text == "Hello **there**, friend."
        assert app.screen.query_one(PromptInput).text == ""
        request = backends.last.requests[-1]
        assert [(m.role, m.content) for m in request.messages] == [("user", "Hi there")]
        assert request.sampling.temperature == 0.7  # the default settings reach the engine
        status = chat.query_one(StatusBar).info
        assert status.model == "gemma3-270m" and status.runner == "fake"
        assert status.context_tokens > 0 and status.tok_s is not None and status.cached_tokens == 0
        assert history.list_conversations()[0].title == "Hi there"


async def test_second_turn_sees_history_and_cached_prefix(make_app, history, backends) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send_turns(pilot, "one", "two")
        request = backends.last.requests[-1]
        assert [m.content for m in request.messages] == ["one", "Hello **there**, friend.", "two"]
        cached_tokens = _chat(app).query_one(StatusBar).info.cached_tokens
        assert cached_tokens is not None and cached_tokens > 0
        assert len(backends.built) == 1  # the model is loaded once


async def test_escape_stops_and_keeps_partial_reply(make_app, history, backends) -> None:
    backends.script.replies = ["word " * 2000]
    backends.script.tokens_per_s = 100
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long please")
        chat = _chat(app)
        await wait_for(
            pilot, lambda: chat.session.reply is not None and len(chat.session.reply.text) > 20
        )
        await pilot.press("escape")
        await wait_idle(pilot)
        (_, _), (role, status, text) = (
            [(r, s) for r, s, _ in _path(history, chat)][0],
            _path(history, chat)[1],
        )
        assert (role, status) == ("assistant", "stopped")
        assert 20 < len(text) < len("word " * 2000)
        box = chat.query_one(MessageView).boxes()[-1]
        assert box.status == "stopped" and "stopped" in str(
            box.query_one(".message-header").render()
        )


async def test_regenerate_keeps_old_reply_as_branch(make_app, history, backends) -> None:
    backends.script.replies = ["first answer", "second answer", "third answer"]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "q")
        await wait_idle(pilot)
        await pilot.press("ctrl+r")
        await wait_idle(pilot)
        chat = _chat(app)
        assert _path(history, chat)[-1][2] == "second answer"
        boxes = chat.query_one(MessageView).boxes()
        assert len(boxes) == 2 and boxes[-1].branch == (2, 2)
        boxes[-1].focus()
        await pilot.press("left")
        await wait_for(pilot, lambda: _path(history, chat)[-1][2] == "first answer")
        assert chat.query_one(MessageView).boxes()[-1].branch == (1, 2)
        # the next message continues the branch shown now (it used to follow the old one)
        await send(pilot, "more")
        await wait_idle(pilot)
        assert [c for _, _, c in _path(history, chat)] == [
            "q",
            "first answer",
            "more",
            "third answer",
        ]


async def test_edit_earlier_message_continues_as_branch(make_app, history, backends) -> None:
    backends.script.echo = True
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send_turns(pilot, "alpha", "beta")
        chat = _chat(app)
        first_user = chat.query_one(MessageView).boxes()[0]
        first_user.focus()
        await pilot.press("e")
        assert chat.session.editing is not None and chat.query_one(PromptInput).text == "alpha"
        assert chat.query_one("#edit-banner").display
        await send(pilot, "gamma")
        await wait_idle(pilot)
        assert [c for _, _, c in _path(history, chat)] == ["gamma", "You said: gamma"]
        assert chat.query_one(MessageView).boxes()[0].branch == (2, 2)
        # the old branch is reachable and comes back whole
        chat.query_one(MessageView).boxes()[0].focus()
        await pilot.press("left")
        await wait_for(pilot, lambda: len(_path(history, chat)) == 4)
        assert [c for _, _, c in _path(history, chat)] == [
            "alpha",
            "You said: alpha",
            "beta",
            "You said: beta",
        ]


async def test_escape_cancels_edit(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "alpha")
        await wait_idle(pilot)
        await pilot.press("ctrl+b")
        chat = _chat(app)
        assert chat.session.editing is not None
        await pilot.press("escape")
        assert chat.session.editing is None and chat.query_one(PromptInput).text == ""


async def test_prompt_newlines_and_input_history(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.screen.query_one(PromptInput)
        prompt.focus()
        await pilot.press("a", "ctrl+j", "b", "shift+enter", "c")
        assert prompt.text == "a\nb\nc"
        await pilot.press("enter")
        await wait_idle(pilot)
        assert _path(history, _chat(app))[0][2] == "a\nb\nc"
        await send(pilot, "second")
        await wait_idle(pilot)
        await pilot.press("up")
        assert prompt.text == "second"
        await pilot.press("up")
        assert prompt.text == "a\nb\nc"
        await pilot.press("down", "down", "down")
        assert prompt.text == ""


async def test_copy_message_uses_osc52_and_fallback(make_app, tmp_path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "copy me")
        await wait_idle(pilot)
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: app.copied)
        assert app.copied[-1] == "Hello **there**, friend."
        assert app.clipboard == "Hello **there**, friend."  # what OSC 52 sent
        _chat(app).query_one(MessageView).boxes()[0].focus()
        await pilot.press("c")
        assert app.copied[-1] == "copy me"
        fallback = app.paths.cache_dir / "clipboard.txt"
        await wait_for(pilot, lambda: fallback.exists() and fallback.read_text() == "copy me")


async def test_new_rename_search_delete_chats(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "about python")
        await wait_idle(pilot)
        await pilot.press("ctrl+n")
        chat = _chat(app)
        assert chat.session.conversation is None and not chat.query_one(MessageView).boxes()
        await send(pilot, "about cooking")
        await wait_idle(pilot)
        assert [c.title for c in history.list_conversations()] == ["about cooking", "about python"]

        await pilot.press("f2")
        await pilot.press(*"Kitchen", "enter")  # the old title is selected: typing replaces it
        await wait_for(pilot, lambda: history.list_conversations()[0].title == "Kitchen")

        await pilot.press("ctrl+f", *"python")
        await wait_for(pilot, lambda: len(chat.query("ConversationItem")) == 1)
        await pilot.press("enter", "enter")  # to the list, then open the match
        await wait_for(
            pilot,
            lambda: chat.session.conversation and chat.session.conversation.title == "about python",
        )

        await pilot.press("f8")
        await pilot.press("n")  # declined: nothing deleted
        assert len(history.list_conversations()) == 2
        await pilot.press("f8")
        await pilot.press("y")
        await wait_for(
            pilot, lambda: [c.title for c in history.list_conversations()] == ["Kitchen"]
        )
        assert chat.session.conversation is None


async def test_reopen_shows_history(make_app, history) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "remember me")
        await wait_idle(pilot)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        boxes = _chat(app).query_one(MessageView).boxes()
        assert [b.text for b in boxes] == ["remember me", "Hello **there**, friend."]


async def test_quit_while_streaming_keeps_reply_stopped(make_app, history, backends) -> None:
    backends.script.replies = ["word " * 5000]
    backends.script.tokens_per_s = 100
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "go")
        chat = _chat(app)
        await wait_for(pilot, lambda: chat.session.reply is not None and chat.session.reply.text)
        assert chat.session.conversation is not None
        conv_id = chat.session.conversation.id
        await pilot.press("ctrl+q")
    reply = history.path(conv_id)[-1]
    assert reply.role == "assistant" and reply.status == "stopped" and reply.content


async def test_view_follows_stream_unless_scrolled_up(make_app, backends, monkeypatch) -> None:
    backends.script.replies = [("word " * 50 + "\n\n") * 2000]  # streams for minutes
    backends.script.tokens_per_s = 200
    app = make_app(Settings(max_tokens=100_000))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long")
        view = _chat(app).query_one(MessageView)
        page = view.scrollable_content_region.height
        await wait_for(pilot, lambda: view.max_scroll_y > 2 * page)  # a page to go up
        await wait_for(pilot, lambda: view.scroll_y == view.max_scroll_y)  # following the end
        assert view.following
        before = view.scroll_y
        view.scroll_page_up(animate=False)  # what the mouse wheel or a scrollbar drag does
        assert not view.following  # at once, before the scroll is made
        await wait_for(pilot, lambda: view.scroll_y <= before - page + 1)
        held, grown = view.scroll_y, view.max_scroll_y
        await wait_for(pilot, lambda: view.max_scroll_y > grown + 8)
        assert view.scroll_y == held and not view.following  # kept while text keeps coming
        view.scroll_end(animate=False)  # back at the bottom: follow again
        await wait_for(pilot, lambda: view.following)
        mark = view.max_scroll_y
        await wait_for(pilot, lambda: view.max_scroll_y > mark + 8)
        await wait_for(pilot, lambda: view.scroll_y == view.max_scroll_y)
        # the keys: an animated PageUp holds too; End follows again, Down at the end keeps on
        view.focus()
        # where PageUp starts from: the view follows the growing end until the key releases
        # the anchor, so a position read before the key is pressed can be stale by then
        starts: list[float] = []
        release = view.release_anchor

        def spy() -> None:
            starts.append(view.scroll_y)
            release()

        monkeypatch.setattr(view, "release_anchor", spy)
        await pilot.press("pageup")
        assert not view.following and starts
        await wait_for(pilot, lambda: view.scroll_y <= starts[0] - page + 1)
        await wait_for(pilot, lambda: view.scroll_y == view.scroll_target_y)  # animation done
        held, grown = view.scroll_y, view.max_scroll_y
        await wait_for(pilot, lambda: view.max_scroll_y > grown + 8)
        assert view.scroll_y == held and not view.following
        await pilot.press("end")
        await wait_for(pilot, lambda: view.following and view.scroll_y == view.max_scroll_y)
        await pilot.press("down")  # nothing below: keeps following
        assert view.following
        await pilot.press("escape")
        await wait_idle(pilot)
