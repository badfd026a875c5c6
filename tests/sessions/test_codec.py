"""A session saved after every turn has each message encoded and checked once (``sessions/codec.py``), on every
store of ``conftest.py``: a long run's saves cost its new messages, not its whole transcript again."""

from __future__ import annotations

from typing import Any

import pytest

from tether.errors import SessionInvalid
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.sessions import Session, SessionStore, codec


def transcript(turns: int) -> list[Message]:
    """A prompt and ``turns`` tool turns, as a run's transcript grows."""
    messages = [Message.user("Add the numbers.")]
    for turn in range(turns):
        call = ToolCall(f"call_{turn}", "add", {"a": turn, "b": 1}, f'{{"a": {turn}, "b": 1}}')
        messages.append(Message("assistant", (Text("Adding."), call)))
        messages.append(Message("tool", (ToolResult(f"call_{turn}", "add", str(turn + 1)),)))
    return messages


async def test_a_session_saved_every_turn_encodes_and_checks_each_message_once(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[Message] = []
    checked_row = codec._checked_row

    def counted(message: Message, where: str) -> str:
        checked.append(message)
        return checked_row(message, where)

    monkeypatch.setattr(codec, "_checked_row", counted)
    messages = transcript(6)
    session = Session.new(id="s1", model="openai:gpt-4o-mini")
    for end in range(1, len(messages) + 1, 2):  # saved after each turn, every message so far
        await store.save(session.updated(messages=tuple(messages[:end])))
    assert [id(message) for message in checked] == [id(message) for message in messages]
    loaded = await store.load("s1")
    assert loaded.messages == tuple(messages)


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


async def test_a_message_that_cannot_be_stored_is_refused_at_every_save(store: SessionStore) -> None:
    unstorable = Message("user", (Text("hi"),), provider_data={"x": deep(5000)})
    session = Session.new(id="s1", model="openai:gpt-4o-mini").updated(messages=(unstorable,))
    for _ in range(2):  # a refusal is not kept as if the message had been checked
        with pytest.raises(SessionInvalid, match="message 0 cannot be stored"):
            await store.save(session)
