"""A run's events as plain JSON for a page: every kind encodes, and nothing secret leaves the server."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from tether.errors import AuthFailed
from tether.events import RunCompleted, RunResult, SubAgentEvent, TextDelta, ThinkingDelta, ToolResultReceived
from tether.limits import StopReason
from tether.messages import Attachment, ToolResult
from tether.redaction import Redaction
from tether.secrets import Masker
from tether.serve import events_json
from tether.serve.masking import HeldText
from tether.usage import Usage

from .runs import cancelled_events, events_of, failing_agent, result_of, team_agent, typed_agent

KEY = "sk-live-0123456789abcdefXYZ"
SHOWN = Redaction(Masker([KEY]))


async def test_every_event_of_a_run_encodes_as_json_with_its_kind() -> None:
    for run in (await events_of(typed_agent()), await events_of(team_agent()), await events_of(failing_agent())):
        for event in run:
            data = json.loads(events_json.encode(event))
            assert data["kind"] == event.kind
            frame = events_json.sse(event)
            assert (
                frame == f"event: {event.kind}\ndata: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"
            )


async def test_a_finished_run_is_its_summary_without_the_transcript() -> None:
    run = await events_of(typed_agent())
    result = result_of(run)
    data = events_json.to_jsonable(run[-1])["result"]
    assert "messages" not in data
    assert (data["stop_reason"], data["output"], data["run_id"]) == (
        "complete",
        {"number": "A1", "total": 12.5},
        result.run_id,
    )
    assert data["usage"] == msgspec.to_builtins(result.usage)
    assert [record["turn"] for record in data["turn_records"]] == [1, 2]
    tool_calls = data["turn_records"][0]["tool_calls"]
    assert [(c["name"], c["is_error"], c["code"]) for c in tool_calls] == [
        ("lookup", False, None),
        ("refund", True, "tool_failed"),
    ]
    assert data["error"] is None
    assert data["cost"] is None  # the scripted model has no price


async def test_a_failed_runs_error_is_its_code_and_message() -> None:
    data = events_json.to_jsonable((await events_of(failing_agent()))[-1])
    assert data["result"]["error"] == {"code": "auth_failed", "message": "the key was refused"}
    assert events_json.error_summary(ValueError("bad value")) == {"code": "error", "message": "ValueError: bad value"}


async def test_a_sub_agents_event_carries_its_event_in_the_same_form() -> None:
    run = await events_of(team_agent())
    relayed = [e for e in run if isinstance(e, SubAgentEvent)]
    data = events_json.to_jsonable(relayed[-1])
    assert (data["path"], data["event"]["kind"]) == (["ask_helper"], "run_completed")
    assert data["event"]["result"]["text"] == "B2 is 12.5 EUR."


async def test_secrets_are_masked_in_arguments_results_messages_and_the_summary() -> None:
    run = await events_of(typed_agent())
    text = "".join(events_json.encode(event).decode() for event in run)
    assert "sk-live-0123456789abcdef" not in text  # the refund call's api_key argument, everywhere it appears
    assert '"api_key":"***"' in text
    result = ToolResult("c", "env", f"KEY={KEY}", attachments=(Attachment("image/png", b"\x89PNG" + b"\x01" * 64),))
    shown = events_json.to_jsonable(ToolResultReceived(result, 1), SHOWN)["result"]
    assert KEY not in shown["content"]
    assert shown["attachments"] == [{"media_type": "image/png", "name": None, "size": 68, "url": None}]  # no bytes
    masked = events_json.to_jsonable(TextDelta(f"the key is {KEY}"), SHOWN)
    assert masked == {"kind": "text_delta", "text": "the key is ***"}
    failure = RunResult("", StopReason.ERROR, (), Usage(), error=AuthFailed(f"bad {KEY}"))
    assert KEY not in json.dumps(events_json.to_jsonable(RunCompleted(failure), SHOWN))


def test_a_stream_holds_back_what_could_start_a_key_and_sends_it_before_the_next_event() -> None:
    stream = events_json.Stream(SHOWN)
    sent: list[dict[str, Any]] = []
    for piece in ("Your key: sk-li", "ve-0123456789", "abcdefXYZ. Done", "."):
        sent += stream.events(TextDelta(piece))
    sent += stream.events(ThinkingDelta("sk-"))  # another kind: the text held back goes first
    sent += stream.events(RunCompleted(RunResult("x", StopReason.COMPLETE, (), Usage())))
    texts = "".join(e["text"] for e in sent if e["kind"] == "text_delta")
    assert texts == "Your key: ***. Done."
    assert [e["kind"] for e in sent][-2:] == ["thinking_delta", "run_completed"]
    assert sent[-2]["text"] == "sk-"


def test_a_stream_without_known_keys_holds_nothing_back() -> None:
    stream = events_json.Stream()
    assert stream.events(TextDelta("sk-li")) == [{"kind": "text_delta", "text": "sk-li"}]


def test_held_text_masks_a_key_in_any_split_and_keeps_back_only_a_possible_start() -> None:
    text = f"a {KEY} b {KEY[:5]}"
    for size in range(1, 8):
        held = HeldText(SHOWN)
        out = "".join(held.push(text[i : i + size]) for i in range(0, len(text), size)) + held.flush()
        assert out == f"a *** b {KEY[:5]}"
    assert Masker([KEY]).held_back(f"x {KEY[:9]}") == 9
    assert Masker([KEY]).held_back("nothing here") == 0
    assert Masker().held_back("sk-") == 0


async def test_a_cancelled_run_summary_says_so() -> None:
    data = events_json.to_jsonable((await cancelled_events())[-1])
    assert data["result"]["stop_reason"] == "cancelled"
