"""The AI SDK's UI message stream (``useChat``): a request body read into a run's input, and a run's events as
UI message chunks.

Every chunk is encoded as the server sends it, read back from its ``data:`` line and validated against a JSON
Schema written here from the protocol's published chunk shapes (AI SDK 5's ``uiMessageChunkSchema``: strict
objects, each type's required fields, nothing else; a later version reads them too), and checked against its
order: ``start`` first; text and reasoning started, filled and ended by id; a tool call's input available before
its output; steps paired; ``finish`` last, then ``[DONE]``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tether import Agent
from tether.errors import RequestInvalid
from tether.events import (
    CallFailed,
    Compacted,
    FallbackTaken,
    HandoffTaken,
    ProviderRetry,
    RateLimitWait,
    RunEvent,
    RunStarted,
    TextDelta,
    ToolResultReceived,
)
from tether.messages import Attachment, Message, Text, ToolCall, ToolResult
from tether.providers.scripted import ScriptedProvider, reply
from tether.redaction import Redaction
from tether.secrets import Masker
from tether.serve import vercel
from tether.serve.inputs import OPENING

from .runs import (
    SAID,
    THINKING,
    cancelled_events,
    events_of,
    failing_agent,
    handoff_agent,
    limited_agent,
    result_of,
    run_id_of,
    team_agent,
    text_agent,
    typed_agent,
)

STRING: dict[str, Any] = {"type": "string"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
ANY: dict[str, Any] = {}
METADATA: dict[str, Any] = {"type": "object"}


def chunk(kind: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A strict object: its ``type``, its required fields, its optional ones, and no other."""
    properties = {"type": {"const": kind}, **required, **(optional or {})}
    return {
        "type": "object",
        "properties": properties,
        "required": ["type", *required],
        "additionalProperties": False,
    }


TOOL_OPTIONS = {"providerExecuted": BOOLEAN, "dynamic": BOOLEAN}
CHUNK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "oneOf": [
        chunk("start", {}, {"messageId": STRING, "messageMetadata": ANY}),
        chunk("finish", {}, {"messageMetadata": ANY}),
        chunk("abort", {}),
        chunk("message-metadata", {"messageMetadata": ANY}),
        chunk("start-step", {}),
        chunk("finish-step", {}),
        chunk("error", {"errorText": STRING}),
        chunk("text-start", {"id": STRING}, {"providerMetadata": METADATA}),
        chunk("text-delta", {"id": STRING, "delta": STRING}, {"providerMetadata": METADATA}),
        chunk("text-end", {"id": STRING}, {"providerMetadata": METADATA}),
        chunk("reasoning-start", {"id": STRING}, {"providerMetadata": METADATA}),
        chunk("reasoning-delta", {"id": STRING, "delta": STRING}, {"providerMetadata": METADATA}),
        chunk("reasoning-end", {"id": STRING}, {"providerMetadata": METADATA}),
        chunk("tool-input-start", {"toolCallId": STRING, "toolName": STRING}, TOOL_OPTIONS),
        chunk("tool-input-delta", {"toolCallId": STRING, "inputTextDelta": STRING}),
        chunk(
            "tool-input-available",
            {"toolCallId": STRING, "toolName": STRING, "input": ANY},
            {**TOOL_OPTIONS, "providerMetadata": METADATA},
        ),
        chunk(
            "tool-input-error",
            {"toolCallId": STRING, "toolName": STRING, "input": ANY, "errorText": STRING},
            {**TOOL_OPTIONS, "providerMetadata": METADATA},
        ),
        chunk("tool-output-available", {"toolCallId": STRING, "output": ANY}, TOOL_OPTIONS),
        chunk("tool-output-error", {"toolCallId": STRING, "errorText": STRING}, TOOL_OPTIONS),
        chunk("source-url", {"sourceId": STRING, "url": STRING}, {"title": STRING, "providerMetadata": METADATA}),
        chunk(
            "source-document",
            {"sourceId": STRING, "mediaType": STRING, "title": STRING},
            {"filename": STRING, "providerMetadata": METADATA},
        ),
        chunk("file", {"url": STRING, "mediaType": STRING}, {"providerMetadata": METADATA}),
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "pattern": "^data-"},
                "id": STRING,
                "data": ANY,
                "transient": BOOLEAN,
            },
            "required": ["type", "data"],
            "additionalProperties": False,
        },
    ],
}
VALIDATOR = Draft202012Validator(CHUNK_SCHEMA)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def streamed(events: list[RunEvent], **options: Any) -> list[dict[str, Any]]:
    """The run's chunks as a client reads them: encoded, ``[DONE]`` after the last, each validated."""
    translator = vercel.Translator(**options)
    lines = [vercel.encode_part(part) for event in events for part in translator.events(event)]
    assert translator.finished
    lines.append(vercel.DONE)
    return read_back("".join(lines))


