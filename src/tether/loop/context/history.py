"""The history the model is shown: the transcript a run starts from, and where it may be cut.

A run's transcript keeps every message; the model is sent its *view*: the system prompt, then everything from
the last compaction marker on (``tether.messages.model_view``), shaped to ``Limits.max_history_messages``.
History is cut only between whole messages and never before a ``tool`` message, so a tool call and its
result are always kept or dropped together, and an assistant message (with its thinking blocks and their
signatures) is kept or dropped whole: every provider accepts what is left.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from tether.errors import SessionInvalid
from tether.loop.arguments import bound_call
from tether.messages import Message, ToolCall, cancelled_result, open_tool_calls, transcript_problems


def prepare_history(system: str | None, history: Sequence[Message]) -> list[Message]:
    """The transcript a run starts from: the system prompt once, then the history, checked.

    The agent's system prompt replaces one stored in the history. Tool calls left without results at the end
    (a run that crashed mid-turn) are closed with ``cancelled`` results; any other problem raises
    ``session_invalid``. A stored call whose arguments nest deeper than ``MAX_ARGUMENT_DEPTH`` is kept without
    them (``bound_call``), as the accumulator keeps a new one, so the history can still be sent and saved.
    """
    if not history:  # a new conversation: nothing to check (the commonest start, and a run makes one each)
        return [Message.system(system)] if system is not None else []
    body = [_bounded(message) for message in history]
    stored_system = body.pop(0) if body and body[0].role == "system" else None
    if open_calls := open_tool_calls(body):
        results = tuple(cancelled_result(call, "no result was recorded") for call in open_calls)
        body.append(Message("tool", results))
    if problems := transcript_problems(body):
        raise SessionInvalid("history is not a valid transcript: " + "; ".join(problems[:3]))
    head = Message.system(system) if system is not None else stored_system
    return ([head] if head is not None else []) + body


def unrunnable(transcript: Sequence[Message], body_start: int) -> str | None:
    """Why ``transcript`` cannot be run as it is, without a new prompt (``None``: it can). A model call may
    follow only a user message or tool results: after the model's own answer there is nothing to answer, and
    an empty conversation asks nothing. Calls left open were closed by :func:`prepare_history` already."""
    if len(transcript) <= body_start:
        return "a run without a prompt runs its history as it is, and the history is empty: give a prompt"
    last = transcript[-1].role
    if last in ("user", "tool"):
        return None
    return (
        "a run without a prompt runs its history as it is, so the history must end where the model speaks next "
        f"(a user message or tool results), and it ends with an {last} message: give a prompt to continue it"
    )


def _bounded(message: Message) -> Message:
    """``message`` with its tool calls' arguments bounded in depth (:func:`bound_call`); itself if none was."""
    if message.role != "assistant":
        return message
    parts = tuple(bound_call(part) if type(part) is ToolCall else part for part in message.parts)
    if all(new is old for new, old in zip(parts, message.parts, strict=True)):
        return message
    return replace(message, parts=parts)


def shape_history(messages: Sequence[Message], max_messages: int | None) -> tuple[Message, ...]:
    """The most recent messages, at most ``max_messages`` where a clean cut allows it.

    The cut falls on the first user message inside the window; without one, on the last user message
    (which keeps more than asked rather than orphan a tool result or open with the model's turn).
    """
    if max_messages is None or len(messages) <= max_messages:
        return tuple(messages)
    window_start = len(messages) - max_messages
    last_user = None
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            if index < window_start:
                return tuple(messages[last_user if last_user is not None else index :])
            last_user = index
    return tuple(messages[last_user:]) if last_user is not None else tuple(messages)


def cut_points(messages: Sequence[Message], start: int, end: int) -> list[int]:
    """Indices in ``(start, end)`` where ``messages`` may be cut: before a user or assistant message.

    Everything before such an index is a complete exchange (no call waits for its result), so the part
    before can be summarized and the part after kept, each valid on its own.
    """
    return [index for index in range(start + 1, end) if messages[index].role != "tool"]
