"""The soft-fail answer: what a question that a limit stopped still tells the user.

A question stopped by a limit (its steps, its total time, a provider call's timeout, errors, a cancel) does
not end on a fixed sentence. Its answer is what the model said so far (when it said anything), then one line
naming the limitation, then the findings the session confirmed: one sentence per capability call that
completed, built from its envelope (``df`` is a pandas.core.frame.DataFrame; the last exception is KeyError:
'col'), in the order the calls ran, each finding once however many calls confirmed it (a model stuck on a
question asks the same thing again and again). When no call completed, the answer says that nothing was
confirmed. The loop's own best-effort answer to such a question (the results of calls it asked for again,
``loop/repeats.py``) is the same findings in raw form: like the loop's fixed sentence, it gives way to them.
Calls that failed for the model's own reasons (bad arguments, unknown function) confirm nothing and are left
out; an expression that raised is a finding (``x`` raised NameError: ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from msgspec.structs import replace

from tether.events import RunResult
from tether.limits import Limits, StopReason
from tether.loop.context import fallback_text
from tether.loop.repeats import answer_from_results
from tether.messages import ToolResult

MAX_FINDINGS = 12
"""Findings listed in a soft-fail answer; the rest are counted."""
MAX_QUOTE = 240
"""Characters of a value quoted in a finding."""
MAX_NAMES = 20
"""Names listed for ``list_globals`` and ``get_dir``."""


@dataclass(frozen=True, slots=True)
class Completed:
    """One capability call that ran: its name, its arguments and the envelope it answered."""

    name: str
    arguments: Mapping[str, Any]
    envelope: Mapping[str, Any]


@dataclass(slots=True)
class CallLog:
    """The capability calls of one question that completed, in the order they ran."""

    calls: list[Completed] = field(default_factory=list)

    def record(self, name: str, arguments: Mapping[str, Any], envelope: Mapping[str, Any]) -> None:
        self.calls.append(Completed(name, dict(arguments), envelope))


def soft_fail(result: RunResult, calls: Sequence[Completed], limits: Limits) -> tuple[RunResult, str]:
    """``result`` with the soft-fail answer as its text when the question ended degraded, and the part of that
    text the model did not stream (to hand on as a last ``TextDelta``); an answered question is unchanged."""
    if not result.degraded:
        return result, ""
    said = result.text.strip()
    if said in _loop_answers(result):
        said = ""  # the loop's own words, not the model's: replaced by the limitation and the findings
    notice = notice_text(result, calls, limits)
    added = f"\n\n{notice}" if said else notice
    return replace(result, text=(result.text.rstrip() if said else "") + added), added


def notice_text(result: RunResult, calls: Sequence[Completed], limits: Limits) -> str:
    """The limitation, then the confirmed findings (or that there are none)."""
    lines = [f"(Stopped before a full answer: {limitation(result, limits)}.)"]
    found = list(dict.fromkeys(line for call in calls if (line := finding(call)) is not None))
    if not found:
        lines.append("Nothing about the session was confirmed before that.")
        return "\n".join(lines)
    lines.append("Confirmed in the session:")
    lines += [f"- {line}" for line in found[:MAX_FINDINGS]]
    if len(found) > MAX_FINDINGS:
        lines.append(f"- and {len(found) - MAX_FINDINGS} more findings")
    return "\n".join(lines)


def _loop_answers(result: RunResult) -> tuple[str, ...]:
    """What the loop answers for a model that gave no answer: its fixed sentence, or (after calls asked for
    again) the results of the last tool message, the model's last request answered."""
    answers = [fallback_text(result.stop_reason, result.detail).strip()]
    last = next((message for message in reversed(result.messages) if message.role == "tool"), None)
    if last is not None:
        results = [part for part in last.parts if isinstance(part, ToolResult)]
        answers.append(answer_from_results(results).strip())
    return tuple(answers)


