"""AG-UI's event stream of one run: :class:`Translator` turns a run's events into AG-UI events (the official
``ag_ui.core`` types), in the protocol's order; ``tether.serve.agui`` (its face) says what each event becomes.

A run is a scope; an agent it runs as a tool is another (its events carry its ``subagentRunId``, its tool calls'
ids are prefixed with it: each model numbers its calls alike). A scope keeps what is open in it (a text message, a
reasoning span, a step, the calls announced) and closes it before anything else starts and before the run ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from tether.errors import Cancelled
from tether.events import (
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    SubAgentEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingEnded,
    ThinkingStarted,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.messages import ToolCall, ToolResult
from tether.redaction import Redaction, default_redaction
from tether.serve import events_json
from tether.serve.masking import HeldText
from tether.usage import Usage

__all__ = ["Translator", "token_usage"]


class AskedRun(Protocol):
    """What a translator needs of the request it answers (``tether.serve.agui.AguiRun``)."""

    @property
    def thread_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...


class _Scope:
    """What is open in one run's stream: the top run's, or a sub-agent's (``sid`` its subagentRunId)."""

    __slots__ = ("announced", "attributed", "calls", "held", "model", "reasoning", "sid", "step", "text", "text_id")

    def __init__(self, sid: str | None) -> None:
        self.sid = sid
        self.attributed: dict[str, Any] = {} if sid is None else {"subagent_run_id": sid}
        self.calls = "" if sid is None else f"{sid}:"
        """What a sub-agent's tool call ids are prefixed with: its model numbers its calls apart from the run's."""
        self.text: str | None = None
        self.text_id: str | None = None
        """The last text message's id: the parent of the tool calls that follow it."""
        self.reasoning: str | None = None
        self.held: HeldText | None = None
        """The open text's or reasoning's masking: what of it is held back (one is open at a time)."""
        self.step: str | None = None
        self.announced: set[str] = set()
        self.model: str | None = None


