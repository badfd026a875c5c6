"""AG-UI: a ``RunAgentInput`` read into a run's input, and a run's events as AG-UI events.

Every event a translator emits is encoded as the server sends it, read back from its SSE ``data:`` line with the
official event union (``ag_ui.core.Event``, pydantic), and checked against the protocol's order: ``RUN_STARTED``
first; text and reasoning messages started, filled and ended by id, one at a time; tool calls started, given their
arguments and ended before their result; steps paired; ``RUN_FINISHED`` or ``RUN_ERROR`` last, once, with
nothing left open.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from tether import Agent
from tether.errors import RequestInvalid
from tether.events import (
    CallFailed,
    Compacted,
    FallbackTaken,
    HandoffTaken,
    ProviderRetry,
    RateLimitWait,
    RunCompleted,
    RunEvent,
    RunStarted,
    SubAgentEvent,
    TextDelta,
    ToolCallStarted,
    ToolResultReceived,
)
from tether.messages import Attachment, Message, Text, ToolCall, ToolResult
from tether.providers.scripted import ScriptedProvider, reply
from tether.redaction import Redaction
from tether.secrets import Masker
from tether.serve import agui
from tether.serve.inputs import OPENING

from .runs import (
    SAID,
    THINKING,
    cancelled_events,
    events_of,
    failing_agent,
    handoff_agent,
    limited_agent,
    nested_team_agent,
    result_of,
    retried_agent,
    run_id_of,
    team_agent,
    text_agent,
    typed_agent,
)

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def streamed(events: list[RunEvent], **options: Any) -> list[Any]:
    """The run's AG-UI events as a client reads them: encoded, then parsed back with the official union."""
    translator = agui.Translator("thread-1", "run-1", **options)
    parsed: list[Any] = []
    for event in events:
        for emitted in translator.events(event):
            parsed.append(read_back(agui.encode(emitted)))
    assert translator.finished
    return parsed


def read_back(encoded: str) -> Any:
    assert encoded.startswith("data: ")
    assert encoded.endswith("\n\n")
    assert "\n" not in encoded[:-2]
    return EVENTS.validate_json(encoded[len("data: ") : -2])


def order_problems(events: list[Any]) -> list[str]:
    """What breaks AG-UI's order rules in ``events`` (empty when none does)."""
    problems: list[str] = []
    kinds = [e.type for e in events]
    if not kinds or kinds[0] != EventType.RUN_STARTED:
        problems.append("the first event is not RUN_STARTED")
    ends = [i for i, k in enumerate(kinds) if k in (EventType.RUN_FINISHED, EventType.RUN_ERROR)]
    if ends != [len(kinds) - 1]:
        problems.append(f"RUN_FINISHED/RUN_ERROR is not the one last event: at {ends} of {len(kinds)}")
    scopes: dict[str | None, _Open] = {}  # the top run's and each sub-agent's (events carry its subagentRunId)
    calls: dict[str, str] = {}  # id -> "open" | "ended" | "result"
    subagents: set[str] = set()
    for i, e in enumerate(events):
        where = f"{i} {e.type.value}"
        kind = e.type
        scope = scopes.setdefault(getattr(e, "subagent_run_id", None), _Open())
        if kind == EventType.TEXT_MESSAGE_START:
            if scope.text is not None or scope.reasoning:
                problems.append(f"{where}: a text message starts while another message is open")
            scope.text = e.message_id
        elif kind == EventType.TEXT_MESSAGE_CONTENT and scope.text != e.message_id:
            problems.append(f"{where}: content of a text message that is not open")
        elif kind == EventType.TEXT_MESSAGE_END:
            if scope.text != e.message_id:
                problems.append(f"{where}: the end of a text message that is not open")
            scope.text = None
        elif kind in _REASONING:
            problems += [f"{where}: {problem}" for problem in scope.reason(kind, e.message_id)]
        elif kind == EventType.TOOL_CALL_START:
            if e.tool_call_id in calls or scope.text is not None:
                problems.append(f"{where}: a tool call started twice, or inside a text message")
            calls[e.tool_call_id] = "open"
        elif kind == EventType.TOOL_CALL_ARGS and calls.get(e.tool_call_id) != "open":
            problems.append(f"{where}: arguments of a tool call that is not open")
        elif kind == EventType.TOOL_CALL_END:
            if calls.get(e.tool_call_id) != "open":
                problems.append(f"{where}: the end of a tool call that is not open")
            calls[e.tool_call_id] = "ended"
        elif kind == EventType.TOOL_CALL_RESULT:
            if calls.get(e.tool_call_id) != "ended":
                problems.append(f"{where}: a result for a call that was not started and ended")
            calls[e.tool_call_id] = "result"
        elif kind == EventType.STEP_STARTED:
            scope.steps.append(e.step_name)
        elif kind == EventType.STEP_FINISHED:
            if e.step_name not in scope.steps:
                problems.append(f"{where}: a step finished that was not started")
            else:
                scope.steps.remove(e.step_name)
        elif kind == EventType.SUBAGENT_STARTED:
            subagents.add(e.subagent_run_id)
        elif kind in (EventType.SUBAGENT_FINISHED, EventType.SUBAGENT_ERROR):
            if e.subagent_run_id not in subagents:
                problems.append(f"{where}: a sub-agent ends that did not start")
            subagents.discard(e.subagent_run_id)
            if scopes.pop(e.subagent_run_id, _Open()).is_open():
                problems.append(f"{where}: a sub-agent ends with a message or a step open")
    if any(scope.is_open() for scope in scopes.values()) or subagents or "open" in calls.values():
        problems.append(f"left open at the end: {scopes=} {subagents=} {calls=}")
    return problems