def limitation(result: RunResult, limits: Limits) -> str:
    """What stopped the question, in words a user reads."""
    reason, detail = result.stop_reason, result.detail
    if reason is StopReason.TIMEOUT:
        deadline = getattr(result.error, "details", {}).get("deadline")
        if deadline == "run_timeout" and limits.run_timeout is not None:
            return f"it used all of its {limits.run_timeout:g} s"
        if deadline == "step_timeout" and limits.step_timeout is not None:
            return f"the model did not finish a step within {limits.step_timeout:g} s"
        return f"the model did not answer in time ({detail})"
    if reason is StopReason.MAX_TURNS:
        return f"it used all of its {limits.max_turns} steps"
    if reason is StopReason.MAX_TOOL_CALLS:
        return f"it reached its limit of {limits.max_tool_calls} function calls"
    if reason is StopReason.CONSECUTIVE_ERRORS:
        return f"the model's function calls kept failing ({detail})"
    if reason is StopReason.INVALID_RESPONSE:
        return f"the model gave no usable answer, even after a corrective retry ({detail})"
    if reason is StopReason.CANCELLED:
        return "the question was cancelled"
    if reason is StopReason.BUDGET:
        return f"its budget ran out ({detail})"
    return f"an error stopped it ({detail})"


def finding(call: Completed) -> str | None:
    """One sentence of what a completed call confirmed, or ``None`` when it confirmed nothing."""
    envelope = call.envelope
    expr = _code(str(call.arguments.get("expr", "")))
    if envelope.get("ok") is not True:
        error = _mapping(envelope.get("error"))
        if error.get("code") != "python_exception":
            return None
        details = _mapping(error.get("details"))
        raised = _exception(details.get("exc_type"), details.get("message") or error.get("message"))
        return f"{expr} raised {raised}" if "expr" in call.arguments else f"{call.name} raised {raised}"
    result = _mapping(envelope.get("result"))
    reader = _READERS.get(call.name)
    return reader(expr, result) if reader is not None else None


def _globals(expr: str, result: Mapping[str, Any]) -> str:
    entries = [_mapping(entry) for entry in result.get("globals") or ()]
    if not entries:
        return "the session defines no names of its own"
    shown = [f"{_code(str(e.get('name')))} ({e.get('type_name')})" for e in entries[:MAX_NAMES]]
    more = f" and {len(entries) - MAX_NAMES} more" if len(entries) > MAX_NAMES else ""
    return f"the session defines {', '.join(shown)}{more}"


def _type(expr: str, result: Mapping[str, Any]) -> str:
    qualified = result.get("qualified") or ".".join(str(p) for p in (result.get("module"), result.get("name")) if p)
    article = "an" if str(qualified)[:1].lower() in "aeiou" else "a"
    return f"{expr} is {article} {qualified}"


def _repr(expr: str, result: Mapping[str, Any]) -> str:
    return f"{expr} is {_code(_quote(str(result.get('repr', ''))))}{_cut(result)}"


def _dir(expr: str, result: Mapping[str, Any]) -> str:
    members = [str(m) for m in result.get("members") or ()]
    public = [m for m in members if not m.startswith("_")] or members
    total = result.get("original_len") or len(members)
    shown = ", ".join(public[:MAX_NAMES]) + (", ..." if len(public) > MAX_NAMES else "")
    return f"{expr} has {total} attributes, among them {shown}" if shown else f"{expr} has no attributes"


def _doc(expr: str, result: Mapping[str, Any]) -> str:
    doc = result.get("doc")
    if not doc:
        return f"{expr} has no docstring"
    first = next((line.strip() for line in str(doc).splitlines() if line.strip()), "")
    return f"the docstring of {expr} begins: {_quote(first)}"


def _eval(expr: str, result: Mapping[str, Any]) -> str:
    text = f"{expr} evaluates to {_code(_quote(str(result.get('value_repr', ''))))}"
    for stream in ("stdout", "stderr"):
        if printed := str(result.get(stream) or "").strip():
            text += f"; it printed {_quote(printed)!r} to {stream}"
    return text


def _last_exception(expr: str, result: Mapping[str, Any]) -> str:
    exception = result.get("exception")
    if not exception:
        return "no exception has been raised in the session"
    raised = _mapping(exception)
    return f"the last exception is {_exception(raised.get('exc_type'), raised.get('message'))}"


_READERS = {
    "list_globals": _globals,
    "get_type": _type,
    "get_repr": _repr,
    "get_dir": _dir,
    "get_doc": _doc,
    "eval_expr": _eval,
    "get_last_exception": _last_exception,
}


def _exception(kind: object, message: object) -> str:
    return f"{kind}: {_quote(str(message))}" if message else str(kind)


def _cut(result: Mapping[str, Any]) -> str:
    return f" (cut; {result.get('original_len')} characters in all)" if result.get("truncated") else ""


def _quote(text: str) -> str:
    return text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 3] + "..."


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else repr(text)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
