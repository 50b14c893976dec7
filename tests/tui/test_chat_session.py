"""ChatSession without Textual running: what each turn stores, which messages the worker posts,
and which actions a streaming reply refuses. Real SQLite history, FakeBackend behind a host."""

from __future__ import annotations

import dataclasses

import pytest
from textual.message import Message as TextualMessage

from ember.app.config import Settings
from ember.app.history.store import History
from ember.errors import EmberError
from ember.tui.backend_host import BackendHost
from ember.tui.chat.generation import Generation
from ember.tui.chat.session import FLUSH_INTERVAL_S, ChatBusy, ChatSession
from ember.tui.messages import (
    BackendLoaded,
    BranchStepped,
    ReplyDelta,
    ReplyFailed,
    ReplyFinished,
    ReplyStarted,
)

from .conftest import Backends


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def session(history: History, backends: Backends) -> ChatSession:
    return ChatSession(history, BackendHost(backends), Settings())


def run(session: ChatSession, reply: Generation) -> list[TextualMessage]:
    """Run the worker body on this thread, then hand its messages back as the screen does."""
    posted: list[TextualMessage] = []
    session.run_reply(reply, posted.append)
    for message in posted:
        if isinstance(message, ReplyDelta):
            assert session.take_delta(message)
        elif isinstance(message, ReplyFinished):
            session.finish(message)
        elif isinstance(message, ReplyFailed):
            session.fail(message)
    return posted


def stored(session: ChatSession) -> list[tuple[str, str, str]]:
    return [(m.role, m.status, m.content) for m in session.path()]


def test_a_turn_stores_both_messages_and_posts_loaded_deltas_finished(
    session: ChatSession, backends: Backends
) -> None:
    reply = session.send("Hi there")
    assert session.busy and session.reply is reply
    assert session.conversation is not None and session.conversation.title == "Hi there"
    assert stored(session) == [("user", "complete", "Hi there"), ("assistant", "streaming", "")]
    assert [(m.role, m.content) for m in reply.request.messages or ()] == [("user", "Hi there")]
    assert reply.request.sampling.temperature == Settings().temperature
    posted = run(session, reply)
    assert isinstance(posted[0], BackendLoaded) and posted[0].info.runner == "fake"
    assert isinstance(posted[1], ReplyStarted) and (posted[1].prompt_tokens or 0) > 0
    assert all(isinstance(m, ReplyDelta) for m in posted[2:-1]) and len(posted) > 3
    assert isinstance(posted[-1], ReplyFinished) and posted[-1].finished.reason == "stop"
    assert not session.busy and reply.text == "Hello **there**, friend."
    assert stored(session)[-1] == ("assistant", "complete", "Hello **there**, friend.")
    assert session.path()[-1].stats["generated_tokens"] == reply.num_tokens > 0

    second = run(session, session.send("and again"))
    assert not any(isinstance(m, BackendLoaded) for m in second)  # loaded once
    assert len(backends.built) == 1
    request = backends.last.requests[-1]
    assert [m.content for m in request.messages or ()] == [
        "Hi there",
        "Hello **there**, friend.",
        "and again",
    ]


def test_a_streaming_reply_refuses_what_would_lose_it(
    session: ChatSession, history: History, backends: Backends
) -> None:
    first = session.send("one")
    run(session, first)
    backends.script.ttft_s = 60.0  # the reply waits for its first token until aborted
    reply = session.send("two")
    conv_id = session.conversation.id if session.conversation else 0
    before = stored(session)
    for action in (
        lambda: session.send("three"),
        session.regenerate,
        lambda: session.open(None),
        lambda: session.delete(conv_id),
        lambda: session.switch_branch(reply.message_id, -1),
        lambda: session.edit(session.path()[0].id),
    ):
        with pytest.raises(ChatBusy, match="press Esc to stop it first"):
            action()
    assert stored(session) == before and history.conversation(conv_id)
    assert session.stop()
    posted = run(session, reply)  # stopped before it was submitted: aborted at once
    assert isinstance(posted[-1], ReplyFinished) and posted[-1].finished.reason == "abort"
    assert stored(session)[-1][:2] == ("assistant", "stopped") and not session.busy
    assert not session.stop()  # nothing streams now