def read_back(stream: str) -> list[dict[str, Any]]:
    """The chunks of an SSE stream, each checked against the schema; the stream must end with ``[DONE]``."""
    assert stream.endswith("\n\n")
    frames = stream[:-2].split("\n\n")
    assert frames[-1] == "data: [DONE]"
    parts: list[dict[str, Any]] = []
    for frame in frames[:-1]:
        assert frame.startswith("data: ")
        assert "\n" not in frame
        part = json.loads(frame[len("data: ") :])
        errors = [e.message for e in VALIDATOR.iter_errors(part)]
        assert errors == [], f"{part} is not a UI message chunk: {errors}"
        parts.append(part)
    return parts


def order_problems(parts: list[dict[str, Any]]) -> list[str]:
    """What breaks the stream's order rules in ``parts`` (empty when none does)."""
    problems: list[str] = []
    kinds = [p["type"] for p in parts]
    if not kinds or kinds[0] != "start" or kinds.count("start") != 1:
        problems.append("the stream does not open with one start")
    if not kinds or kinds[-1] != "finish" or kinds.count("finish") != 1:
        problems.append("the stream does not end with one finish")
    open_texts: dict[str, set[str]] = {"text": set(), "reasoning": set()}
    calls: dict[str, str] = {}  # id -> "streaming" | "available" | "done"
    step = False
    for i, part in enumerate(parts):
        kind, where = part["type"], f"{i} {part['type']}"
        family, _, phase = kind.partition("-")
        if family in open_texts and phase in ("start", "delta", "end"):
            ids = open_texts[family]
            if phase == "start" and (ids or any(open_texts.values())):
                problems.append(f"{where}: starts while another text or reasoning is open")
            if phase != "start" and part["id"] not in ids:
                problems.append(f"{where}: {part['id']} is not open")
            ids.add(part["id"]) if phase == "start" else None
            ids.discard(part["id"]) if phase == "end" else None
        elif kind == "tool-input-start":
            if part["toolCallId"] in calls:
                problems.append(f"{where}: a tool call started twice")
            calls[part["toolCallId"]] = "streaming"
        elif kind == "tool-input-delta" and calls.get(part["toolCallId"]) != "streaming":
            problems.append(f"{where}: input of a call that is not streaming")
        elif kind == "tool-input-available":
            if calls.get(part["toolCallId"], "streaming") != "streaming":
                problems.append(f"{where}: input of a call already available")
            calls[part["toolCallId"]] = "available"
        elif kind in ("tool-output-available", "tool-output-error"):
            if calls.get(part["toolCallId"]) != "available":
                problems.append(f"{where}: an output before its call's input was available")
            calls[part["toolCallId"]] = "done"
        elif kind in ("start-step", "finish-step"):
            if step == (kind == "start-step"):
                problems.append(f"{where}: steps do not alternate")
            step = kind == "start-step"
        elif kind == "finish" and (step or any(open_texts.values())):
            problems.append(f"{where}: the message finishes with a step, text or reasoning open")
    return problems


