"""How a run looks in a terminal: the answer as it streams, everything else as compact one-liners.

The answer's text goes to ``out`` (stdout for ``tether run``, so ``tether run ... > answer.txt`` keeps only
the answer); thinking (dim, each block on lines of its own), tool calls and their results (one line each), the
provider's retries (``retrying in 2.0 s (rate_limited)``, one line each), compactions of the history (one line
each), notes and the closing summary go to ``err`` (stderr). An answer cut at the output limit and continued by
the loop is shown as one answer; one still cut when the run ends is marked on its closing line
(``[complete, degraded, cut off at the output limit] ...``). In the chat both are the same console. A
spinner runs on ``err`` while the model has not sent anything yet, when ``err`` is a terminal. An agent a tool
call runs (``agent.as_tool()``) shows its activity on ``err`` under the call, indented by its depth: its text
when each of its turns ends, its tool calls and their results, and its stop when it was not an answer.
A run that paused closes with ``[paused]`` and one line per call it waits on (its id, the call, what it waits
for and why); the command adds how to resume it.

Everything but the answer goes through the agent's :class:`~tether.redaction.Redaction`
(``renderer.redaction = agent.redaction``): a tool call's secret-named arguments print as ``***``, and so do
bearer tokens, URL passwords and known keys in results and notes.

Nothing here reads input or knows about click; :class:`Renderer` is called with each ``RunEvent`` and is
tested by rendering into a ``StringIO``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.status import Status
from rich.text import Text

from tether.errors import TransportError
from tether.events import (
    Compacted,
    FallbackTaken,
    HandoffTaken,
    ProviderRetry,
    RateLimitWait,
    RunCompleted,
    RunEvent,
    RunResult,
    SubAgentEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingEnded,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.loop.repeats import REPEATED
from tether.messages import ToolCall, ToolResult
from tether.paused import PendingCall
from tether.redaction import Redaction, default_redaction
from tether.usage import Cost, Usage

CALL_WIDTH = 100
"""Characters of a tool call's one-liner, arguments included."""
RESULT_WIDTH = 100
"""Characters of a tool result's one-liner."""
REPEATED_LABEL = "(repeated: answered from the earlier result)"
_ARGUMENT_WIDTH = 40
_NO_ANSWER = frozenset({"error", "cancelled"})
"""Stops whose ``result.text`` is a note about the stop, not an answer: the closing line says it instead."""


def probe_address(provider: object) -> str | None:
    """The model server of ``provider`` as ``tether probe`` takes it (``localhost:11434``, ``https://host``);
    ``None`` for a provider that runs in this process."""
    server = getattr(provider, "server", None)
    if not isinstance(server, tuple) or len(server) != 2 or not server[0]:
        return None
    host, port = server
    host = f"[{host}]" if ":" in host else host
    return f"https://{host}" if port == 443 else f"{host}:{port}"


def make_console(file: IO[str] | None = None, *, stderr: bool = False, **options: Any) -> Console:
    """A rich console that prints text as given: no markup, no highlighting, no emoji, no hard wrapping."""
    return Console(file=file, stderr=stderr, markup=False, highlight=False, emoji=False, soft_wrap=True, **options)