def test_regenerate_and_switch_branch_and_send_on_the_shown_branch(
    session: ChatSession, backends: Backends
) -> None:
    backends.script.replies = ["first answer", "second answer", "third answer"]
    run(session, session.send("q"))
    regenerated = session.regenerate()
    assert regenerated is not None
    run(session, regenerated)
    shown = session.shown()
    assert shown[-1].message.content == "second answer" and shown[-1].branch == (2, 2)
    assert session.switch_branch(shown[-1].message.id, 1) is None  # no newer alternative
    old_id = session.switch_branch(shown[-1].message.id, -1)
    assert old_id is not None and session.shown()[-1].branch == (1, 2)
    # the next message follows the branch shown now, not the one shown before the switch
    run(session, session.send("follow-up"))
    assert [c for _, _, c in stored(session)] == ["q", "first answer", "follow-up", "third answer"]
    assert session.path()[2].parent_id == old_id


def test_editing_an_earlier_message_branches_from_its_parent(
    session: ChatSession, backends: Backends
) -> None:
    backends.script.echo = True
    run(session, session.send("alpha"))
    run(session, session.send("beta"))
    first_user, first_reply = session.path()[0], session.path()[1]
    assert session.edit(first_reply.id) is None  # a reply is not edited
    assert session.edit(first_user.id) == first_user and session.editing == first_user
    run(session, session.send("gamma"))
    assert session.editing is None
    assert [c for _, _, c in stored(session)] == ["gamma", "You said: gamma"]
    assert session.shown()[0].branch == (2, 2)


def test_bad_chat_settings_keep_the_user_message_and_start_nothing(
    session: ChatSession, history: History
) -> None:
    conv = session.ensure_conversation()
    session.update(settings={**conv.settings, "top_p": 0.0})
    with pytest.raises(
        EmberError, match=r"cannot generate: this chat: setting top_p=0.0: must be in \(0, 1\]$"
    ):
        session.send("hello?")
    assert not session.busy
    assert stored(session) == [("user", "complete", "hello?")]


def test_a_model_that_fails_to_load_posts_one_failure(
    session: ChatSession, backends: Backends
) -> None:
    backends.fail = "no such model: ghost\nsecond line"
    posted = run(session, session.send("hi"))
    assert [type(m) for m in posted] == [ReplyFailed]
    assert isinstance(posted[0], ReplyFailed) and posted[0].reason == "no such model: ghost"
    assert stored(session)[-1] == ("assistant", "error", "") and not session.busy


def test_streamed_text_is_stored_every_flush_interval(history: History, backends: Backends) -> None:
    clock = Clock()
    session = ChatSession(history, BackendHost(backends), Settings(), clock=clock)
    reply = session.send("hi")
    session.take_delta(ReplyDelta(reply.message_id, "a", 1))
    assert session.path()[-1].content == ""  # not yet due
    clock.now += FLUSH_INTERVAL_S
    session.take_delta(ReplyDelta(reply.message_id, "b", 2))
    assert session.path()[-1].content == "ab" and reply.num_tokens == 3
    assert reply.tok_s == pytest.approx(3 / FLUSH_INTERVAL_S)
    assert not session.take_delta(ReplyDelta(reply.message_id + 99, "x", 1))  # not this reply
    session.shutdown()  # quitting keeps the text, marked stopped
    assert stored(session)[-1] == ("assistant", "stopped", "ab") and not session.busy


def test_load_posts_backend_loaded_only_when_it_loads(session: ChatSession) -> None:
    reply = session.send("hi")
    posted: list[TextualMessage] = []
    backend = session.load(reply.options, posted.append)
    assert [type(m) for m in posted] == [BackendLoaded]
    assert session.load(reply.options, posted.append) is backend and len(posted) == 1
    other = dataclasses.replace(reply.options, model="qwen3-0.6b")
    session.load(other, posted.append)
    assert len(posted) == 2 and isinstance(posted[1], BackendLoaded)
    assert posted[1].info.model == "qwen3-0.6b"


def test_use_model_and_model(session: ChatSession) -> None:
    assert session.model == Settings().model and session.conversation is None
    session.use_model("qwen3-0.6b")
    assert session.conversation is not None and session.model == "qwen3-0.6b"
    assert session.send("hi").options.model == "qwen3-0.6b"


def test_delete_the_open_chat_leaves_a_blank_one(session: ChatSession) -> None:
    run(session, session.send("bye"))
    assert session.conversation is not None
    session.delete(session.conversation.id)
    assert session.conversation is None and session.path() == []


def test_typed_messages_validate() -> None:
    with pytest.raises(ValueError, match="step=2"):
        BranchStepped(1, 2)
    with pytest.raises(ValueError, match="num_tokens=-1"):
        ReplyDelta(1, "x", -1)
