"""A paused run on the command line: its pending calls shown, its state kept, the decisions that resume it.

A run whose tool calls wait for a decision (``StopReason.PAUSED``: a call to approve with no one to ask, a tool
whose result comes from outside) ends ``tether run`` with exit 5, its pending calls listed on stderr with the
command that resumes it. Every ``tether run`` is a session, and the session keeps the paused run, so
``tether run --session ID --approve CALL`` resumes it with no file; ``--state-out FILE`` (or ``--json``'s
``state``) keeps the state for ``tether run --resume FILE --approve CALL`` instead. In the chat the same
decisions are the commands ``/approve``, ``/deny`` and ``/result`` (``repl.py``).

:class:`Resume` is what the flags asked; :func:`decisions_of` turns it into the ``Decisions`` of
``Agent.resume``; :func:`read_state` reads a state file. The checks that a decision fits its call (its id, its
kind) are the agent's (``DecisionInvalid``); the command says them in one line, naming the error's code.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.bounded import read_bounded
from tether.paused import Approve, Decision, ExternalResult, PausedRun, PendingCall, Reject
from tether.redaction import Redaction, default_redaction

MAX_STATE_BYTES = 64 * 1024 * 1024
"""The largest state file ``--resume`` reads."""
DENIED = "denied from the command line"
"""The reason a ``--deny`` without ``--reason`` gives the model."""


@dataclass(frozen=True, slots=True)
class Resume:
    """What ``tether run`` was asked to resume with: ``state`` (``--resume``: a file, ``-`` for stdin; ``None``:
    the session's paused run) and the decisions, by call id."""

    state: str | None = None
    approve: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    reason: str = ""
    results: tuple[tuple[str, Any], ...] = ()


def decisions_of(resume: Resume) -> dict[str, Decision]:
    """The decisions of ``resume``: ``Approve`` for each ``--approve``, ``Reject(reason)`` for each ``--deny``,
    ``ExternalResult`` for each ``--result``."""
    decided: dict[str, Decision] = {call_id: Approve() for call_id in resume.approve}
    decided.update((call_id, Reject(resume.reason or DENIED)) for call_id in resume.deny)
    decided.update((call_id, ExternalResult(value)) for call_id, value in resume.results)
    return decided


def read_state(given: str) -> PausedRun:
    """The paused run's state in the file ``given`` (``-``: stdin). ``StateInvalid`` for a text that is not one,
    ``FormatUnsupported`` for a newer format; ``OSError`` for a file that cannot be read."""
    data = sys.stdin.buffer.read() if given == "-" else read_bounded(Path(given).expanduser(), MAX_STATE_BYTES)
    return PausedRun.from_json(data)


def write_state(path: str, state: PausedRun) -> None:
    """``--state-out``: the state written to ``path`` whole (a reader never sees half of it)."""
    target = Path(path).expanduser()
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(state.to_json() + "\n", encoding="utf-8")
    partial.replace(target)


def pending_json(pending: Iterable[PendingCall], redaction: Redaction | None = None) -> list[dict[str, Any]]:
    """The pending calls as ``--json`` lists them: ``id``, ``tool``, ``arguments`` (secret-named ones ``***``),
    ``reason``, ``kind``, ``digest``."""
    redaction = redaction or default_redaction()
    return [
        {
            "id": call.id,
            "tool": call.tool,
            "arguments": redaction.arguments(call.arguments),
            "reason": redaction.text(call.reason),
            "kind": call.kind,
            "digest": call.digest,
        }
        for call in pending
    ]


def how_to_resume(pending: Sequence[PendingCall], *, session_id: str | None, state_file: str | None) -> str:
    """The command that resumes the run, with a decision for each pending call to edit: ``--resume FILE`` when
    its state was written to one, else ``--session ID``; a run in no session, with no file, can be resumed only
    from its state (``--json``'s, or ``--state-out``'s the next time), which the line says."""
    decide = " ".join(
        f"--approve {call.id}" if call.kind == "approval" else f"--result {call.id}=JSON" for call in pending
    )
    if state_file is None and session_id is None:
        return f"this run is in no session: resume it from its state: tether run --resume STATE.json {decide}"
    where = f"--resume {shlex.quote(state_file)}" if state_file else f"--session {session_id}"
    return f"resume it: tether run {where} {decide}  (or --deny ID --reason TEXT)"


def parse_result(text: str) -> Any:
    """A result typed in the chat (``/result ID VALUE``): JSON when it is, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text