class Translator:
    """One run's events as AG-UI events (see the module's docstring for the mapping and its order).

    Stateful: feed it every event of the run, in order (``events``); the run's ``RunCompleted`` ends the stream
    with ``RUN_FINISHED`` or ``RUN_ERROR``. A run that ended without one (an exception) is ended with
    :meth:`fail`. After the last event, nothing more is emitted."""

    def __init__(self, thread_id: str, run_id: str, *, redaction: Redaction | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.redaction = redaction if redaction is not None else default_redaction()
        self.finished = False
        self._started = False
        self._top = _Scope(None)
        self._subs: dict[tuple[str, ...], _Scope] = {}
        self._ids = 0

    @classmethod
    def for_run(cls, run: AskedRun, *, redaction: Redaction | None = None) -> Translator:
        """The translator of the run ``run`` asked for (its thread and run ids)."""
        return cls(run.thread_id, run.run_id, redaction=redaction)

    def events(self, event: RunEvent) -> list[BaseEvent]:
        """The AG-UI events ``event`` stands for (none for some)."""
        if self.finished:
            return []
        out: list[BaseEvent] = []
        if not self._started:
            self._started = True
            meta = None
            if isinstance(event, RunStarted):
                self._top.model = event.model
                meta = {"tetherRunId": event.run_id, "model": event.model}
            out.append(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, metadata=meta))
            if meta is not None:
                return out
        if type(event) is SubAgentEvent:
            self._sub(event, out)
        elif type(event) is RunCompleted:
            self._finish(event.result, out)
        else:
            self._event(self._top, event, out)
        return out

    def finish(self, result: RunResult[Any]) -> list[BaseEvent]:
        """The events that end the stream of a run that ended with ``result`` (as its ``RunCompleted`` does)."""
        return self.events(RunCompleted(result))

    def fail(self, error: BaseException) -> list[BaseEvent]:
        """The events that end the stream of a run that failed without a result: ``RUN_ERROR`` last."""
        if self.finished:
            return []
        out: list[BaseEvent] = []
        if not self._started:
            self._started = True
            out.append(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
        self._close_all(out)
        shown = events_json.error_summary(error, self.redaction)
        out.append(RunErrorEvent(message=shown["message"], code=shown["code"]))
        self.finished = True
        return out

    # --- one scope's events --------------------------------------------------------------------------------

    def _event(self, scope: _Scope, event: RunEvent, out: list[BaseEvent]) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, scope, event, out)
        else:
            self._custom(scope, event, out)

    def _custom(self, scope: _Scope, event: RunEvent, out: list[BaseEvent]) -> None:
        value = events_json.to_jsonable(event, self.redaction)
        del value["kind"]
        out.append(CustomEvent(name=f"tether.{event.kind}", value=value, **scope.attributed))

    def _new_id(self, what: str) -> str:
        self._ids += 1
        return f"{self.run_id}-{what}-{self._ids}"

    def _turn_started(self, scope: _Scope, event: TurnStarted, out: list[BaseEvent]) -> None:
        self._close_step(scope, out)
        scope.text_id = None
        scope.step = f"turn {event.turn}" if event.attempt == 1 else f"turn {event.turn} attempt {event.attempt}"
        out.append(StepStartedEvent(step_name=scope.step, **scope.attributed))

    def _thinking_started(self, scope: _Scope, event: ThinkingStarted, out: list[BaseEvent]) -> None:
        self._close_text(scope, out)
        self._close_reasoning(scope, out)
        scope.reasoning = rid = self._new_id("reasoning")
        scope.held = HeldText(self.redaction)
        out.append(ReasoningStartEvent(message_id=rid, **scope.attributed))
        out.append(ReasoningMessageStartEvent(message_id=rid, role="reasoning", **scope.attributed))

    def _thinking_delta(self, scope: _Scope, event: ThinkingDelta, out: list[BaseEvent]) -> None:
        if not event.text:
            return
        if scope.reasoning is None:
            self._thinking_started(scope, ThinkingStarted(), out)
        rid, held = scope.reasoning, scope.held
        assert rid is not None
        assert held is not None
        delta = held.push(event.text)
        if delta:
            out.append(ReasoningMessageContentEvent(message_id=rid, delta=delta, **scope.attributed))

    def _thinking_ended(self, scope: _Scope, event: ThinkingEnded, out: list[BaseEvent]) -> None:
        self._close_reasoning(scope, out)

    def _text_delta(self, scope: _Scope, event: TextDelta, out: list[BaseEvent]) -> None:
        if not event.text:
            return
        if scope.text is None:
            self._close_reasoning(scope, out)
            scope.text = scope.text_id = self._new_id("message")
            scope.held = HeldText(self.redaction)
            out.append(TextMessageStartEvent(message_id=scope.text, role="assistant", **scope.attributed))
        assert scope.held is not None
        delta = scope.held.push(event.text)
        if delta:
            out.append(TextMessageContentEvent(message_id=scope.text, delta=delta, **scope.attributed))

    def _turn_completed(self, scope: _Scope, event: TurnCompleted, out: list[BaseEvent]) -> None:
        self._close_text(scope, out)
        self._close_reasoning(scope, out)
        value = {
            "turn": event.turn,
            "usage": events_json.plain(event.usage),
            "finish_reason": event.finish_reason,
            "status": event.status,
            "rejected": event.rejected,
            "cached": event.cached,
        }
        out.append(CustomEvent(name="tether.usage", value=value, **scope.attributed))

    def _tool_started(self, scope: _Scope, event: ToolCallStarted, out: list[BaseEvent]) -> None:
        if event.call.id not in scope.announced:  # a resumed run's decided call was announced by the paused run
            self._announce(scope, event.call, out)

    def _announce(self, scope: _Scope, call: ToolCall, out: list[BaseEvent]) -> None:
        self._close_text(scope, out)
        self._close_reasoning(scope, out)
        scope.announced.add(call.id)
        attributed = scope.attributed
        call_id = scope.calls + call.id
        out.append(
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=call.name, parent_message_id=scope.text_id, **attributed
            )
        )
        arguments = self.redaction.arguments(call.arguments)
        if arguments is not None:
            text = json.dumps(arguments, ensure_ascii=False)
        else:
            text = self.redaction.text(call.raw_arguments or "")
        if text:
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=text, **attributed))
        out.append(ToolCallEndEvent(tool_call_id=call_id, **attributed))

    def _tool_result(self, scope: _Scope, event: ToolResultReceived, out: list[BaseEvent]) -> None:
        result: ToolResult = event.result
        if result.call_id not in scope.announced:
            self._announce(scope, ToolCall(result.call_id, result.name, None), out)
        meta = {"isError": True, "code": result.code} if result.is_error else None
        out.append(
            ToolCallResultEvent(
                message_id=self._new_id("result"),
                tool_call_id=scope.calls + result.call_id,
                content=self.redaction.text(result.content),
                role="tool",
                metadata=meta,
                **scope.attributed,
            )
        )

    # --- closing -------------------------------------------------------------------------------------------

    def _close_text(self, scope: _Scope, out: list[BaseEvent]) -> None:
        if scope.text is not None:
            rest = scope.held.flush() if scope.held is not None else ""
            if rest:
                out.append(TextMessageContentEvent(message_id=scope.text, delta=rest, **scope.attributed))
            out.append(TextMessageEndEvent(message_id=scope.text, **scope.attributed))
            scope.text = scope.held = None

    def _close_reasoning(self, scope: _Scope, out: list[BaseEvent]) -> None:
        if scope.reasoning is not None:
            rest = scope.held.flush() if scope.held is not None else ""
            if rest:
                out.append(ReasoningMessageContentEvent(message_id=scope.reasoning, delta=rest, **scope.attributed))
            scope.held = None
            out.append(ReasoningMessageEndEvent(message_id=scope.reasoning, **scope.attributed))
            out.append(ReasoningEndEvent(message_id=scope.reasoning, **scope.attributed))
            scope.reasoning = None

    def _close_step(self, scope: _Scope, out: list[BaseEvent]) -> None:
        self._close_text(scope, out)
        self._close_reasoning(scope, out)
        if scope.step is not None:
            out.append(StepFinishedEvent(step_name=scope.step, **scope.attributed))
            scope.step = None

    def _close_all(self, out: list[BaseEvent]) -> None:
        for path in sorted(self._subs, key=len, reverse=True):
            scope = self._subs.pop(path)
            self._close_step(scope, out)
            assert scope.sid is not None
            message = "the run ended before this sub-agent did"
            out.append(SubagentErrorEvent(subagent_run_id=scope.sid, message=message, code="cancelled"))
        self._close_step(self._top, out)

    # --- the end -------------------------------------------------------------------------------------------

    def _finish(self, result: RunResult[Any], out: list[BaseEvent]) -> None:
        self._close_all(out)
        output = self.redaction.value(_output(result))
        if result.output is not None and not isinstance(result.output, str):
            out.append(CustomEvent(name="tether.output", value=output))
        usage = [token_usage(result.usage, self._top.model)]
        detail = self.redaction.text(result.detail)
        meta = {
            "stopReason": result.stop_reason,
            "degraded": result.degraded,
            "detail": detail,
            "lastAgent": result.last_agent,
        }
        if result.stop_reason == "paused":
            outcome: Any = self._interrupted(result, out)
            output = {"pending": events_json.pending_json(result.pending, self.redaction)}
        elif result.stop_reason == "cancelled":
            outcome = RunFinishedCancelledOutcome()
        elif result.error is not None:
            shown = events_json.error_summary(result.error, self.redaction)
            out.append(RunErrorEvent(message=shown["message"], code=shown["code"], usage=usage, metadata=meta))
            self.finished = True
            return
        else:
            outcome = RunFinishedSuccessOutcome()
        finished = RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, result=output, outcome=outcome, usage=usage, metadata=meta
        )
        out.append(finished)
        self.finished = True

    def answering(self, call_ids: Iterable[str]) -> None:
        """A resumed run's stream: the calls it settles were announced by the paused run's stream, so they get
        their ``TOOL_CALL_RESULT`` only."""
        self._top.announced.update(call_ids)

    def _interrupted(self, result: RunResult[Any], out: list[BaseEvent]) -> RunFinishedInterruptOutcome:
        """A paused run's outcome: one interrupt per pending call (its id the call's, answered by a resume entry
        or a tool message); the waiting calls announced (start, arguments, end) and left without a result."""
        interrupts = []
        for call in result.pending:
            if call.id not in self._top.announced:
                self._announce(self._top, ToolCall(call.id, call.tool, call.arguments), out)
            shown = events_json.pending_json((call,), self.redaction)[0]
            interrupts.append(
                Interrupt(
                    id=call.id,
                    reason="tool_approval" if call.kind == "approval" else "external_result",
                    message=shown["reason"] or None,
                    tool_call_id=self._top.calls + call.id,
                    metadata=shown,
                )
            )
        return RunFinishedInterruptOutcome(interrupts=interrupts)

    # --- sub-agents ----------------------------------------------------------------------------------------

    def _sub(self, event: SubAgentEvent, out: list[BaseEvent]) -> None:
        key = event.call_ids
        inner = event.event
        scope = self._subs.get(key)
        if scope is None:
            scope = self._subs[key] = _Scope(f"{self.run_id}-agent-{'.'.join(key)}")
            parent = self._subs.get(key[:-1])
            model = inner.model if isinstance(inner, RunStarted) else None
            scope.model = model
            assert scope.sid is not None
            self._close_text(parent or self._top, out)
            out.append(
                SubagentStartedEvent(
                    subagent_run_id=scope.sid,
                    name=event.path[-1],
                    parent_subagent_run_id=None if parent is None else parent.sid,
                    parent_tool_call_id=(self._top if parent is None else parent).calls + key[-1],
                    metadata={"model": model} if model else None,
                )
            )
            if type(inner) is RunStarted:
                return
        if type(inner) is RunCompleted:
            del self._subs[key]
            self._sub_finish(scope, inner.result, out)
        elif type(inner) is not RunStarted:
            self._event(scope, inner, out)

    def _sub_finish(self, scope: _Scope, result: RunResult[Any], out: list[BaseEvent]) -> None:
        self._close_step(scope, out)
        assert scope.sid is not None
        if result.error is not None or result.stop_reason == "cancelled":
            error = result.error if result.error is not None else Cancelled("the sub-agent's run was cancelled")
            shown = events_json.error_summary(error, self.redaction)
            out.append(SubagentErrorEvent(subagent_run_id=scope.sid, message=shown["message"], code=shown["code"]))
        else:
            output = self.redaction.value(_output(result))
            out.append(SubagentFinishedEvent(subagent_run_id=scope.sid, result=output))


