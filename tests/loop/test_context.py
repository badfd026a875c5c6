"""History shaping (never orphans a tool result, never opens with the model) and the loop's own messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.limits import StopReason
from tether.loop.context import SUMMARY_REQUEST, correction, fallback_text, shape_history, summary_request
from tether.messages import Message, ToolCall, ToolResult, transcript_problems


def call_round(call_id: str) -> list[Message]:
    """An assistant message with one tool call and the tool message answering it."""
    return [
        Message("assistant", (ToolCall(call_id, "read", {}),)),
        Message("tool", (ToolResult(call_id, "read", "data"),)),
    ]


# A realistic history: two user requests, each answered after tool calls.
HISTORY = [
    Message.user("first"),  # 0
    *call_round("a"),  # 1, 2
    *call_round("b"),  # 3, 4
    Message.assistant("first answer"),  # 5
    Message.user("second"),  # 6
    *call_round("c"),  # 7, 8
    Message.assistant("second answer"),  # 9
]


def test_none_keeps_every_message() -> None:
    assert shape_history(HISTORY, None) == tuple(HISTORY)


def test_a_history_within_the_limit_is_kept_whole() -> None:
    assert shape_history(HISTORY, len(HISTORY)) == tuple(HISTORY)


def test_the_cut_falls_on_the_first_user_message_inside_the_window() -> None:
    shaped = shape_history(HISTORY, 5)
    assert shaped == tuple(HISTORY[6:])
    assert shaped[0] == Message.user("second")


def test_a_window_that_starts_on_a_tool_result_is_never_cut_there() -> None:
    # A window of 6 would start at message 4, the tool result of call 'b'.
    shaped = shape_history(HISTORY, 6)
    assert shaped[0].role == "user"
    assert transcript_problems(shaped) == []


def test_without_a_user_message_in_the_window_it_falls_back_to_the_last_user_message() -> None:
    history = [Message.user("old"), Message.user("task"), *call_round("a"), *call_round("b"), *call_round("c")]
    shaped = shape_history(history, 2)
    assert shaped == tuple(history[1:])


def test_a_history_without_user_messages_is_kept_whole() -> None:
    history = [Message.assistant("a"), Message.assistant("b"), Message.assistant("c")]
    assert shape_history(history, 1) == tuple(history)


@st.composite
def valid_histories(draw: st.DrawFn) -> list[Message]:
    """Exchanges of a user message, some tool-call rounds (parallel calls included) and maybe an answer."""
    history: list[Message] = []
    ids = 0
    for rounds in draw(st.lists(st.lists(st.integers(1, 3), max_size=3), min_size=1, max_size=5)):
        history.append(Message.user(f"request {len(history)}"))
        for width in rounds:
            batch = [f"call{ids + n}" for n in range(width)]
            ids += width
            history.append(Message("assistant", tuple(ToolCall(i, "t", {}) for i in batch)))
            history.append(Message("tool", tuple(ToolResult(i, "t", "r") for i in batch)))
        if draw(st.booleans()):
            history.append(Message.assistant("answer"))
    return history


@settings(deadline=None)  # timing varies with the machine; no deadline, no flakiness
@given(valid_histories(), st.integers(min_value=1, max_value=20))
def test_shaped_history_is_a_valid_suffix_that_opens_with_the_user(history: list[Message], limit: int) -> None:
    shaped = shape_history(history, limit)
    assert shaped == tuple(history[len(history) - len(shaped) :])
    assert shaped[0].role == "user"
    assert transcript_problems(shaped) == []


@settings(deadline=None)
@given(valid_histories(), st.integers(min_value=1, max_value=20))
def test_shaped_history_keeps_at_most_the_limit_when_a_user_message_is_in_the_window(
    history: list[Message], limit: int
) -> None:
    window = history[-limit:]
    shaped = shape_history(history, limit)
    if any(m.role == "user" for m in window):
        assert len(shaped) <= limit
        first_user = next(i for i, m in enumerate(window) if m.role == "user")
        assert shaped == tuple(window[first_user:])
    else:
        last_user = max(i for i, m in enumerate(history) if m.role == "user")
        assert shaped == tuple(history[last_user:])


# --- the loop's own messages --------------------------------------------------------------------------------


def test_correction_is_a_user_message_that_names_the_problem() -> None:
    message = correction("the reply was empty")
    assert message.role == "user"
    assert "the reply was empty" in message.text


def test_summary_request_is_a_user_message_asking_for_a_final_answer_without_tools() -> None:
    message = summary_request()
    assert message.role == "user"
    assert message.text == SUMMARY_REQUEST
    assert "final answer" in message.text


@pytest.mark.parametrize("reason", list(StopReason))
def test_fallback_text_mentions_the_detail_of_every_stop_reason(reason: StopReason) -> None:
    detail = "a detail only this test writes"
    assert detail in fallback_text(reason, detail)


def test_fallback_texts_say_which_limit_stopped_the_run() -> None:
    assert "turn limit" in fallback_text(StopReason.MAX_TURNS, "20 turns")
    assert "tool-call limit" in fallback_text(StopReason.MAX_TOOL_CALLS, "100 tool calls")
    assert "budget" in fallback_text(StopReason.BUDGET, "$1")
    assert "cancelled" in fallback_text(StopReason.CANCELLED, "by the user")
