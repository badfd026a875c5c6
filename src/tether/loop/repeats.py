"""Repeated turns: a model that asks for the same tool calls again instead of answering.

Small models especially, once they have a tool's result, call the same tool with the same arguments again,
and again. The contract:

* A turn whose calls are exactly those of the turn before (same tools, same arguments, in any order) is a
  repeat. Its calls are not run again: each gets the earlier result back, as it was (code ``repeated``,
  not an error). No note is added: a small model copies a note into its answer, and the next request makes
  sure the model uses the result rather than asking again.
* The model already has what it asked for, so the next request asks it to answer and only to answer: in JSON
  action mode the schema allows the final answer alone, natively ``tool_choice="none"``
  (``engine.Run._turns``). If even that answer is unusable, the run ends with an answer built from the
  results the model had (:func:`answer_from_results`), never with the calls asked a third time.
* Only a whole repeated turn counts. A call repeated after anything else happened (another call in between,
  in the same turn or the one before) runs again: its result may have changed, like a file read again after
  an edit.
* A tool marked ``repeatable`` (its result can change by itself: a clock, a job's status) is always run.
* A call that failed (an error result: a crash, a timeout, a server that went away) is run again when asked
  again: a retry may succeed, and the consecutive-errors guard already bounds retries that keep failing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from tether.messages import ToolCall, ToolResult

REPEATED = "repeated"
"""``ToolResult.code`` of a call answered from the earlier result instead of being run again."""


class Repeat(msgspec.Struct, frozen=True, gc=False):
    """A call not run again, and the result it got the turn before."""

    earlier: ToolResult


Verdict = str | Repeat | ToolResult | None
"""What a run decided of a call before the executor runs it: ``None`` to run it, a :class:`Repeat`, why it may
not run (the guard's), or its result already (a typed output's call, ``loop/outputs.py``)."""


_CANONICAL = msgspec.json.Encoder(order="sorted", enc_hook=str).encode
"""Arguments as one text whatever their key order (arguments read from JSON hold no cycle)."""


def signature(call: ToolCall) -> str | None:
    """What makes two calls the same: the tool and its arguments (``None`` for unparseable arguments)."""
    if call.arguments is None:
        return None
    return call.name + _CANONICAL(call.arguments).decode()


_SCANNED = 16
"""Up to this many calls in the previous turn, a turn is first compared call by call with it, which tells nearly
every turn that is no repeat apart without encoding anything; a longer turn goes straight to the signatures (a
scan of every pair would grow with the square of the calls)."""


class RepeatTracker:
    """Remembers the previous turn's calls and their results, to recognise a turn that asks for them again.

    Nothing is computed when a turn is recorded: most turns are no repeat of the one before, and are told apart
    in :meth:`check` by comparing arguments as values. Only a turn that may be a repeat gets its calls'
    signatures (the canonical JSON a repeat is decided on), and the previous turn's."""

    __slots__ = ("_previous_calls", "_previous_results", "_repeatable")

    def __init__(self, repeatable: Callable[[str], bool]) -> None:
        self._repeatable = repeatable
        self._previous_calls: Sequence[ToolCall] = ()
        """The previous turn's calls, in the model's order (none before the first)."""
        self._previous_results: Sequence[ToolResult] = ()
        """Their results, in the same order."""

    def check(self, calls: Sequence[ToolCall]) -> list[Repeat] | None:
        """A :class:`Repeat` per call when the turn repeats the one before, else ``None`` (run them all).

        Plain loops, no generator expressions: this runs on every tool turn."""
        before, results = self._previous_calls, self._previous_results
        if not calls or not before:
            return None
        if len(before) <= _SCANNED:  # a repeated call has equal arguments (the converse needs the signatures)
            for call in calls:
                if not _asked_before(call, before, results):
                    return None
        previous: dict[str, ToolResult] = {}
        previous_keys: set[str | None] = set()
        for call, result in zip(before, results, strict=True):
            key = signature(call)
            previous_keys.add(key)
            if key is not None and not result.is_error:
                previous[key] = result
        keys = [signature(call) for call in calls]
        for key in keys:
            if key is None or key not in previous:
                return None
        if set(keys) != previous_keys:
            return None
        repeatable = self._repeatable
        for call in calls:
            if repeatable(call.name):
                return None
        return [Repeat(previous[key]) for key in keys if key is not None]

    def record(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> None:
        """A turn that was run becomes the one the next turn is compared with (a repeat keeps the original)."""
        for result in results:
            if result.code != REPEATED:
                break
        else:  # every result was an earlier one sent again (or there was none)
            if results:
                return
        self._previous_calls, self._previous_results = calls, results


def _asked_before(call: ToolCall, before: Sequence[ToolCall], results: Sequence[ToolResult]) -> bool:
    """Whether the previous turn made a call of the same tool with equal arguments that succeeded: what a
    repeated call needs, told without encoding (equal signatures mean equal arguments; a NaN equals no other
    NaN, but arguments read from JSON share the one ``json`` makes)."""
    arguments = call.arguments
    if arguments is None:
        return False
    name = call.name
    for position, earlier in enumerate(before):
        if earlier.name == name and earlier.arguments == arguments and not results[position].is_error:
            return True
    return False


def repeated_result(call: ToolCall, repeat: Repeat) -> ToolResult:
    """The earlier result, sent again under this call's id."""
    return ToolResult(call.id, call.name, repeat.earlier.content, False, REPEATED)


def answer_from_results(results: Sequence[ToolResult]) -> str:
    """The best-effort answer of a run whose model repeated its calls and then could not answer: what those
    calls returned, said plainly, each result once (a turn may ask for the same call twice)."""
    once: dict[tuple[str, str], ToolResult] = {}
    for result in results:
        once.setdefault((result.name, result.content), result)
    results = list(once.values())
    if len(results) == 1:
        return f"The model gave no final answer. Its last tool call ({results[0].name}) returned:\n\n" + (
            results[0].content
        )
    blocks = "\n\n".join(f"{result.name}:\n{result.content}" for result in results)
    return f"The model gave no final answer. Its last tool calls returned:\n\n{blocks}"
