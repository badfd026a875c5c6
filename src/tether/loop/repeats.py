"""Repeated turns: a model that asks for the same tool calls again instead of answering.

Small models especially, once they have a tool's result, call the same tool with the same arguments again,
and again. The contract:

* A turn whose calls are exactly those of the turn before (same tools, same arguments, in any order) is a
  repeat. Its calls are not run again: each gets the earlier result back, with a note saying it was already
  answered and that the model should use it.
* The third such turn in a row is not run either (its calls get the earlier results as errors saying so),
  and the run stops with ``consecutive_errors``, after the tools-off summary call, so the answer is built
  from what was gathered.
* Only a whole repeated turn counts. A call repeated after anything else happened (another call in between,
  in the same turn or the one before) runs again: its result may have changed, like a file read again after
  an edit.
* A tool marked ``repeatable`` (its result can change by itself: a clock, a job's status) is always run.
* A call that failed (an error result: a crash, a timeout, a server that went away) is run again when asked
  again: a retry may succeed, and the consecutive-errors guard already bounds retries that keep failing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tether.messages import ToolCall, ToolResult

STOP_AFTER = 3
"""The identical turn, in a row, that stops the run."""


@dataclass(frozen=True, slots=True)
class Repeat:
    """A call not run again: the result it got the turn before; ``last`` when this repeat stops the run."""

    earlier: ToolResult
    last: bool = False


def signature(call: ToolCall) -> str | None:
    """What makes two calls the same: the tool and its arguments (``None`` for unparseable arguments)."""
    if call.arguments is None:
        return None
    return call.name + json.dumps(call.arguments, sort_keys=True, separators=(",", ":"), default=str)


class RepeatTracker:
    """Remembers the previous turn's calls and results, and how many times in a row it was asked again."""

    __slots__ = ("_in_a_row", "_previous", "_previous_keys", "_repeatable", "stopped_on")

    def __init__(self, repeatable: Callable[[str], bool]) -> None:
        self._repeatable = repeatable
        self._previous: dict[str, ToolResult] = {}
        """The previous turn's successful results, by call signature: what a repeat is answered from."""
        self._previous_keys: set[str | None] = set()
        """Every call signature of the previous turn, failed ones included."""
        self._in_a_row = 1
        self.stopped_on: str | None = None
        """The tool whose third identical turn stopped the run."""

    def check(self, calls: Sequence[ToolCall]) -> list[Repeat | None]:
        """Per call: ``None`` to run it, or a :class:`Repeat` (``last`` the third time, which stops the run)."""
        keys = [signature(call) for call in calls]
        repeated = (
            bool(calls)
            and all(key is not None and key in self._previous for key in keys)
            and set(keys) == self._previous_keys
            and not any(self._repeatable(call.name) for call in calls)
        )
        if not repeated:
            self._in_a_row = 1
            return [None] * len(calls)
        self._in_a_row += 1
        last = self._in_a_row >= STOP_AFTER
        if last:
            self.stopped_on = calls[0].name
        return [Repeat(self._previous[key], last) for key in keys if key is not None]

    def record(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> None:
        """A turn that was run becomes the one the next turn is compared with (a repeat keeps the original)."""
        if self._in_a_row > 1:
            return
        self._previous = {}
        self._previous_keys = set()
        for call, result in zip(calls, results, strict=True):
            key = signature(call)
            self._previous_keys.add(key)
            if key is not None and not result.is_error:
                self._previous[key] = result


def repeated_result(call: ToolCall, repeat: Repeat) -> ToolResult:
    """The earlier result, sent again with a short note (a small model copies long ones into its answer).

    The repeat that stops the run is an error result (``permission_denied``), still carrying the earlier
    result, which the model's last answer can use.
    """
    earlier = repeat.earlier
    if repeat.last:
        note = "[Already answered, and asked again: not run. The run stops here.]"
        return ToolResult(call.id, call.name, f"{earlier.content}\n\n{note}", True, "permission_denied")
    note = "[Already answered: this is the same result. Use it; do not call again with these arguments.]"
    return ToolResult(call.id, call.name, f"{earlier.content}\n\n{note}", earlier.is_error, earlier.code)