_REASONING = {
    EventType.REASONING_START,
    EventType.REASONING_MESSAGE_START,
    EventType.REASONING_MESSAGE_CONTENT,
    EventType.REASONING_MESSAGE_END,
    EventType.REASONING_END,
}


class _Open:
    """What is open in one scope of a stream: a text message, a reasoning span and its message, steps."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.reasoning: list[str] = []  # the open span's id, then its open message's
        self.steps: list[str] = []

    def is_open(self) -> bool:
        return self.text is not None or bool(self.reasoning) or bool(self.steps)

    def reason(self, kind: EventType, message_id: str) -> list[str]:
        """The problems of a reasoning event, its state kept."""
        if kind == EventType.REASONING_START:
            problems = ["reasoning starts while a message is open"] if self.text is not None or self.reasoning else []
            self.reasoning = [message_id]
            return problems
        if kind == EventType.REASONING_MESSAGE_START:
            problems = [] if self.reasoning == [message_id] else ["a reasoning message outside its span"]
            self.reasoning = [message_id, message_id]
            return problems
        if kind == EventType.REASONING_MESSAGE_CONTENT:
            return [] if self.reasoning[1:] == [message_id] else ["reasoning content outside its open message"]
        if kind == EventType.REASONING_MESSAGE_END:
            problems = [] if self.reasoning[1:] == [message_id] else ["the end of a reasoning message not open"]
            self.reasoning = self.reasoning[:1]
            return problems
        problems = [] if self.reasoning == [message_id] else ["a reasoning span ends unopened or with a message open"]
        self.reasoning = []
        return problems

    def __repr__(self) -> str:
        return f"(text={self.text}, reasoning={self.reasoning}, steps={self.steps})"


def of_type(events: list[Any], kind: EventType) -> list[Any]:
    return [e for e in events if e.type == kind]


def custom(events: list[Any], name: str) -> list[Any]:
    return [e.value for e in of_type(events, EventType.CUSTOM) if e.name == name]


# --- out: a run's events ---------------------------------------------------------------------------------------


async def test_a_run_with_thinking_text_two_tool_calls_and_a_typed_output_streams_as_valid_ag_ui() -> None:
    run = await events_of(typed_agent())
    events = streamed(run)
    assert order_problems(events) == []
    first, last = events[0], events[-1]
    assert (first.thread_id, first.run_id) == ("thread-1", "run-1")
    assert first.metadata == {"tetherRunId": run_id_of(run), "model": "scripted:scripted"}
    # thinking, then text: each its own message, in the order the model wrote them
    reasoning = "".join(e.delta for e in of_type(events, EventType.REASONING_MESSAGE_CONTENT))
    assert reasoning == THINKING
    assert "".join(e.delta for e in of_type(events, EventType.TEXT_MESSAGE_CONTENT)) == SAID
    (message,) = of_type(events, EventType.TEXT_MESSAGE_START)
    assert message.role == "assistant"
    # the calls: their names, arguments as JSON text, results; the failed one marked as an error
    starts = of_type(events, EventType.TOOL_CALL_START)
    assert [s.tool_call_name for s in starts] == ["lookup", "refund", "final_result"]
    assert [s.parent_message_id for s in starts] == [message.message_id, message.message_id, None]
    arguments = {e.tool_call_id: json.loads(e.delta) for e in of_type(events, EventType.TOOL_CALL_ARGS)}
    assert arguments[starts[0].tool_call_id] == {"number": "A1"}
    assert arguments[starts[1].tool_call_id] == {"number": "A1", "api_key": "***"}  # a secret-named argument
    results = {e.tool_call_id: e for e in of_type(events, EventType.TOOL_CALL_RESULT)}
    assert results[starts[0].tool_call_id].content == "invoice A1: 12.5 EUR"
    assert results[starts[0].tool_call_id].metadata is None
    failed = results[starts[1].tool_call_id]
    assert "was refused" in failed.content
    assert failed.metadata == {"isError": True, "code": "tool_failed"}
    assert [step.step_name for step in of_type(events, EventType.STEP_STARTED)] == ["turn 1", "turn 2"]
    # usage per call, the typed output as it was written and as it is, then the run's end with its result
    assert [u["turn"] for u in custom(events, "tether.usage")] == [1, 2]
    assert custom(events, "tether.partial_output")[-1]["data"] == {"number": "A1", "total": 12.5}
    assert custom(events, "tether.output") == [{"number": "A1", "total": 12.5}]
    assert last.type == EventType.RUN_FINISHED
    assert last.result == {"number": "A1", "total": 12.5}
    assert last.outcome.type == "success"
    assert last.metadata == {
        "stopReason": "complete",
        "degraded": False,
        "detail": result_of(run).detail,
        "lastAgent": None,
    }
    usage = result_of(run).usage
    (tokens,) = last.usage
    assert (tokens.input_tokens, tokens.output_tokens) == (usage.input_tokens, usage.output_tokens)
    assert tokens.total_tokens == usage.input_tokens + usage.output_tokens
    assert tokens.model == "scripted:scripted"


async def test_a_text_answer_is_one_text_message_and_its_text_is_the_runs_result() -> None:
    events = streamed(await events_of(text_agent("Hello there.")))
    assert order_problems(events) == []
    assert [e.type for e in events][:3] == [EventType.RUN_STARTED, EventType.STEP_STARTED, EventType.TEXT_MESSAGE_START]
    assert "".join(e.delta for e in of_type(events, EventType.TEXT_MESSAGE_CONTENT)) == "Hello there."
    assert events[-1].result == "Hello there."
    assert custom(events, "tether.output") == []  # a text answer has no typed output


async def test_a_failed_run_ends_with_run_error_and_its_stable_code() -> None:
    events = streamed(await events_of(failing_agent()))
    assert order_problems(events) == []
    last = events[-1]
    assert last.type == EventType.RUN_ERROR
    assert (last.code, last.message) == ("auth_failed", "the key was refused")
    assert last.metadata["stopReason"] == "error"
    assert of_type(events, EventType.RUN_FINISHED) == []
    (failed,) = custom(events, "tether.call_failed")
    assert (failed["code"], failed["then"]) == ("auth_failed", "stop")


async def test_a_cancelled_run_finishes_with_the_cancelled_outcome() -> None:
    events = streamed(await cancelled_events())
    assert order_problems(events) == []
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].outcome.type == "cancelled"


async def test_a_degraded_run_finishes_with_its_answer_and_says_why_it_stopped() -> None:
    events = streamed(await events_of(limited_agent()))
    assert order_problems(events) == []
    last = events[-1]
    assert last.type == EventType.RUN_FINISHED
    assert last.outcome.type == "success"
    assert last.result == "Summary: A1 costs 12.5 EUR."
    assert last.metadata["stopReason"] == "max_turns"
    assert last.metadata["degraded"] is True


async def test_a_handoff_is_a_custom_event_between_the_agents_turns_and_the_last_agent_is_named() -> None:
    events = streamed(await events_of(handoff_agent()))
    assert order_problems(events) == []
    (handoff,) = custom(events, "tether.handoff_taken")
    assert handoff == {"from_agent": "triage", "to_agent": "billing", "turn": 1}
    texts = [
        "".join(e.delta for e in of_type(events, EventType.TEXT_MESSAGE_CONTENT) if e.message_id == m.message_id)
        for m in of_type(events, EventType.TEXT_MESSAGE_START)
    ]
    assert texts == ["Passing you on.", "Billing here: 12.5 EUR."]
    assert events[-1].metadata["lastAgent"] == "billing"


async def test_a_retried_call_is_a_custom_event_and_each_attempt_its_own_step() -> None:
    events = streamed(await events_of(retried_agent()))
    assert order_problems(events) == []
    (failed,) = custom(events, "tether.call_failed")
    assert failed["then"] == "retry"
    assert failed["code"] == "invalid_response"
    assert [s.step_name for s in of_type(events, EventType.STEP_STARTED)] == ["turn 1", "turn 1 attempt 2"]


async def test_a_sub_agent_is_announced_and_its_events_carry_its_subagent_run_id() -> None:
    run = await events_of(team_agent())
    events = streamed(run)
    assert order_problems(events) == []
    (started,) = of_type(events, EventType.SUBAGENT_STARTED)
    (finished,) = of_type(events, EventType.SUBAGENT_FINISHED)
    outer_call = next(e for e in run if type(e) is ToolCallStarted).call
    assert (started.name, started.parent_tool_call_id) == ("ask_helper", outer_call.id)
    assert finished.subagent_run_id == started.subagent_run_id
    assert finished.result == "B2 is 12.5 EUR."
    inside = events[events.index(started) + 1 : events.index(finished)]
    assert {e.type for e in inside} >= {EventType.REASONING_MESSAGE_CONTENT, EventType.TOOL_CALL_RESULT}
    assert all(getattr(e, "subagent_run_id", None) == started.subagent_run_id for e in inside)
    # the outer call's result follows the sub-agent's end; the outer events carry no sub-agent id
    outer_result = next(e for e in events if e.type == EventType.TOOL_CALL_RESULT and e.tool_call_id == outer_call.id)
    assert events.index(outer_result) > events.index(finished)
    assert outer_result.subagent_run_id is None


async def test_a_sub_agent_of_a_sub_agent_names_its_parent_and_the_call_that_runs_it() -> None:
    events = streamed(await events_of(nested_team_agent()))
    assert order_problems(events) == []
    manager, clerk = of_type(events, EventType.SUBAGENT_STARTED)
    assert (manager.name, clerk.name) == ("ask_manager", "ask_clerk")
    assert (manager.parent_subagent_run_id, clerk.parent_subagent_run_id) == (None, manager.subagent_run_id)
    (asks_clerk,) = [e for e in of_type(events, EventType.TOOL_CALL_START) if e.tool_call_name == "ask_clerk"]
    assert asks_clerk.subagent_run_id == manager.subagent_run_id
    assert clerk.parent_tool_call_id == asks_clerk.tool_call_id
    # each model numbers its calls from 1: the ids the stream carries are still one per call
    starts = of_type(events, EventType.TOOL_CALL_START)
    assert len({e.tool_call_id for e in starts}) == len(starts) == 2
    finished = {e.subagent_run_id: e.result for e in of_type(events, EventType.SUBAGENT_FINISHED)}
    assert finished == {manager.subagent_run_id: "The clerk says C3 is paid.", clerk.subagent_run_id: "C3 is paid."}


async def test_a_sub_agent_that_fails_ends_with_subagent_error() -> None:
    translator = agui.Translator("t", "r")
    call = ToolCall("call-1", "ask", {"input": "x"})
    failure = await events_of(failing_agent())
    translator.events(RunStarted("top", "m", "go"))
    translator.events(ToolCallStarted(call, 1))
    relayed = [SubAgentEvent(("ask",), ("call-1",), inner) for inner in failure]
    emitted: list[Any] = [e for event in relayed for e in translator.events(event)]
    assert emitted[-1].type == EventType.SUBAGENT_ERROR
    assert emitted[-1].code == "auth_failed"
    assert translator.finished is False  # the sub-agent's end is not the run's


def test_events_without_an_ag_ui_event_of_their_own_are_custom_events_named_by_their_kind() -> None:
    marker = Message("user", (Text("summary"),))
    others: list[RunEvent] = [
        ProviderRetry(2, 1.5, "rate_limited", "slow down", 429),
        RateLimitWait(0.5, "requests"),
        FallbackTaken("a:model", "timeout", "too slow", "b:model", 2),
        CallFailed(1, 1, "invalid_response", "empty answer", "retry"),
        Compacted(2, 9000, 1200, 10, 2, 1, "threshold", marker),
        HandoffTaken("triage", "billing", 1),
    ]
    translator = agui.Translator("t", "r")
    translator.events(RunStarted("x", "m", "p"))
    emitted = [read_back(agui.encode(e)) for event in others for e in translator.events(event)]
    names = [e.name for e in emitted]
    assert names == [f"tether.{event.kind}" for event in others]
    values = [e.value for e in emitted]
    assert values[0] == {"attempt": 2, "delay": 1.5, "code": "rate_limited", "message": "slow down", "status": 429}
    assert values[4]["tokens_before"] == 9000
    assert values[4]["marker"]["parts"] == [{"kind": "text", "text": "summary"}]
    assert values[5] == {"from_agent": "triage", "to_agent": "billing", "turn": 1}


def test_a_result_whose_call_was_never_announced_gets_its_call_first() -> None:
    translator = agui.Translator("t", "r")
    translator.events(RunStarted("x", "m", "p"))
    result = ToolResult("call-9", "lookup", "Not completed: the run was cancelled.", is_error=True, code="cancelled")
    emitted = translator.events(ToolResultReceived(result, 1))
    kinds = [e.type for e in emitted]
    assert kinds == [EventType.TOOL_CALL_START, EventType.TOOL_CALL_END, EventType.TOOL_CALL_RESULT]


def test_a_run_that_dies_without_a_result_ends_with_run_error_after_closing_what_is_open() -> None:
    translator = agui.Translator("t", "r")
    emitted = translator.events(RunStarted("x", "m", "p"))
    emitted += translator.events(TextDelta("half an ans"))
    emitted += translator.fail(RuntimeError("the worker died"))
    events = [read_back(agui.encode(e)) for e in emitted]
    assert order_problems(events) == []
    assert events[-1].code == "error"
    assert "the worker died" in events[-1].message
    assert translator.events(TextDelta("more")) == []
    assert translator.fail(RuntimeError("again")) == []


def test_fail_before_any_event_still_starts_the_run() -> None:
    events: list[Any] = agui.Translator("t", "r").fail(RequestInvalid("bad"))
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert events[-1].code == "request_invalid"


async def test_known_keys_are_masked_in_what_the_stream_carries() -> None:
    key = "sk-proj-abcdefghijklmnop0123"
    events = streamed(await events_of(text_agent(f"Your key is {key}.")), redaction=Redaction(Masker([key])))
    text = "".join(e.delta for e in of_type(events, EventType.TEXT_MESSAGE_CONTENT))
    assert key not in text
    assert "***" in text
    assert key not in events[-1].result


def test_the_order_check_finds_what_breaks_the_rules() -> None:
    bad: list[Any] = [
        read_back(line)
        for line in (
            'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}\n\n',
            'data: {"type":"TOOL_CALL_RESULT","messageId":"r","toolCallId":"c","content":"x"}\n\n',
            'data: {"type":"STEP_STARTED","stepName":"s"}\n\n',
        )
    ]
    problems = order_problems(bad)
    assert len(problems) == 5  # not started, not ended, content of no message, result of no call, step left open


# --- in: RunAgentInput ------------------------------------------------------------------------------------------


def body(messages: list[dict[str, Any]], **more: Any) -> str:
    return json.dumps({"threadId": "thread-7", "runId": "run-7", "messages": messages, **more})


def media(kind: str, source: str, value: str, mime_type: str | None = None) -> dict[str, Any]:
    """An AG-UI media part (image, audio, video, document) whose bytes are ``source``: data, url or file."""
    where = {"type": source, "value": value} | ({"mimeType": mime_type} if mime_type else {})
    return {"type": kind, "source": where}


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    """A user message of ``parts``."""
    return {"id": "u", "role": "user", "content": list(parts)}


CONVERSATION: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "content": "Answer in French."},
    {"id": "u1", "role": "user", "content": "Total of A1?"},
    {
        "id": "a1",
        "role": "assistant",
        "content": "Looking.",
        "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"number": "A1"}'}},
            {"id": "c2", "type": "function", "function": {"name": "refund", "arguments": "{bad json"}},
        ],
    },
    {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "invoice A1: 12.5 EUR"},
    {"id": "t2", "role": "tool", "toolCallId": "c2", "content": "", "error": "refused"},
    {"id": "a2", "role": "assistant", "content": "12.5 EUR."},
    {"id": "r", "role": "reasoning", "content": "the client's own"},
    {
        "id": "u2",
        "role": "user",
        "content": [
            {"type": "text", "text": "And this one?"},
            media("image", "data", base64.b64encode(PNG).decode(), "image/png"),
            media("document", "url", "https://example.com/a.pdf", "application/pdf"),
        ],
    },
]


def test_a_run_agent_input_becomes_the_prompt_history_and_instructions() -> None:
    context = [{"description": "The user's plan", "value": "premium"}]
    run = agui.run_input(body(CONVERSATION, context=context, state={"step": 2}, forwardedProps={"x": 1}))
    assert (run.thread_id, run.run_id, run.state, run.forwarded_props) == ("thread-7", "run-7", {"step": 2}, {"x": 1})
    assert run.instructions == "Answer in French.\n\nThe user's plan:\npremium"
    assert run.prompt == [
        "And this one?",
        Attachment("image/png", PNG),
        Attachment("application/pdf", None, "https://example.com/a.pdf"),
    ]
    user, assistant, tools, answer = run.history
    assert user == Message.user("Total of A1?")
    assert assistant.parts == (
        Text("Looking."),
        ToolCall("c1", "lookup", {"number": "A1"}, '{"number": "A1"}'),
        ToolCall("c2", "refund", None, "{bad json"),
    )
    assert tools.role == "tool"
    assert tools.parts == (
        ToolResult("c1", "lookup", "invoice A1: 12.5 EUR"),
        ToolResult("c2", "refund", "refused", is_error=True, code="tool_failed"),
    )
    assert answer == Message.assistant("12.5 EUR.")


def test_a_greeting_before_the_first_user_message_goes_to_the_instructions() -> None:
    greeting = {"id": "g", "role": "assistant", "content": "Hello, how can I help?"}
    run = agui.run_input(body([greeting, {"id": "u", "role": "user", "content": "A1?"}]))
    assert (run.history, run.prompt) == ((), ["A1?"])
    assert run.instructions == f"{OPENING}\n\nHello, how can I help?"


def test_a_conversation_ending_with_tool_results_runs_without_a_prompt() -> None:
    run = agui.run_input(body(CONVERSATION[1:5]))
    assert run.prompt is None
    assert run.history[-1].role == "tool"


def test_a_sub_agents_messages_kept_by_the_client_are_not_the_models_history() -> None:
    sub = "run-1-agent-call_1"
    asked: list[dict[str, Any]] = [
        {"id": "u1", "role": "user", "content": "Ask the helper."},
        {"id": "a1", "role": "assistant", "toolCalls": [function_call("call_1", "ask_helper", "{}")]},
        {"id": "t1", "role": "tool", "toolCallId": "call_1", "content": "B2 is 12.5 EUR."},
        {"id": "s1", "role": "assistant", "subagentRunId": sub, "toolCalls": [function_call("x", "lookup", "{}")]},
        {"id": "s2", "role": "tool", "subagentRunId": sub, "toolCallId": "x", "content": "12.5 EUR"},
        {"id": "s3", "role": "assistant", "subagentRunId": sub, "content": "B2 is 12.5 EUR."},
        {"id": "a2", "role": "assistant", "content": "The helper says 12.5 EUR."},
        {"id": "u2", "role": "user", "content": "Thanks"},
    ]
    run = agui.run_input(body(asked))
    assert [m.role for m in run.history] == ["user", "assistant", "tool", "assistant"]
    assert run.history[-1] == Message.assistant("The helper says 12.5 EUR.")


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_the_read_input_runs_and_the_model_is_sent_the_history_and_the_attachment() -> None:
    run = agui.run_input(body(CONVERSATION))
    model = ScriptedProvider([reply("Une image.")])
    agent = Agent(model)
    translator = agui.Translator.for_run(run)
    run_events = await events_of(agent, run.prompt, history=run.history, instructions=run.instructions)
    emitted: list[Any] = [e for event in run_events for e in translator.events(event)]
    assert emitted[-1].type == EventType.RUN_FINISHED
    assert emitted[-1].run_id == "run-7"
    sent = model.requests[0].messages
    assert [m.role for m in sent[-5:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert Attachment("image/png", PNG) in sent[-1].parts
    assert "Answer in French." in (model.requests[0].system or "")


@pytest.mark.parametrize(
    ("request_body", "says"),
    [
        ("{not json", "not an AG-UI RunAgentInput"),
        (json.dumps({"runId": "r", "messages": []}), "threadId"),
        (body([]), "no message"),
        (body([{"id": "t", "role": "tool", "toolCallId": "nope", "content": "x"}]), "answers no tool call"),
        (body([*CONVERSATION[1:3], {"id": "u", "role": "user", "content": "next"}]), "not valid"),
        (body([*CONVERSATION[1:2], {"id": "a", "role": "assistant", "content": "Hi"}]), "ends with an assistant"),
        (body([user(media("video", "url", "https://x/v.mp4", "video/mp4"))]), "cannot be an attachment"),
        (body([user(media("image", "data", "!!!", "image/png"))]), "not valid base64"),
        (body([user(media("image", "file", "file-1"))]), "file handle"),
        (body([user(media("document", "data", "aGk=", "application/zip"))]), "cannot be an attachment"),
    ],
)
def test_bad_input_is_request_invalid_with_a_message_that_names_the_problem(request_body: str, says: str) -> None:
    with pytest.raises(RequestInvalid) as raised:
        agui.run_input(request_body)
    assert raised.value.code == "request_invalid"
    assert says in raised.value.message


def test_a_malformed_body_lists_every_problem_in_its_details() -> None:
    with pytest.raises(RequestInvalid) as raised:
        agui.run_input(json.dumps({"messages": [{"role": "user"}]}))
    errors = raised.value.details["errors"]
    assert any("threadId" in e for e in errors)
    assert any("runId" in e for e in errors)


async def test_run_completed_from_finish_is_the_same_as_from_events() -> None:
    completed = (await events_of(text_agent()))[-1]
    assert type(completed) is RunCompleted
    one, two = agui.Translator("t", "r"), agui.Translator("t", "r")
    assert [e.type for e in one.finish(completed.result)] == [e.type for e in two.events(completed)]
