"""What the model is shown: the history it receives, and the few messages the loop itself writes.

History is cut only at a user message, so a tool call and its result are always kept or dropped together.
The loop's own messages (a correction after an unusable answer, the request for a final summary) are sent
with one request and not stored: the transcript holds only what the user and the model said.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.limits import StopReason
from tether.messages import Message


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


def correction(problem: str, *, answer_only: bool = False) -> Message:
    """The message sent once after an unusable answer, telling the model what went wrong (and, when it may
    only answer, that no tool can be called)."""
    if answer_only:
        return Message.user(
            f"Your previous reply could not be used: {problem}. No tools can be called now: reply with your "
            "answer to the request in text, using the tool results you have."
        )
    return Message.user(
        f"Your previous reply could not be used: {problem}. "
        "Reply again: either answer the request in text, or call one of the available tools with complete, "
        "valid JSON arguments."
    )


SUMMARY_REQUEST = (
    "You have reached the limit of steps for this task and can no longer call tools. Using only what you "
    "have found so far, give your best final answer to the original request now. If it is incomplete, "
    "say what is missing."
)


def summary_request() -> Message:
    """The message of the final, tools-off call made when a step limit stops the run."""
    return Message.user(SUMMARY_REQUEST)


_UNANSWERED = "before the model gave a final answer."
_FALLBACKS = {
    StopReason.MAX_TURNS: "The run stopped after reaching its turn limit ({detail}) " + _UNANSWERED,
    StopReason.MAX_TOOL_CALLS: "The run stopped after reaching its tool-call limit ({detail}) " + _UNANSWERED,
    StopReason.CONSECUTIVE_ERRORS: "The run stopped because {detail}, " + _UNANSWERED,
    StopReason.TIMEOUT: "The run stopped on a timeout ({detail}) " + _UNANSWERED,
    StopReason.CANCELLED: "The run was cancelled ({detail}) " + _UNANSWERED,
    StopReason.INVALID_RESPONSE: "The run stopped because the model gave {detail}.",
    StopReason.BUDGET: "The run stopped because its budget was used up ({detail}) " + _UNANSWERED,
    StopReason.ERROR: "The run stopped on an error ({detail}) " + _UNANSWERED,
}


def fallback_text(reason: StopReason, detail: str) -> str:
    """A fixed answer for a run that ended without any text from the model: it says why."""
    template = _FALLBACKS.get(reason, "The run stopped ({detail}) without an answer.")
    return template.format(detail=detail)