def of_type(parts: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [p for p in parts if p["type"] == kind]


# --- out: a run's events ---------------------------------------------------------------------------------------


async def test_a_run_with_thinking_text_two_tool_calls_and_a_typed_output_streams_as_valid_chunks() -> None:
    run = await events_of(typed_agent())
    parts = streamed(run, message_id="msg-1")
    assert order_problems(parts) == []
    start, finish = parts[0], parts[-1]
    assert start == {
        "type": "start",
        "messageId": "msg-1",
        "messageMetadata": {"runId": run_id_of(run), "model": "scripted:scripted"},
    }
    assert "".join(p["delta"] for p in of_type(parts, "reasoning-delta")) == THINKING
    assert "".join(p["delta"] for p in of_type(parts, "text-delta")) == SAID
    kinds = [p["type"] for p in parts]
    assert kinds.index("reasoning-end") < kinds.index("text-start")  # in the order the model wrote them
    calls = of_type(parts, "tool-input-available")
    assert [(c["toolName"], c["input"]) for c in calls] == [
        ("lookup", {"number": "A1"}),
        ("refund", {"number": "A1", "api_key": "***"}),  # a secret-named argument never leaves the server
        ("final_result", {"number": "A1", "total": 12.5}),
    ]
    deltas = {p["toolCallId"]: json.loads(p["inputTextDelta"]) for p in of_type(parts, "tool-input-delta")}
    assert deltas[calls[0]["toolCallId"]] == {"number": "A1"}
    (ok, processed) = of_type(parts, "tool-output-available")
    assert (ok["toolCallId"], ok["output"]) == (calls[0]["toolCallId"], "invoice A1: 12.5 EUR")
    assert processed["toolCallId"] == calls[2]["toolCallId"]
    (failed,) = of_type(parts, "tool-output-error")
    assert failed["toolCallId"] == calls[1]["toolCallId"]
    assert "was refused" in failed["errorText"]
    assert kinds.count("start-step") == 2
    # usage per call (transient), the typed output as one data part (as written, then as it is), then finish
    assert [p["data"]["turn"] for p in of_type(parts, "data-usage")] == [1, 2]
    assert all(p["transient"] for p in of_type(parts, "data-usage"))
    outputs = of_type(parts, "data-output")
    assert {p["id"] for p in outputs} == {"output"}
    assert outputs[-1]["data"] == {"number": "A1", "total": 12.5}
    assert kinds.index("data-output", kinds.index("finish-step")) < kinds.index("finish")
    meta = finish["messageMetadata"]
    result = result_of(run)
    assert (meta["stopReason"], meta["degraded"], meta["error"]) == ("complete", False, None)
    assert meta["usage"]["input_tokens"] == result.usage.input_tokens
    assert (meta["runId"], meta["turns"]) == (result.run_id, result.turns)


async def test_a_text_answer_is_one_text_part_in_one_step() -> None:
    parts = streamed(await events_of(text_agent("Hello there.")))
    assert order_problems(parts) == []
    kinds = [p["type"] for p in parts]
    assert kinds[:3] == ["start", "start-step", "text-start"]
    assert kinds[-4:] == ["text-end", "data-usage", "finish-step", "finish"]
    assert "".join(p["delta"] for p in of_type(parts, "text-delta")) == "Hello there."
    assert of_type(parts, "data-output") == []  # a text answer has no typed output


async def test_a_failed_run_sends_an_error_part_with_its_code_then_finishes() -> None:
    parts = streamed(await events_of(failing_agent()))
    assert order_problems(parts) == []
    kinds = [p["type"] for p in parts]
    assert kinds[-2:] == ["error", "finish"]
    assert parts[-2]["errorText"] == "[auth_failed] the key was refused"
    assert parts[-1]["messageMetadata"]["error"] == {"code": "auth_failed", "message": "the key was refused"}
    (failed,) = of_type(parts, "data-call-failed")
    assert failed["data"]["then"] == "stop"


async def test_a_cancelled_run_aborts_then_finishes() -> None:
    parts = streamed(await cancelled_events())
    assert order_problems(parts) == []
    assert [p["type"] for p in parts][-2:] == ["abort", "finish"]
    assert parts[-1]["messageMetadata"]["stopReason"] == "cancelled"


async def test_a_degraded_run_finishes_normally_and_says_why_it_stopped() -> None:
    parts = streamed(await events_of(limited_agent()))
    assert order_problems(parts) == []
    assert of_type(parts, "error") == []
    meta = parts[-1]["messageMetadata"]
    assert (meta["stopReason"], meta["degraded"]) == ("max_turns", True)


async def test_a_handoff_is_a_transient_data_part_and_the_last_agent_is_named() -> None:
    parts = streamed(await events_of(handoff_agent()))
    assert order_problems(parts) == []
    (handoff,) = of_type(parts, "data-handoff-taken")
    assert handoff["data"] == {"from_agent": "triage", "to_agent": "billing", "turn": 1}
    assert [p["type"] for p in of_type(parts, "text-start")] == ["text-start", "text-start"]
    assert parts[-1]["messageMetadata"]["lastAgent"] == "billing"


async def test_a_sub_agents_events_are_transient_data_parts_inside_its_call() -> None:
    run = await events_of(team_agent())
    parts = streamed(run)
    assert order_problems(parts) == []
    relayed = of_type(parts, "data-sub-agent-event")
    assert all(p["transient"] for p in relayed)
    assert {tuple(p["data"]["path"]) for p in relayed} == {("ask_helper",)}
    inner = [p["data"]["event"]["kind"] for p in relayed]
    assert inner[0] == "run_started"
    assert inner[-1] == "run_completed"
    assert {"thinking_delta", "tool_call_started", "tool_result_received", "text_delta"} <= set(inner)
    assert relayed[-1]["data"]["event"]["result"]["text"] == "B2 is 12.5 EUR."
    # the calling tool's output comes after its sub-agent's events; the sub-agent's own calls are not tool parts
    (call,) = of_type(parts, "tool-input-available")
    (output,) = of_type(parts, "tool-output-available")
    assert (call["toolName"], output["output"]) == ("ask_helper", "B2 is 12.5 EUR.")
    assert parts.index(call) < parts.index(relayed[0]) < parts.index(relayed[-1]) < parts.index(output)


def test_events_without_a_chunk_of_their_own_are_transient_data_parts_named_by_their_kind() -> None:
    marker = Message("user", (Text("summary"),))
    others: list[RunEvent] = [
        ProviderRetry(2, 1.5, "rate_limited", "slow down", 429),
        RateLimitWait(0.5, "requests"),
        FallbackTaken("a:model", "timeout", "too slow", "b:model", 2),
        CallFailed(1, 1, "invalid_response", "empty answer", "retry"),
        Compacted(2, 9000, 1200, 10, 2, 1, "threshold", marker),
        HandoffTaken("triage", "billing", 1),
    ]
    translator = vercel.Translator()
    translator.events(RunStarted("x", "m", "p"))
    parts = [part for event in others for part in translator.events(event)]
    for part in parts:
        assert list(VALIDATOR.iter_errors(part)) == []
    names = ["provider-retry", "rate-limit-wait", "fallback-taken", "call-failed", "compacted", "handoff-taken"]
    assert [p["type"] for p in parts] == [f"data-{name}" for name in names]
    assert all(p["transient"] for p in parts)
    assert parts[2]["data"] == {
        "model": "a:model",
        "code": "timeout",
        "message": "too slow",
        "next_model": "b:model",
        "attempt": 2,
    }


def test_a_result_whose_call_was_never_announced_gets_its_input_first() -> None:
    translator = vercel.Translator()
    translator.events(RunStarted("x", "m", "p"))
    result = ToolResult("call-9", "lookup", "Not completed: the run was cancelled.", is_error=True, code="cancelled")
    parts = translator.events(ToolResultReceived(result, 1))
    kinds = [p["type"] for p in parts]
    assert kinds == ["tool-input-start", "tool-input-delta", "tool-input-available", "tool-output-error"]
    assert parts[2]["input"] == {}


def test_a_run_that_dies_without_a_result_sends_an_error_and_finishes() -> None:
    translator = vercel.Translator()
    lines = [vercel.encode_part(p) for p in translator.events(RunStarted("x", "m", "p"))]
    lines += [vercel.encode_part(p) for p in translator.events(TextDelta("half an ans"))]
    lines += [vercel.encode_part(p) for p in translator.fail(RuntimeError("the worker died"))]
    parts = read_back("".join(lines) + vercel.DONE)
    assert order_problems(parts) == []
    assert [p["type"] for p in parts][-3:] == ["text-end", "error", "finish"]
    assert parts[-2]["errorText"] == "[error] RuntimeError: the worker died"
    assert translator.events(TextDelta("more")) == []
    assert translator.fail(RuntimeError("again")) == []


async def test_a_known_key_split_across_deltas_never_reaches_the_client() -> None:
    key = "sk-proj-abcdefghijklmnop0123"
    run = await events_of(text_agent(f"Your key is {key}, keep it."))
    parts = streamed(run, redaction=Redaction(Masker([key])))
    text = "".join(p["delta"] for p in of_type(parts, "text-delta"))
    assert text == "Your key is ***, keep it."
    assert len(of_type(parts, "text-delta")) > 2  # still streamed in pieces


def test_the_order_check_finds_what_breaks_the_rules() -> None:
    bad = [
        {"type": "text-delta", "id": "t", "delta": "x"},
        {"type": "tool-output-available", "toolCallId": "c", "output": "x"},
        {"type": "start-step"},
        {"type": "finish"},
    ]
    assert len(order_problems(bad)) == 4  # no start, delta of no text, output before input, finish inside a step


def test_the_schema_refuses_an_unknown_type_a_missing_field_and_an_extra_field() -> None:
    assert list(VALIDATOR.iter_errors({"type": "text", "text": "x"}))  # an older protocol's part
    assert list(VALIDATOR.iter_errors({"type": "text-delta", "id": "t"}))
    assert list(VALIDATOR.iter_errors({"type": "finish", "finishReason": "stop"}))  # not in the first version
    assert list(VALIDATOR.iter_errors({"type": "data-x", "data": 1})) == []


def test_the_response_headers_name_the_protocol() -> None:
    assert vercel.HEADERS["x-vercel-ai-ui-message-stream"] == "v1"
    assert vercel.HEADERS["content-type"] == "text/event-stream"
    assert vercel.DONE == "data: [DONE]\n\n"
    assert (
        vercel.encode_part({"type": "text-delta", "id": "t", "delta": "é\n"})
        == 'data: {"type":"text-delta","id":"t","delta":"é\\n"}\n\n'
    )


# --- in: the useChat body ---------------------------------------------------------------------------------------


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def chat(*messages: dict[str, Any], **more: Any) -> str:
    return json.dumps({"id": "chat-1", "messages": list(messages), "trigger": "submit-message", **more})


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": "u", "role": "user", "parts": list(parts)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


ASSISTANT: dict[str, Any] = {
    "id": "a1",
    "role": "assistant",
    "parts": [
        {"type": "step-start"},
        {"type": "reasoning", "text": "the page's own"},
        text("Looking."),
        {
            "type": "tool-lookup",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {"number": "A1"},
            "output": "12.5 EUR",
        },
        {
            "type": "dynamic-tool",
            "toolName": "refund",
            "toolCallId": "c2",
            "state": "output-error",
            "input": {"number": "A1"},
            "errorText": "refused",
        },
        {"type": "step-start"},
        text("A1 costs 12.5 EUR."),
        {
            "type": "tool-chart",
            "toolCallId": "c3",
            "state": "output-available",
            "input": {},
            "output": {"points": [1, 2]},
        },
        {"type": "step-start"},
        {"type": "tool-later", "toolCallId": "c4", "state": "input-available", "input": {}},
        {"type": "data-weather", "data": {"city": "Paris"}},
    ],
}


def test_a_use_chat_body_becomes_the_prompt_history_and_instructions() -> None:
    body = chat(
        {"id": "s", "role": "system", "parts": [text("Answer in French.")]},
        user(text("Total of A1?")),
        ASSISTANT,
        user(
            text("And this?"),
            {"type": "file", "mediaType": "image/png", "filename": "a.png", "url": data_url(PNG, "image/png")},
        ),
        messageId="m-9",
        model="fast",
    )
    request = vercel.chat_input(body)
    assert (request.chat_id, request.trigger, request.message_id, request.extra) == (
        "chat-1",
        "submit-message",
        "m-9",
        {"model": "fast"},
    )
    assert request.instructions == "Answer in French."
    assert request.continues is None
    assert request.prompt == ["And this?", Attachment("image/png", PNG, None, "a.png")]
    first, step1, results1, step2, results2 = request.history
    assert first == Message.user("Total of A1?")
    assert step1.parts == (
        Text("Looking."),
        ToolCall("c1", "lookup", {"number": "A1"}),
        ToolCall("c2", "refund", {"number": "A1"}),
    )
    assert results1.parts == (
        ToolResult("c1", "lookup", "12.5 EUR"),
        ToolResult("c2", "refund", "refused", is_error=True, code="tool_failed"),
    )
    assert step2.parts == (Text("A1 costs 12.5 EUR."), ToolCall("c3", "chart", {}))
    assert results2.parts == (ToolResult("c3", "chart", '{"points": [1, 2]}'),)  # the call without output is left out


def test_a_conversation_ending_with_a_client_tools_output_runs_without_a_prompt() -> None:
    answered = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "tool-confirm", "toolCallId": "c9", "state": "output-available", "input": {}, "output": "yes"}
        ],
    }
    request = vercel.chat_input(chat(user(text("Go")), answered))
    assert request.prompt is None
    assert request.continues == "a"  # the answer goes on in the message that holds the call
    assert request.history[-1] == Message("tool", (ToolResult("c9", "confirm", "yes"),))


