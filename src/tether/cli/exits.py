"""The exit codes of ``tether run`` (and of the other commands where they apply).

0: the run answered (``complete``, ``done_tool``, ``ask_user``; an answer still cut at the output limit too,
since the model did answer: it is marked ``degraded`` instead, with ``finish_reason`` ``length``); 1: a
configuration problem (the message names the key and where it was set; for ``tether doctor``, a check failed;
for ``tether probe``, the server is not usable); 2: a usage error (click's); 3: a guard stopped the run
(``max_turns``, ``max_tool_calls``, ``consecutive_errors``, ``invalid_response``, ``invalid_output``, ``budget``,
``timeout``, ``guardrail``); 4: the run failed (``error``); 5: the run paused (``paused``): tool calls wait
for a person's decision or an outside result, listed with how to resume the run (``tether run --session ID
--approve CALL``, or ``--resume STATE.json``); 130: cancelled (Ctrl-C), as a shell reports a process ended by
SIGINT. A paused run resumed with a state that cannot be read or decisions that do not fit its pending calls
exits 1 too, naming the error's code (``state_invalid``, ``format_unsupported``, ``decision_invalid``).
"""

from __future__ import annotations

OK = 0
CONFIG = 1
USAGE = 2
GUARD = 3
ERROR = 4
PAUSED = 5
CANCELLED = 130

_BY_STOP = {
    "complete": OK,
    "done_tool": OK,
    "ask_user": OK,
    "max_turns": GUARD,
    "max_tool_calls": GUARD,
    "consecutive_errors": GUARD,
    "invalid_response": GUARD,
    "invalid_output": GUARD,
    "budget": GUARD,
    "timeout": GUARD,
    "guardrail": GUARD,
    "error": ERROR,
    "paused": PAUSED,
    "cancelled": CANCELLED,
}


def exit_code(stop_reason: str) -> int:
    """The exit code for a run that stopped for ``stop_reason`` (a ``StopReason`` or its value)."""
    return _BY_STOP.get(str(stop_reason), ERROR)
