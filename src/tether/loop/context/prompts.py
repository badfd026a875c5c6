"""The few messages the loop itself writes to the model, and the answers it gives when the model gave none.

The loop's own requests (a correction after an unusable answer, the request for a final answer after a
limit, the request for a summary when the history is compacted) are sent with one request and not stored:
the transcript holds only what the user and the model said, and compaction markers (``messages.py``).
"""

from __future__ import annotations

from tether.limits import StopReason
from tether.messages import Message


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


CONTINUATION_REQUEST = (
    "Your answer was cut off at the output limit. Continue it from exactly where it stopped: do not repeat "
    "anything you already wrote and do not start over. Keep the rest short enough to finish within the limit."
)


def continuation_request() -> Message:
    """The message of a tools-off call that asks the model to go on with an answer cut at the output limit
    (``loop/continuation.py``)."""
    return Message.user(CONTINUATION_REQUEST)


COMPACTION_REQUEST = (
    "The conversation so far is about to be replaced by a summary, to fit the context window. Write that "
    "summary now, for yourself, so that you can carry on the task from it alone. Do not call tools. Include: "
    "the user's requests and goals, word for word where it matters; the constraints and decisions made; what "
    "has been done and found (names, paths, values, commands, errors and their fixes); what is in progress and "
    "what remains to do. Be complete but concise: plain text or short bullet points, no preamble."
)


def compaction_request(instructions: str | None = None) -> Message:
    """The message of the tools-off call that asks for a summary of the conversation (``Compaction``)."""
    return Message.user(instructions or COMPACTION_REQUEST)


def dropped_summary(count: int) -> str:
    """The summary a compaction stands on when the model could not write one: it says what was lost."""
    return (
        f"({count} earlier messages were removed to fit the context window; no summary of them could be "
        "made. Ask the user if something you need from them is missing.)"
    )


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
    StopReason.GUARDRAIL: "{detail}",
}


def fallback_text(reason: StopReason, detail: str) -> str:
    """A fixed answer for a run that ended without any text from the model: it says why."""
    template = _FALLBACKS.get(reason, "The run stopped ({detail}) without an answer.")
    return template.format(detail=detail)
