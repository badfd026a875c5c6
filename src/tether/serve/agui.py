"""AG-UI (the Agent-User Interaction protocol): a ``RunAgentInput`` as a run's input, a run's events as AG-UI
events, each encoded as a server-sent event. Its shapes are the official ones (``ag_ui.core``, the ``serve``
extra's ``ag-ui-protocol``), so what is sent is what every AG-UI client reads.

In: :func:`run_input` reads the request body (``RunAgentInput``): its messages become tether messages (a user's
text, images, audio and documents, inline or by URL; an assistant's text and tool calls; a tool's results, an
``error`` one as an error result), its system and developer messages and its ``context`` the run's instructions.
Reasoning and activity messages are the client's to show, not the model's to read, and are left out.

Out: a :class:`Translator` per run turns each ``RunEvent`` into AG-UI events, in the protocol's order:
``RUN_STARTED`` first; a provider call is a step (``STEP_STARTED`` ... ``STEP_FINISHED``, around its tool calls);
thinking is a reasoning message (``REASONING_START``, ``REASONING_MESSAGE_START``/``CONTENT``/``END``,
``REASONING_END``); text a text message (``TEXT_MESSAGE_START``/``CONTENT``/``END``), closed before anything else
starts; a tool call ``TOOL_CALL_START``/``ARGS``/``END`` when it starts and ``TOOL_CALL_RESULT`` when it ends (an
error result says so in its ``metadata``: ``isError``, ``code``); an agent run as a tool is a sub-agent
(``SUBAGENT_STARTED``, its events carrying its ``subagentRunId``, ``SUBAGENT_FINISHED`` or ``SUBAGENT_ERROR``).
What AG-UI has no event for is a ``CUSTOM`` event named ``tether.<kind>`` whose value is the event's JSON
(``tether.serve.events_json``): each call's usage (``tether.usage``), retries, rate-limit waits, fallbacks, failed
calls, compactions, handoffs, a typed output as it is written (``tether.partial_output``) and as it is
(``tether.output``). Last, always: ``RUN_FINISHED`` (its ``result`` the output, its ``usage`` the run's tokens,
its ``outcome`` ``success`` or ``cancelled``, its ``metadata`` the stop reason, ``degraded`` and ``detail``) or,
for a run that failed, ``RUN_ERROR`` (its message and stable code).

Texts and tool calls' arguments are masked as ``events_json`` masks them: no known key leaves the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    AudioPart,
    BaseEvent,
    CustomEvent,
    DataSource,
    DeveloperMessage,
    DocumentPart,
    ImagePart,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError

from tether.errors import Cancelled, RequestInvalid
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
from tether.messages import Attachment, Message, Text, ToolCall, ToolResult
from tether.redaction import Redaction, default_redaction
from tether.serve import events_json
from tether.serve.inputs import attachment_from_data, attachment_from_url, conversation, tool_call, tool_result
from tether.usage import Usage

__all__ = ["CONTENT_TYPE", "AguiRun", "Translator", "encode", "run_input", "token_usage"]

CONTENT_TYPE = "text/event-stream"
"""The media type of an AG-UI event stream (server-sent events)."""

_ENCODER = EventEncoder()


def encode(event: BaseEvent) -> str:
    """``event`` as one server-sent event (``data: {json}``), as the official encoder writes it."""
    return _ENCODER.encode(event)


# --- in --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AguiRun:
    """An AG-UI request read for a run: ``agent.stream(run.prompt, history=run.history,
    instructions=run.instructions)``. ``tools`` are the client's own tools (as it sent them: tether does not run
    them); ``state`` and ``forwarded_props`` are the client's, as sent."""

    thread_id: str
    run_id: str
    prompt: list[str | Attachment] | None
    history: tuple[Message, ...]
    instructions: str | None
    parent_run_id: str | None = None
    state: Any = None
    tools: tuple[dict[str, Any], ...] = ()
    forwarded_props: Any = None


def run_input(body: bytes | str) -> AguiRun:
    """A ``RunAgentInput`` (the request's JSON body) read for a run; ``RequestInvalid`` when it is not one, or
    holds a conversation tether cannot run."""
    try:
        request = RunAgentInput.model_validate_json(body)
    except ValidationError as error:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in error.errors()]
        raise RequestInvalid(f"not an AG-UI RunAgentInput: {problems[0]}", details={"errors": problems}) from None
    system = [m.content for m in request.messages if isinstance(m, SystemMessage | DeveloperMessage)]
    system += [f"{c.description}:\n{c.value}" for c in request.context or ()]
    asked = conversation(_messages(request), system)
    return AguiRun(
        thread_id=request.thread_id,
        run_id=request.run_id,
        prompt=asked.prompt,
        history=asked.history,
        instructions=asked.instructions,
        parent_run_id=request.parent_run_id,
        state=request.state,
        tools=tuple(tool.model_dump(mode="json", by_alias=True) for tool in request.tools or ()),
        forwarded_props=request.forwarded_props,
    )