def test_a_greeting_before_the_first_user_message_goes_to_the_instructions() -> None:
    greeting = {"id": "g", "role": "assistant", "parts": [text("Hi! Ask me about invoices.")]}
    system = {"id": "s", "role": "system", "parts": [text("Be brief.")]}
    request = vercel.chat_input(chat(system, greeting, user(text("A1?"))))
    assert request.history == ()
    assert request.prompt == ["A1?"]
    assert request.instructions == f"Be brief.\n\n{OPENING}\n\nHi! Ask me about invoices."


def test_a_file_by_url_is_an_attachment_by_reference() -> None:
    part = {"type": "file", "mediaType": "application/pdf", "url": "https://example.com/r.pdf", "filename": "r.pdf"}
    request = vercel.chat_input(chat(user(part)))
    assert request.prompt == [Attachment("application/pdf", None, "https://example.com/r.pdf", "r.pdf")]


async def test_the_read_body_runs_and_the_model_is_sent_the_history_and_the_file() -> None:
    request = vercel.chat_input(
        chat(
            user(text("Total of A1?")),
            ASSISTANT,
            user(text("Describe"), {"type": "file", "mediaType": "image/png", "url": data_url(PNG, "image/png")}),
        )
    )
    model = ScriptedProvider([reply("A black square.")])
    run = await events_of(Agent(model), request.prompt, history=request.history, instructions=request.instructions)
    parts = streamed(run)
    assert parts[-1]["messageMetadata"]["stopReason"] == "complete"
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    assert Attachment("image/png", PNG) in sent[-1].parts


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("{oops", "not JSON"),
        ("[]", "JSON object"),
        (json.dumps({"id": "x"}), "no `messages`"),
        (chat(), "no message"),
        (chat({"role": "user", "content": "hi"}), "`parts` list"),
        (chat({"role": "tool", "parts": []}), "not a UI message's role"),
        (chat(user({"text": "no type"})), "with a `type`"),
        (chat(user({"type": "text", "text": 3})), "`text` string"),
        (chat(user({"type": "file", "url": "data:image/png;base64,AAAA"})), "`mediaType`"),
        (chat(user({"type": "file", "mediaType": "image/png", "url": "data:image/png,raw"})), "base64 data URL"),
        (chat(user({"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,!!"})), "not valid base64"),
        (chat(user({"type": "file", "mediaType": "video/mp4", "url": "https://x/v.mp4"})), "cannot be an attachment"),
        (chat(user({"type": "file", "mediaType": "image/png", "url": "ftp://x/a.png"})), "http(s)"),
        (chat(user(text("hi")), {"role": "assistant", "parts": [text("Hello")]}), "ends with an assistant"),
        (chat(user({"type": "data-x", "data": 1})), "no message to answer"),
        (chat(user(text("hi")), {"role": "assistant", "parts": [{"type": "tool-", "toolCallId": "c"}]}), "tool name"),
        (json.dumps({"id": 3, "messages": [user(text("hi"))]}), "`id` must be a string"),
    ],
)
def test_bad_input_is_request_invalid_with_a_message_that_names_the_problem(body: str, says: str) -> None:
    with pytest.raises(RequestInvalid) as raised:
        vercel.chat_input(body)
    assert raised.value.code == "request_invalid"
    assert says in raised.value.message