def _output(result: RunResult[Any]) -> Any:
    """A run's result as JSON: its typed output, else its text."""
    if result.output is None or isinstance(result.output, str):
        return result.text
    return events_json.plain(result.output)


def token_usage(usage: Usage, model: str | None) -> TokenUsage:
    """A run's usage in AG-UI's accounting: input tokens include the cache's reads and writes (which tether
    counts apart), their parts named; output tokens include reasoning."""
    read, written = usage.cache_read_tokens, usage.cache_write_tokens
    prompt = usage.input_tokens + read + written
    return TokenUsage(
        model=model,
        input_tokens=prompt,
        output_tokens=usage.output_tokens,
        total_tokens=prompt + usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens or None,
        cached_input_tokens=read or None,
        cache_write_input_tokens=written or None,
    )


_Handler = Callable[[Translator, _Scope, Any, list[BaseEvent]], None]
_HANDLERS: dict[type, _Handler] = {
    TurnStarted: Translator._turn_started,
    ThinkingStarted: Translator._thinking_started,
    ThinkingDelta: Translator._thinking_delta,
    ThinkingEnded: Translator._thinking_ended,
    TextDelta: Translator._text_delta,
    TurnCompleted: Translator._turn_completed,
    ToolCallStarted: Translator._tool_started,
    ToolResultReceived: Translator._tool_result,
}
"""The events with an AG-UI event of their own; every other kind is a ``tether.<kind>`` custom event."""