def _messages(request: RunAgentInput) -> list[Message]:
    calls: dict[str, ToolCall] = {}
    messages: list[Message] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            messages.append(Message("user", _parts(message.content)))
        elif isinstance(message, AssistantMessage):
            made = [tool_call(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
            calls.update((call.id, call) for call in made)
            text = (Text(message.content),) if message.content else ()
            messages.append(Message("assistant", (*text, *made)))
        elif isinstance(message, ToolMessage):
            call = calls.get(message.tool_call_id)
            if call is None:
                raise RequestInvalid(f"the tool message {message.id!r} answers no tool call ({message.tool_call_id!r})")
            parts = _parts(message.content)
            content = "\n\n".join(p.text for p in parts if type(p) is Text)
            if message.error is not None:
                content = message.error if not content else f"{message.error}\n\n{content}"
            found = tuple(p for p in parts if type(p) is Attachment)
            result = tool_result(call, content, error=message.error is not None, attachments=found)
            messages.append(Message("tool", (result,)))
    return messages


def _parts(content: Any) -> tuple[Text | Attachment, ...]:
    if isinstance(content, str):
        return (Text(content),) if content else ()
    parts: list[Text | Attachment] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append(Text(part.text))
        elif isinstance(part, ImagePart | AudioPart | DocumentPart):
            source = part.source
            if isinstance(source, DataSource):
                parts.append(attachment_from_data(source.value, source.mime_type))
            elif isinstance(source, UrlSource):
                parts.append(attachment_from_url(source.value, source.mime_type))
            else:
                raise RequestInvalid(f"an {part.type} part by a provider's file handle cannot be read: send its data")
        else:
            raise RequestInvalid(f"a {part.type} part cannot be an attachment: images, audio and documents can")
    return tuple(parts)


# --- out -------------------------------------------------------------------------------------------------------


class _Scope:
    """What is open in one run's stream: the top run's, or a sub-agent's (``sid`` its subagentRunId)."""

    __slots__ = ("announced", "attributed", "model", "reasoning", "sid", "step", "text", "text_id")

    def __init__(self, sid: str | None) -> None:
        self.sid = sid
        self.attributed: dict[str, Any] = {} if sid is None else {"subagent_run_id": sid}
        self.text: str | None = None
        self.text_id: str | None = None
        """The last text message's id: the parent of the tool calls that follow it."""
        self.reasoning: str | None = None
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
    def for_run(cls, run: AguiRun, *, redaction: Redaction | None = None) -> Translator:
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
        out.append(ReasoningStartEvent(message_id=rid, **scope.attributed))
        out.append(ReasoningMessageStartEvent(message_id=rid, role="reasoning", **scope.attributed))

    def _thinking_delta(self, scope: _Scope, event: ThinkingDelta, out: list[BaseEvent]) -> None:
        if not event.text:
            return
        if scope.reasoning is None:
            self._thinking_started(scope, ThinkingStarted(), out)
        rid = scope.reasoning
        assert rid is not None
        delta = self.redaction.text(event.text)
        out.append(ReasoningMessageContentEvent(message_id=rid, delta=delta, **scope.attributed))

    def _thinking_ended(self, scope: _Scope, event: ThinkingEnded, out: list[BaseEvent]) -> None:
        self._close_reasoning(scope, out)

    def _text_delta(self, scope: _Scope, event: TextDelta, out: list[BaseEvent]) -> None:
        if not event.text:
            return
        if scope.text is None:
            self._close_reasoning(scope, out)
            scope.text = scope.text_id = self._new_id("message")
            out.append(TextMessageStartEvent(message_id=scope.text, role="assistant", **scope.attributed))
        delta = self.redaction.text(event.text)
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
        self._announce(scope, event.call, out)

    def _announce(self, scope: _Scope, call: ToolCall, out: list[BaseEvent]) -> None:
        self._close_text(scope, out)
        self._close_reasoning(scope, out)
        scope.announced.add(call.id)
        attributed = scope.attributed
        out.append(
            ToolCallStartEvent(
                tool_call_id=call.id, tool_call_name=call.name, parent_message_id=scope.text_id, **attributed
            )
        )
        arguments = self.redaction.arguments(call.arguments)
        if arguments is not None:
            text = json.dumps(arguments, ensure_ascii=False)
        else:
            text = self.redaction.text(call.raw_arguments or "")
        if text:
            out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=text, **attributed))
        out.append(ToolCallEndEvent(tool_call_id=call.id, **attributed))

    def _tool_result(self, scope: _Scope, event: ToolResultReceived, out: list[BaseEvent]) -> None:
        result: ToolResult = event.result
        if result.call_id not in scope.announced:
            self._announce(scope, ToolCall(result.call_id, result.name, None), out)
        meta = {"isError": True, "code": result.code} if result.is_error else None
        out.append(
            ToolCallResultEvent(
                message_id=self._new_id("result"),
                tool_call_id=result.call_id,
                content=self.redaction.text(result.content),
                role="tool",
                metadata=meta,
                **scope.attributed,
            )
        )

    # --- closing -------------------------------------------------------------------------------------------

    def _close_text(self, scope: _Scope, out: list[BaseEvent]) -> None:
        if scope.text is not None:
            out.append(TextMessageEndEvent(message_id=scope.text, **scope.attributed))
            scope.text = None

    def _close_reasoning(self, scope: _Scope, out: list[BaseEvent]) -> None:
        if scope.reasoning is not None:
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
        output = _output(result)
        if result.output is not None and not isinstance(result.output, str):
            out.append(CustomEvent(name="tether.output", value=output))
        usage = [token_usage(result.usage, self._top.model)]
        detail = self.redaction.text(result.detail)
        meta = {"stopReason": result.stop_reason, "degraded": result.degraded, "detail": detail}
        if result.stop_reason == "cancelled":
            outcome: Any = RunFinishedCancelledOutcome()
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
                    parent_tool_call_id=key[-1],
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
            out.append(SubagentFinishedEvent(subagent_run_id=scope.sid, result=_output(result)))


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