def shorten(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` terminal cells with an ellipsis (a CJK character or an emoji takes
    two cells, so counting characters would overflow the line)."""
    flat = " ".join(text.split())
    return flat if cell_len(flat) <= width else set_cell_size(flat, width - 1).rstrip() + "…"


def describe_call(call: ToolCall, width: int = CALL_WIDTH, redaction: Redaction | None = None) -> str:
    """``write(path='notes.md', content='# Notes…')``: the call on one line, long values cut, secrets hidden
    (``login(user='ann', password='***')``) by ``redaction`` (the default rules when not given)."""
    redaction = redaction or default_redaction()
    if call.arguments is None:
        inside = shorten(redaction.text(call.raw_arguments or ""), _ARGUMENT_WIDTH)
    else:
        shown = redaction.arguments(call.arguments) or {}
        inside = ", ".join(f"{key}={_value(value)}" for key, value in shown.items())
    return shorten(f"{call.name}({inside})", width)


def waiting_line(pending: Sequence[PendingCall]) -> str:
    """``2 tool calls wait for a decision``."""
    count = len(pending)
    return f"{count} tool call{'s' if count != 1 else ''} wait{'s' if count == 1 else ''} for a decision"


def not_run(result: RunResult) -> bool:
    """Whether a paused ``result`` is a paused session's, asked to run a prompt: the prompt was not run (no
    message was added), the session still waits on the same calls."""
    return result.stop_reason == "paused" and result.first_new_message >= len(result.messages)


def pending_lines(pending: Sequence[PendingCall], redaction: Redaction | None = None) -> list[str]:
    """One line per call a paused run waits on: its id, the call as the tool lines show it (secrets hidden), what
    it waits for and why."""
    redaction = redaction or default_redaction()
    lines = []
    for call in pending:
        shown = describe_call(ToolCall(call.id, call.tool, call.arguments), redaction=redaction)
        waits = "approval" if call.kind == "approval" else "its result from outside"
        why = f" ({shorten(redaction.text(call.reason), RESULT_WIDTH)})" if call.reason else ""
        lines.append(f"  {call.id}  {shown}: waits for {waits}{why}")
    return lines


def _value(value: object) -> str:
    if isinstance(value, str):
        return repr(shorten(value, _ARGUMENT_WIDTH))
    return shorten(json.dumps(value, ensure_ascii=False), _ARGUMENT_WIDTH)


def describe_result(result: ToolResult, width: int = RESULT_WIDTH) -> str:
    """``read: 1  hello (+3 lines)`` or ``write: permission_denied: …``: the result on one line, the same for
    the same output. A call answered from the earlier result says so instead of showing it again."""
    if result.code == REPEATED:
        return f"{result.name}: {REPEATED_LABEL}"
    lines = [line for line in result.content.splitlines() if line.strip()]
    first = lines[0] if lines else "(no output)"
    more = f" (+{len(lines) - 1} line{'s' if len(lines) > 2 else ''})" if len(lines) > 1 else ""
    code = f"{result.code}: " if result.is_error and result.code else ""
    head = f"{result.name}: {code}"
    return head + shorten(first, max(width - len(head) - len(more), 10)) + more


def describe_compaction(event: Compacted) -> str:
    """``context compacted: 3,284 → 1,092 tokens (33 messages summarized)``: a compaction on one line, saying
    when the provider's refusal of a request too long for its window is what set it off."""
    what = f"{event.summarized:,} message{'' if event.summarized == 1 else 's'} summarized"
    if event.trimmed:
        what += f", {event.trimmed:,} tool output{'' if event.trimmed == 1 else 's'} shown by reference"
    why = " after the model's context overflowed" if event.reason == "overflow" else ""
    return f"context compacted{why}: {event.tokens_before:,} → {event.tokens_after:,} tokens ({what})"


def describe_handoff(event: HandoffTaken) -> str:
    """``⇢ billing takes over from triage``: the run moved to another agent (``Agent(handoffs=...)``)."""
    return f"⇢ {event.to_agent} takes over from {event.from_agent}"


def describe_retry(event: ProviderRetry) -> str:
    """``retrying in 2.0 s (rate_limited, HTTP 429)``: a retry of the provider's on one line, before its wait."""
    status = f", HTTP {event.status}" if event.status is not None else ""
    return f"retrying in {event.delay:.1f} s ({event.code}{status})"


def describe_fallback(event: FallbackTaken) -> str:
    """``[anthropic:claude-sonnet-4-5 rate_limited → openai:gpt-4.1]``: a fallback's move on one line, before
    the next model is asked."""
    return f"[{event.model} {event.code} → {event.next_model}]"


CACHED_MARK = "[cached]"
"""After a turn whose answer the response cache replayed (``TurnCompleted.cached``)."""

_HELD_BY = {
    "requests": "requests per minute",
    "tokens": "tokens per minute",
    "server": "the server's remaining quota",
    "retry_after": "the server's Retry-After",
}


def describe_wait(event: RateLimitWait) -> str:
    """``waiting 1.2 s for the rate limit (requests per minute)``: a client-side rate limit's wait on one line,
    before it."""
    return f"waiting {event.delay:.1f} s for the rate limit ({_HELD_BY.get(event.reason, event.reason)})"


def _mark(result: ToolResult) -> str:
    return "✗" if result.is_error else "↺" if result.code == REPEATED else "✓"


def _style(result: ToolResult) -> str:
    return "red" if result.is_error else "dim" if result.code == REPEATED else "green"


def is_cut(event: TurnCompleted) -> bool:
    """Whether a turn's answer, used and calling no tool, stopped at the output limit (the loop then asks the
    model to go on with it, ``loop/continuation.py``)."""
    return (
        event.finish_reason == "length"
        and event.status == "completed"
        and not any(type(part) is ToolCall for part in event.message.parts)
    )


def usage_line(usage: Usage, cost: Cost | None) -> str:
    """``1,234 tokens (1,000 in, 234 out), 2 requests, $0.0012``; the cost only when the price is known."""
    parts = [f"{usage.total_tokens:,} tokens ({usage.input_tokens:,} in, {usage.output_tokens:,} out"]
    if usage.cache_read_tokens:
        parts[0] += f", {usage.cache_read_tokens:,} cached"
    parts[0] += ")"
    parts.append(f"{usage.requests} request{'' if usage.requests == 1 else 's'}")
    if cost is not None:
        parts.append(f"${cost.total_usd:.4f}")
    return ", ".join(parts)


class Renderer:
    """Shows the events of runs on two consoles (see the module docstring); call it with each event."""

    def __init__(
        self,
        out: Console,
        err: Console | None = None,
        *,
        text: bool = True,
        stream: bool = True,
        thinking: bool = True,
        spinner: bool = False,
        redaction: Redaction | None = None,
    ) -> None:
        """
        Args:
            out: where the answer's text goes.
            err: where everything else goes; ``out`` when not given.
            text: show the answer (``False`` for ``--json``, which prints it at the end instead).
            stream: print the answer as it comes; ``False`` holds each turn's text and prints it whole, in one
                piece, when the turn ends (``cli.stream``).
            thinking: show the model's thinking, dimmed; hidden when ``False``.
            spinner: show a spinner on ``err`` while waiting for the model, if ``err`` is a terminal.
            redaction: what may be shown of calls, results and notes; set ``renderer.redaction`` to the agent's
                (``agent.redaction``) once it exists. The default rules, without known keys, until then.
        """
        self.out = out
        self.err = err if err is not None else out
        self.text = text
        self.stream = stream
        self.thinking = thinking
        self.spinner = spinner and self.err.is_terminal
        self.redaction = redaction or default_redaction()
        self._calls: dict[str, ToolCall] = {}
        """Calls started and not answered yet: their secret values are hidden in their results' lines too."""
        self._open: dict[int, bool] = {}
        """Per console: the last thing printed did not end its line."""
        self._in_thinking = False
        self._status: Status | None = None
        self._streamed: list[str] = []
        self._held: list[str] = []
        """The current turn's text, not printed yet (``stream=False``)."""
        self._rejected: str | None = None
        """Why the last turn's answer was not used; shown unless the run's closing line says the same."""
        self._cut = False
        """The last turn's answer stopped at the output limit: the next turn (the loop asks the model to go on)
        continues it on the same line, without a note or a spinner between its parts."""
        self._sub_text: dict[tuple[str, ...], list[str]] = {}
        """Per agent run as a tool (by its path), the text of its turn under way, shown when the turn ends."""
        self._sub_calls: dict[tuple[tuple[str, ...], str], ToolCall] = {}
        self.probe: str | None = None
        """Where the model's server is, as ``tether probe`` takes it (:func:`probe_address`); set with the
        agent. A run that fails to connect to it ends with the hint to probe it."""

    def __call__(self, event: RunEvent) -> None:
        kind = type(event)
        if kind is not TurnStarted:
            self.stop_spinner()
        if kind is TextDelta:
            assert isinstance(event, TextDelta)
            self._text(event.text)
        elif kind is ThinkingDelta:
            assert isinstance(event, ThinkingDelta)
            self._thinking(event.text)
        elif kind is TurnStarted:
            assert isinstance(event, TurnStarted)
            self._turn_started(event)
        elif kind is ToolCallStarted:
            assert isinstance(event, ToolCallStarted)
            self._calls[event.call.id] = event.call
            self.note(f"→ {describe_call(event.call, redaction=self.redaction)}", "cyan")
        elif kind is ToolResultReceived:
            assert isinstance(event, ToolResultReceived)
            result = event.result
            call = self._calls.pop(result.call_id, None)
            line = describe_result(result)
            line = self.redaction.hide_values(line, call.arguments) if call else self.redaction.text(line)
            self.note(f"  {_mark(result)} {line}", _style(result))
        elif kind is TurnCompleted:
            assert isinstance(event, TurnCompleted)
            self._cut = is_cut(event)
            if not self._cut:
                self._release()
                self.end_lines()
            if event.cached:
                self.note(CACHED_MARK)
            self._rejected = event.rejected
        elif kind is ThinkingEnded:
            if self._in_thinking:  # the next block, or the answer, starts on a line of its own
                self.end_lines()
        elif kind is ProviderRetry:
            assert isinstance(event, ProviderRetry)
            self.note(describe_retry(event))
            self._wait_for_model()
        elif kind is RateLimitWait:
            assert isinstance(event, RateLimitWait)
            self.note(describe_wait(event))
            self._wait_for_model()
        elif kind is FallbackTaken:
            assert isinstance(event, FallbackTaken)
            self.note(describe_fallback(event))
            self._wait_for_model()
        elif kind is Compacted:
            assert isinstance(event, Compacted)
            self._flush_rejected()  # an overflow that set it off is told first
            self.note(describe_compaction(event))
        elif kind is HandoffTaken:
            assert isinstance(event, HandoffTaken)
            self.note(describe_handoff(event))
        elif kind is RunCompleted:
            assert isinstance(event, RunCompleted)
            self._completed(event)
        elif kind is SubAgentEvent:
            assert isinstance(event, SubAgentEvent)
            self._sub_agent(event)

    def _sub_agent(self, event: SubAgentEvent) -> None:
        """An event of an agent a tool call runs (``agent.as_tool()``), on lines of its own under the call,
        indented by its depth: its text when its turn ends, its tool calls and results, its retries, and how it
        stopped when that was not an answer."""
        inner, path = event.event, event.path
        indent = "  " * len(path)
        if type(inner) is TextDelta:
            self._sub_text.setdefault(path, []).append(inner.text)
            return
        if (held := self._sub_text.pop(path, None)) and (text := "".join(held).strip()):
            for number, line in enumerate(text.splitlines()):
                self.note(f"{indent}{path[-1] + ': ' if number == 0 else ''}{line}")
        if type(inner) is ToolCallStarted:
            self._sub_calls[path, inner.call.id] = inner.call
            self.note(f"{indent}→ {describe_call(inner.call, redaction=self.redaction)}", "cyan")
        elif type(inner) is ToolResultReceived:
            result = inner.result
            call = self._sub_calls.pop((path, result.call_id), None)
            line = describe_result(result)
            line = self.redaction.hide_values(line, call.arguments) if call else self.redaction.text(line)
            self.note(f"{indent}  {_mark(result)} {line}", _style(result))
        elif type(inner) is ProviderRetry:
            self.note(f"{indent}{describe_retry(inner)}")
        elif type(inner) is RunCompleted:
            ended = inner.result
            reason = str(ended.stop_reason)
            if reason not in ("complete", "done_tool") or ended.degraded:
                self.note(f"{indent}[{path[-1]}: {reason}] {ended.detail}".rstrip(), "yellow")

    # --- pieces --------------------------------------------------------------------------------------------

    def note(self, line: str, style: str = "dim") -> None:
        """A line of narration on ``err``, on a line of its own, through the redaction (an error may quote a
        key or a call's arguments)."""
        self.stop_spinner()
        self.end_lines()
        self.err.print(Text(self.redaction.text(line), style=style))

    def end_lines(self) -> None:
        """End any line left open, so the next output starts at the beginning of a line."""
        self._in_thinking = False
        for console in (self.out, self.err):
            if self._open.get(id(console)):
                console.print()
                self._open[id(console)] = False

    def stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _write(self, console: Console, text: str, style: str = "") -> None:
        console.print(Text(text, style=style), end="")
        self._open[id(console)] = not text.endswith("\n")

    def _text(self, text: str) -> None:
        self._streamed.append(text)
        if not self.text:
            return
        if not self.stream:
            self._held.append(text)
            return
        if self._in_thinking:
            self.end_lines()
        self._write(self.out, text)

    def _release(self) -> None:
        """Print the text held back for the turn that ends, whole."""
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            self.end_lines()
            self._write(self.out, text)

    def _thinking(self, text: str) -> None:
        if not self.thinking:
            return
        if not self._in_thinking:
            self.end_lines()
            self._in_thinking = True
        self._write(self.err, text, "dim italic")

    def _flush_rejected(self, detail: str = "") -> None:
        if self._rejected and not (detail and self._rejected.endswith(detail)):  # the closing line says it
            self.note(f"(answer not used: {self._rejected})", "yellow")
        self._rejected = None

    def _turn_started(self, event: TurnStarted) -> None:
        self._flush_rejected()
        if event.final and self._cut:  # more of an answer cut at the output limit: it goes on where it was
            return
        if event.final:
            self.note("(asking the model for a final answer, without tools)")
        elif event.attempt > 1:
            self.note("(the answer could not be used; asking again)")
        self._wait_for_model()

    def _wait_for_model(self) -> None:
        """The spinner, while nothing has come of the model yet (a call starts, or its provider retries)."""
        if self.spinner and self._status is None:
            self._status = self.err.status(Text("waiting for the model…", style="dim"), spinner="dots")
            self._status.start()

    def _completed(self, event: RunCompleted) -> None:
        self._release()  # a turn cut short (cancelled) has no TurnCompleted
        self.end_lines()
        result = event.result
        self._flush_rejected(result.detail)
        streamed = "".join(self._streamed)
        self._streamed.clear()
        reason = str(result.stop_reason)
        if self.text and reason not in _NO_ANSWER and result.text.strip() and result.text.strip() not in streamed:
            self.out.print(Text(result.text))  # an answer that was not streamed (a fallback summary)
        if reason in ("complete", "done_tool", "ask_user"):
            if result.degraded:  # an answer still cut at the output limit, or a session not saved
                cut = ", cut off at the output limit" if result.finish_reason == "length" else ""
                self.note(f"[{reason}, degraded{cut}] {result.detail}", "yellow")
            return
        style = "red" if reason == "error" else "yellow"
        if reason == "paused":
            self.note(f"[paused] {waiting_line(result.pending)}", style)
            for line in pending_lines(result.pending, self.redaction):
                self.note(line, style)
            return
        self.note(f"[{reason}] {result.detail}".rstrip(), style)
        if self.probe is not None and isinstance(result.error, TransportError):
            self.note(f"hint: is the model's server running? check it with: tether probe {self.probe}", "dim")
