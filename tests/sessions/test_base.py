"""Session values, ids, titles and the transcript check every store runs on load."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tether.errors import SessionInvalid
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.sessions import Session, check_session_id, new_session_id, suggest_title, validate_session
from tether.usage import Usage

CALL = Message("assistant", (ToolCall("c1", "add", {"a": 1}), ToolCall("c2", "add", {"a": 2})))
RESULTS = Message("tool", (ToolResult("c1", "add", "1"), ToolResult("c2", "add", "2")))

# --- ids ------------------------------------------------------------------------------------------------------


def test_new_session_ids_are_short_valid_file_names_that_sort_by_creation_time() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    ids = [new_session_id() for _ in range(50)]
    after = datetime.now(UTC)

    assert len(set(ids)) == 50
    for session_id in ids:
        assert check_session_id(session_id) == session_id
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{8}", session_id)
        stamp = datetime.strptime(session_id[:15], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
        assert before <= stamp <= after
    older = f"{(before - timedelta(seconds=1)):%Y%m%d-%H%M%S}-ffffffff"
    assert all(older < session_id for session_id in ids)


@pytest.mark.parametrize("good", ["a", "Z9", "20260315-142233-7f3a9c01", "my_chat.v2", "x" * 128, uuid.uuid4().hex])
def test_ids_of_letters_digits_dots_dashes_and_underscores_are_accepted(good: str) -> None:
    assert check_session_id(good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "a\\b", ".bak", "-rf", "_x", "x" * 129, "a b", "ü"])
def test_ids_with_separators_leading_dots_or_other_characters_are_refused(bad: str) -> None:
    with pytest.raises(SessionInvalid, match="session id") as raised:
        check_session_id(bad)
    assert raised.value.details["session_id"] == bad


# --- Session --------------------------------------------------------------------------------------------------


def test_a_new_session_has_a_fresh_id_and_equal_utc_creation_and_update_times() -> None:
    session = Session.new(model="openai:gpt-4o-mini", title="t", messages=[Message.user("hi")])

    check_session_id(session.id)
    assert session.created_at == session.updated_at
    assert session.created_at.tzinfo is UTC
    assert session.messages == (Message.user("hi"),)
    assert session.usage == Usage()


def test_updated_replaces_the_given_fields_and_moves_updated_at_forward() -> None:
    old = Session("s", created_at=datetime(2020, 1, 1, tzinfo=UTC), updated_at=datetime(2020, 1, 1, tzinfo=UTC))

    new = old.updated(messages=[Message.user("hi")], usage=Usage(requests=1), title="Hi")

    assert (new.id, new.created_at, new.model) == ("s", old.created_at, "")
    assert (new.messages, new.usage, new.title) == ((Message.user("hi"),), Usage(requests=1), "Hi")
    assert new.updated_at > old.updated_at


def test_timestamps_are_normalized_to_utc_and_naive_ones_refused() -> None:
    local = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    session = Session("s", created_at=local, updated_at=local)
    assert session.created_at.tzinfo is UTC
    assert session.created_at.hour == 10

    with pytest.raises(ValueError, match="timezone-aware"):
        Session("s", created_at=datetime(2026, 1, 1))


def test_messages_given_as_a_list_are_kept_as_a_tuple() -> None:
    session = Session("s", messages=[Message.user("hi")])  # type: ignore[arg-type]
    assert session.messages == (Message.user("hi"),)
    assert type(session.messages) is tuple


def test_a_title_is_the_first_user_message_on_one_line_cut_to_the_limit() -> None:
    messages = [Message.system("sys"), Message.user("  Fix   the\nbug in parser.py  "), Message.user("later")]
    assert suggest_title(messages) == "Fix the bug in parser.py"
    assert suggest_title([Message.user("word " * 30)], limit=20) == "word word word word…"
    assert suggest_title([Message.system("only a system prompt")]) == ""


# --- validate_session -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param((), id="empty"),
        pytest.param((Message.system("s"),), id="system-only"),
        pytest.param((Message.system("s"), Message.user("q"), Message.assistant("a")), id="plain"),
        pytest.param((Message.user("q"), CALL, RESULTS, Message.assistant("3")), id="answered-calls"),
        pytest.param((Message.user("q"), CALL), id="unanswered-tail"),
        pytest.param((Message.user("q"), CALL, Message("tool", RESULTS.parts[:1])), id="half-answered-tail"),
    ],
)
def test_valid_transcripts_pass_unchanged(messages: tuple[Message, ...]) -> None:
    assert validate_session(messages, "here") == messages


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        pytest.param((Message.assistant("a"),), r"message 0: .*starts with 'assistant'", id="first-is-assistant"),
        pytest.param((Message.system("s"), RESULTS), r"message 1: .*starts with 'tool'", id="first-is-tool"),
        pytest.param(
            (Message.user("q"), CALL, Message.user("next")), r"message 2: calls without results", id="call-no-result"
        ),
        pytest.param(
            (Message.user("q"), CALL, Message("tool", RESULTS.parts[:1]), Message.assistant("a")),
            r"message 3: calls without results before it: \['add#c2'\]",
            id="one-call-no-result",
        ),
        pytest.param(
            (Message.user("q"), Message("tool", (ToolResult("zz", "f", "r"),))),
            r"message 1: result for unknown or answered call 'zz'",
            id="result-without-call",
        ),
        pytest.param(
            (Message.user("q"), CALL, RESULTS, RESULTS),
            r"message 3: result for unknown or answered call 'c1'",
            id="answered-twice",
        ),
        pytest.param(
            (Message.user("q"), CALL, Message("user", RESULTS.parts)),
            r"message 2: tool results in a 'user' message",
            id="results-in-user-message",
        ),
        pytest.param(
            (Message.user("q"), Message.system("late")),
            r"message 1: a system message after the conversation started",
            id="late-system",
        ),
        pytest.param(
            (Message.user("q"), Message("assistant", (ToolCall("c1", "f", {}), ToolCall("c1", "f", {})))),
            r"message 1: duplicate tool call id 'c1'",
            id="duplicate-call-id",
        ),
    ],
)
def test_invalid_transcripts_raise_session_invalid_naming_the_source_and_the_message(
    messages: tuple[Message, ...], problem: str
) -> None:
    with pytest.raises(SessionInvalid, match=r"^\[session_invalid\] sessions/s1\.json: not a valid transcript: ") as e:
        validate_session(messages, "sessions/s1.json")
    assert re.search(problem, e.value.message), e.value.message


def test_consecutive_user_messages_are_merged_in_order_and_numbered_as_stored_in_errors() -> None:
    messages = (Message.user("a"), Message.user("b"), Message.user("c"), Message.assistant("x"), Message.user("d"))
    assert validate_session(messages, "src") == (
        Message("user", (Text("a"), Text("b"), Text("c"))),
        Message.assistant("x"),
        Message.user("d"),
    )
    bad = (Message.user("a"), Message.user("b"), Message("tool", (ToolResult("zz", "f", "r"),)))
    with pytest.raises(SessionInvalid, match="message 2: result for unknown"):
        validate_session(bad, "src")


def test_consecutive_user_messages_with_different_provider_data_are_refused_not_merged() -> None:
    messages = (Message("user", (Text("a"),), {"x": 1}), Message("user", (Text("b"),), {"x": 2}))
    with pytest.raises(SessionInvalid, match="src: not a valid transcript: message 1: a second user message"):
        validate_session(messages, "src")
    same = (Message("user", (Text("a"),), {"x": 1}), Message("user", (Text("b"),), {"x": 1}))
    assert validate_session(same, "src") == (Message("user", (Text("a"), Text("b")), {"x": 1}),)
