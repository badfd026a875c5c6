"""Per-call records on the result (``RunResult.turn_records``) and the observer hooks the loop calls.

Every provider call gets a ``TurnRecord`` (duration, time to first token, usage, finish reason, retries, the
code of the failure that ended it) carrying the records of the tool calls its answer asked for; a tool that
ran has a ``duration_ms``, a call answered without running has none. Observers (``Telemetry(observers=...)``)
see every hook in order, also when the run is cancelled mid-tool.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import uuid
from contextlib import AbstractContextManager
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from tests.helpers import assert_valid
from tests.providers.test_http_faults import Exchange, Serve, provider, serve, stream_of
from tether import Agent, Limits, tool
from tether.cli.runner import result_json
from tether.errors import RateLimited
from tether.events import RunResult, ToolCallRecord, TurnRecord
from tether.messages import Message, ToolCall, ToolResult
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, fail, parallel, reply
from tether.telemetry import RunInfo, RunObserver, Telemetry

__all__ = ["serve"]  # the loopback server fixture, shared with the provider tests


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


async def test_each_call_has_a_record_with_its_usage_finish_and_the_tool_calls_it_asked_for() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}, id="c1"), reply("5")])
    result = await Agent(model, tools=[add]).run("2+3?")
    first, second = result.turn_records
    assert (first.turn, first.attempt, first.final, first.finish_reason) == (1, 1, False, "tool_calls")
    assert first.usage == result.turn_usage[0]
    assert first.usage.output_tokens > 0
    assert first.ttft_ms is not None
    assert 0 <= first.ttft_ms <= first.duration_ms
    [added] = first.tool_calls
    assert (added.call_id, added.name, added.is_error, added.code) == ("c1", "add", False, None)
    assert added.duration_ms is not None
    assert added.duration_ms >= 0
    assert (second.turn, second.finish_reason, second.tool_calls, second.error) == (2, "stop", (), None)
    assert result.duration_ms >= first.duration_ms + second.duration_ms


async def test_a_call_answered_without_running_has_no_duration_and_a_failed_tool_has_its_code() -> None:
    model = ScriptedProvider([parallel(call("nope", {}, id="u"), call("explode", {}, id="x")), reply("done")])
    result = await Agent(model, tools=[explode]).run("go")
    unknown, exploded = result.turn_records[0].tool_calls
    assert (unknown.code, unknown.is_error, unknown.duration_ms) == ("tool_not_found", True, None)
    assert (exploded.code, exploded.is_error) == ("tool_failed", True)
    assert exploded.duration_ms is not None, "the tool ran, then failed"


async def test_a_rejected_answer_and_its_corrective_retry_are_two_records() -> None:
    model = ScriptedProvider([reply(""), reply("fine")])
    result = await Agent(model).run("hi")
    rejected, retried = result.turn_records
    assert (rejected.turn, rejected.attempt, rejected.rejected) == (1, 1, "the answer was empty")
    assert (retried.turn, retried.attempt, retried.rejected) == (1, 2, None)


async def test_a_failed_call_records_the_error_code() -> None:
    model = ScriptedProvider([fail(RateLimited("slow down"))])
    result = await Agent(model).run("hi")
    [record] = result.turn_records
    assert record.error == "rate_limited"
    assert result.stop_reason == "error"


async def test_the_summary_call_after_a_limit_is_a_final_record() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2, in short")])
    result = await Agent(model, tools=[add], limits=Limits(max_turns=1)).run("go")
    assert [r.final for r in result.turn_records] == [False, True]
    assert result.text == "2, in short"


async def test_retries_inside_a_provider_call_are_counted_on_its_record(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
            await exchange.json(429, body, {"Retry-After": "0"})
            return
        await exchange.sse(stream_of("Made ", "it"))

    server = await serve(respond)
    recorder = Recorder()
    agent = Agent(provider(server.base_url), telemetry=Telemetry(observers=[lambda: recorder]))
    result = await agent.run("hi")
    [record] = result.turn_records
    assert record.retries == 1
    assert (record.model, record.response_id) == ("test-model", "chatcmpl-1")
    assert record.ttft_ms is not None
    assert [args for name, args in recorder.calls if name == "retry"] == [("rate_limited", 1, 0.0)]


async def test_records_are_in_the_cli_json_and_serialize() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    result = await Agent(model, tools=[add]).run("2+3?")
    data = json.loads(json.dumps(result_json(result)))
    assert [r["turn"] for r in data["turn_records"]] == [1, 2]
    assert data["turn_records"][0]["tool_calls"][0]["name"] == "add"
    assert data["turn_records"][0]["usage"]["output_tokens"] == result.turn_usage[0].output_tokens
    assert data["duration_ms"] == result.duration_ms


async def test_each_record_carries_the_text_of_its_answer() -> None:
    model = ScriptedProvider([reply(""), call("add", {"a": 2, "b": 3}, text="Adding."), reply("It is 5.")])
    result = await Agent(model, tools=[add]).run("2+3?")
    assert [r.text for r in result.turn_records] == ["", "Adding.", "It is 5."]
    assert result.turn_records[-1].text == result.text
    assert json.loads(json.dumps(result_json(result)))["turn_records"][2]["text"] == "It is 5."


async def test_the_observer_sees_the_answer_text_on_the_record_of_each_call() -> None:
    recorder = Recorder()
    model = ScriptedProvider([reply("Hello there")])
    await Agent(model, telemetry=Telemetry(observers=[lambda: recorder])).run("hi")
    [record] = [args[0] for name, args in recorder.calls if name == "call_ended"]
    assert record.text == "Hello there"


OLD_RECORD = (
    "gASVtQAAAAAAAACMDXRldGhlci5ldmVudHOUjApUdXJuUmVjb3JklJOUKEsBSwGJR0ApAAAAAAAAR0AIAAAAAAAAjAx0ZXRoZXIudXNhZ2WUjAVV"
    "c2FnZZSTlChLCksFSwBLAEsASwF0lFKUjAp0b29sX2NhbGxzlIwBbZSMBHJlc3CUSwBOTmgAjA5Ub29sQ2FsbFJlY29yZJSTlCiMAmMxlIwDYWRk"
    "lIlORz/4AAAAAAAAdJRSlIWUiXSUUpQu"
)
"""A ``TurnRecord`` pickled (as a durable run's result keeps it) before records carried their answer's text."""


def test_a_record_stored_before_records_had_text_is_read_back_with_empty_text() -> None:
    record = pickle.loads(base64.b64decode(OLD_RECORD))
    assert isinstance(record, TurnRecord)
    assert (record.turn, record.finish_reason, record.tool_calls[0].name, record.text) == (1, "tool_calls", "add", "")
    assert pickle.loads(pickle.dumps(replace(record, text="kept"))).text == "kept"


# --- the observer hooks ---------------------------------------------------------------------------------------


class Recorder(RunObserver):
    """Keeps every hook call: (name, arguments)."""

    __slots__ = ("calls", "entered")

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.entered: list[str] = []

    def run_started(self, run: RunInfo) -> None:
        self.calls.append(("run_started", (run,)))

    def call_started(self, turn: int, attempt: int, final: bool, request: Request) -> None:
        self.calls.append(("call_started", (turn, attempt, final)))

    def call_context(self) -> AbstractContextManager[Any] | None:
        return Entered(self.entered, "call")

    def retry(self, error: Any, attempt: int, wait: float) -> None:
        self.calls.append(("retry", (error.code, attempt, wait)))

    def call_ended(self, record: TurnRecord, message: Message, error: BaseException | None) -> None:
        self.calls.append(("call_ended", (record, message, error)))

    def tool_started(self, call: ToolCall, turn: int) -> None:
        self.calls.append(("tool_started", (call.id, turn)))

    def tool_context(self, call: ToolCall) -> AbstractContextManager[Any] | None:
        return Entered(self.entered, f"tool {call.id}")

    def tool_ended(
        self, call: ToolCall, result: ToolResult, record: ToolCallRecord, exception: BaseException | None
    ) -> None:
        self.calls.append(("tool_ended", (call.id, result.code, record)))

    def run_ended(self, result: RunResult) -> None:
        self.calls.append(("run_ended", (result,)))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class Entered(AbstractContextManager[None]):
    def __init__(self, log: list[str], what: str) -> None:
        self.log, self.what = log, what

    def __enter__(self) -> None:
        self.log.append(self.what)

    def __exit__(self, *exc: object) -> None:
        self.log.append("/" + self.what)


def observed(model: ScriptedProvider, **options: Any) -> tuple[Agent, Recorder]:
    recorder = Recorder()
    return Agent(model, telemetry=Telemetry(observers=[lambda: recorder]), **options), recorder


async def test_the_hooks_come_in_order_and_the_contexts_are_entered_around_the_provider_and_the_tool() -> None:
    agent, recorder = observed(ScriptedProvider([call("add", {"a": 1, "b": 2}, id="c1"), reply("3")]), tools=[add])
    result = await agent.run("1+2?")
    assert recorder.names == [
        "run_started", "call_started", "call_ended", "tool_started", "tool_ended", "call_started", "call_ended",
        "run_ended",
    ]  # fmt: skip
    info = recorder.calls[0][1][0]
    assert (info.run_id, info.provider, info.model, info.prompt) == (result.run_id, "scripted", "scripted", "1+2?")
    assert [d.name for d in info.tools] == ["add"]
    assert recorder.calls[-1][1][0] is result
    assert "tool c1" in recorder.entered
    assert recorder.entered.count("call") >= 2
    assert _balanced(recorder.entered)


async def test_a_run_cancelled_mid_tool_still_ends_with_run_ended_and_no_tool_ended_for_the_open_call() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    agent, recorder = observed(ScriptedProvider([call("wait_forever", {}, id="w")]), tools=[wait_forever])
    handle = agent.start("go")
    await started.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert recorder.names[-1] == "run_ended"
    assert "tool_ended" not in recorder.names, "the call never finished: run_ended closes it"
    [record] = result.turn_records[0].tool_calls
    assert (record.code, record.duration_ms) == ("cancelled", None)
    assert _balanced(recorder.entered)


scripts = st.lists(st.sampled_from(["text", "add", "explode", "both", "empty"]), min_size=1, max_size=6).map(
    lambda kinds: [_step(kind, i) for i, kind in enumerate(kinds)]
)


@given(script=scripts, max_turns=st.integers(min_value=1, max_value=4))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_call_and_tool_hook_is_paired_and_matches_the_records(script: list[Step], max_turns: int) -> None:
    model = ScriptedProvider([*script, reply("end"), reply("summary")])
    agent, recorder = observed(model, tools=[add, explode], limits=Limits(max_turns=max_turns))
    result = asyncio.run(agent.run("go"))
    assert_valid(result)
    names = recorder.names
    assert names[0] == "run_started"
    assert names[-1] == "run_ended"
    assert names.count("run_started") == names.count("run_ended") == 1
    ended = [args[0] for name, args in recorder.calls if name == "call_ended"]
    assert names.count("call_started") == len(ended) == len(result.turn_records)
    assert ended == [msgspec.structs.replace(r, tool_calls=()) for r in result.turn_records]
    tool_records = [args[2] for name, args in recorder.calls if name == "tool_ended"]
    assert tool_records == [t for r in result.turn_records for t in r.tool_calls]
    assert names.count("tool_started") == len(tool_records)
    assert _balanced(recorder.entered)


def _step(kind: str, i: int) -> Step:
    if kind == "text":
        return reply(f"answer {i}")
    if kind == "add":
        return call("add", {"a": i, "b": 1})
    if kind == "explode":
        return call("explode", {})
    if kind == "both":
        return parallel(call("add", {"a": i, "b": 2}), call("explode", {}))
    return reply("")


def _balanced(log: list[str]) -> bool:
    """Every context entered was left, in reverse order."""
    stack: list[str] = []
    for item in log:
        if item.startswith("/"):
            if not stack or stack.pop() != item[1:]:
                return False
        else:
            stack.append(item)
    return not stack


async def test_each_run_id_is_a_new_random_version_4_uuid_in_hex() -> None:
    agent = Agent(ScriptedProvider([reply("a"), reply("b"), reply("c")]))
    ids = [(await agent.run("hi")).run_id for _ in range(3)]
    assert len(set(ids)) == 3
    for run_id in ids:
        parsed = uuid.UUID(hex=run_id)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, run_id)
