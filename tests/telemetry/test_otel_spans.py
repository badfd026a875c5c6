"""Spans and metrics of scripted runs: names, attributes, parentage and status (tether.telemetry.otel)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from tests.telemetry.conftest import Otel, attrs, check_tree, parent_of
from tether import Agent, Limits, tool
from tether.events import RunEvent, ToolCallStarted
from tether.providers.base import ModelSettings
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.usage import Usage


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


async def test_a_run_with_parallel_calls_and_a_tool_error_makes_the_conventions_spans(otel: Otel) -> None:
    model = ScriptedProvider(
        [
            parallel(call("add", {"a": 1, "b": 2}, id="c1"), call("explode", {"reason": "x"}, id="c2"),
                     usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=3, reasoning_tokens=2)),
            reply("done", usage=Usage(input_tokens=20, output_tokens=1)),
        ]
    )  # fmt: skip
    agent = Agent(
        model, tools=[add, explode], concurrent_tools=True, settings=ModelSettings(temperature=0.5, max_tokens=99),
        telemetry=otel.telemetry(agent_name="calc"),
    )  # fmt: skip
    result = await agent.run("go")
    assert result.stop_reason == "complete"
    spans = otel.spans()
    runs = check_tree(spans)
    assert list(runs) == [result.run_id]
    run = runs[result.run_id]
    assert run.name == "invoke_agent calc"
    assert run.kind is SpanKind.INTERNAL
    assert run.parent is None
    assert run.status.status_code is StatusCode.UNSET
    assert attrs(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(run)["gen_ai.agent.name"] == "calc"
    assert attrs(run)["gen_ai.provider.name"] == "scripted"
    assert attrs(run)["tether.stop_reason"] == "complete"
    assert attrs(run)["gen_ai.usage.input_tokens"] == 33, "cache reads count as input tokens"
    assert attrs(run)["gen_ai.usage.output_tokens"] == 6

    first, second = otel.named("chat ")
    assert first.name == "chat scripted"
    assert first.kind is SpanKind.INTERNAL, "an in-process model's call is INTERNAL"
    assert attrs(first)["gen_ai.operation.name"] == "chat"
    assert attrs(first)["gen_ai.request.temperature"] == 0.5
    assert attrs(first)["gen_ai.request.max_tokens"] == 99
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(first)["gen_ai.usage.input_tokens"] == 13
    assert attrs(first)["gen_ai.usage.cache_read.input_tokens"] == 3
    assert attrs(first)["gen_ai.usage.reasoning.output_tokens"] == 2
    assert attrs(first)["tether.turn"] == 1
    assert attrs(first)["tether.final"] is False
    assert "gen_ai.response.time_to_first_chunk" in attrs(first)
    assert attrs(second)["tether.turn"] == 2
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)

    tools = {attrs(span)["gen_ai.tool.call.id"]: span for span in otel.named("execute_tool ")}
    ok, failed = tools["c1"], tools["c2"]
    assert ok.name == "execute_tool add"
    assert attrs(ok)["gen_ai.tool.type"] == "function"
    assert attrs(ok)["gen_ai.tool.description"] == "Add two integers."
    assert attrs(ok)["tether.tool.outcome"] == "ok"
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.name == "execute_tool explode"
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)["error.type"] == "tool_failed"
    assert attrs(failed)["tether.tool.outcome"] == "error"
    [exception] = [event for event in failed.events if event.name == "exception"]
    assert attrs(exception)["exception.type"] == "ValueError"
    assert "exception.message" not in attrs(exception), "a tool's message quotes its arguments: content"
    assert parent_of(ok, spans) is run
    assert parent_of(failed, spans) is run
    assert (ok.start_time or 0) >= (first.end_time or 0), "tools run after the call that asked for them ended"

    metrics = otel.metrics()
    [requests] = metrics["tether.client.requests"]
    assert requests.value == 2
    tokens = {attrs(p)["gen_ai.token.type"]: p for p in metrics["gen_ai.client.token.usage"]}
    assert tokens["input"].sum == 33, "cache reads count as input tokens"
    assert tokens["output"].sum == 6
    assert sum(p.count for p in metrics["gen_ai.client.operation.duration"]) == 2
    assert not any(name.startswith("gen_ai.client.inference") for name in metrics), "one layout, never both"
    tool_points = {attrs(p)["gen_ai.tool.name"]: p for p in metrics["gen_ai.execute_tool.duration"]}
    assert tool_points["explode"].attributes["error.type"] == "tool_failed"
    assert "error.type" not in tool_points["add"].attributes
    [agent_duration] = metrics["gen_ai.invoke_agent.duration"]
    assert attrs(agent_duration)["gen_ai.agent.name"] == "calc"
    [tool_calls] = metrics["gen_ai.invoke_agent.tool_calls"]
    assert tool_calls.sum == 2


async def test_the_run_span_is_a_child_of_the_span_current_when_it_started(otel: Otel) -> None:
    agent = Agent(ScriptedProvider([reply("hi")]), telemetry=otel.telemetry())
    with otel.tracer_provider.get_tracer("host").start_as_current_span("request handler") as outer:
        await agent.run("go")
    [run] = otel.named("invoke_agent")
    assert run.name == "invoke_agent", "no agent name: the operation alone"
    assert run.parent is not None
    assert run.parent.span_id == outer.get_span_context().span_id


async def test_the_summary_call_after_max_turns_is_a_chat_span_marked_final(otel: Otel) -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("summary")])
    agent = Agent(model, tools=[add], limits=Limits(max_turns=1), telemetry=otel.telemetry())
    result = await agent.run("go")
    assert result.stop_reason == "max_turns"
    check_tree(otel.spans())
    first, summary = otel.named("chat ")
    assert attrs(first)["tether.final"] is False
    assert attrs(summary)["tether.final"] is True
    [run] = otel.named("invoke_agent")
    assert attrs(run)["tether.stop_reason"] == "max_turns"
    assert run.status.status_code is StatusCode.UNSET, "a guard's stop is not an error"


async def test_a_failed_provider_call_makes_the_chat_and_the_run_errors(otel: Otel) -> None:
    from tether.errors import AuthFailed
    from tether.providers.scripted import fail

    agent = Agent(ScriptedProvider([fail(AuthFailed("bad key Bearer abc.def.ghi"))]), telemetry=otel.telemetry())
    result = await agent.run("go")
    assert result.stop_reason == "error"
    [chat] = otel.named("chat ")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "auth_failed"
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("error",)
    assert "abc.def.ghi" not in str(chat.status.description)
    [exception] = [event for event in chat.events if event.name == "exception"]
    assert "abc.def.ghi" not in str(attrs(exception)["exception.message"]), "bearer tokens are masked"
    [run] = otel.named("invoke_agent")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "auth_failed"
    [errors] = otel.metrics()["tether.client.errors"]
    assert attrs(errors)["error.type"] == "auth_failed"


async def test_a_cancelled_run_ends_the_interrupted_tool_spans_as_cancelled(otel: Otel) -> None:
    started = asyncio.Event()

    @tool
    async def slow(n: int) -> str:
        """Waits forever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedProvider([parallel(call("slow", {"n": 1}, id="s1"), call("slow", {"n": 2}, id="s2"))])
    agent = Agent(model, tools=[slow], concurrent_tools=True, telemetry=otel.telemetry())
    handle = agent.start("go")
    await started.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    check_tree(otel.spans())
    tools = otel.named("execute_tool ")
    assert len(tools) == 2
    for span in tools:
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "cancelled"
    [run] = otel.named("invoke_agent")
    assert attrs(run)["tether.stop_reason"] == "cancelled"
    assert run.status.status_code is StatusCode.UNSET, "a cancelled run is not an error"


async def test_a_span_made_in_a_sync_tool_on_a_worker_thread_is_a_child_of_its_execute_tool_span(otel: Otel) -> None:
    threads: list[threading.Thread] = []
    tracer = otel.tracer_provider.get_tracer("tool")

    @tool
    def lookup(key: str) -> str:
        """Looks a key up, in a span of its own."""
        threads.append(threading.current_thread())
        with tracer.start_as_current_span("lookup.inner"):
            return key.upper()

    model = ScriptedProvider([call("lookup", {"key": "k"}), reply("ok")])
    agent = Agent(model, tools=[lookup], telemetry=otel.telemetry())
    await agent.run("go")
    assert threads
    assert threads[0] is not threading.main_thread(), "the sync tool ran on a worker thread"
    spans = otel.spans()
    [inner] = otel.named("lookup.inner")
    [tool_span] = otel.named("execute_tool lookup")
    assert parent_of(inner, spans) is tool_span


async def test_content_is_not_captured_by_default(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    model = ScriptedProvider([call("add", {"a": 7310977, "b": 2}), reply("the answer is fortytwo")])
    agent = Agent(model, tools=[add], system="secret system prompt", telemetry=otel.telemetry())
    await agent.run("a private question")
    dumped = json.dumps([dict(span.attributes or {}) for span in otel.spans()], default=str)
    # the argument and the result are numbers no duration or count can spell by chance
    for text in ("secret system prompt", "a private question", "fortytwo", "7310977", "7310979"):
        assert text not in dumped
    for span in otel.spans():
        assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & set(span.attributes or {})  # fmt: skip


async def test_without_content_capture_a_tools_failure_shows_its_type_not_its_message(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)

    @tool
    def fetch(account: str) -> str:
        """Fetch an account."""
        raise LookupError(f"no account {account!r}")

    for capture in (False, True):
        otel.exporter.clear()
        model = ScriptedProvider([call("fetch", {"account": "acct-7310977"}), reply("none")])
        await Agent(model, tools=[fetch], telemetry=otel.telemetry(capture_content=capture)).run("x")
        [span] = otel.named("execute_tool fetch")
        [event] = [event for event in span.events if event.name == "exception"]
        everything = json.dumps([dict(s.attributes or {}) for s in otel.spans()] + [dict(event.attributes or {})])
        assert attrs(event)["exception.type"] == "LookupError"
        assert ("acct-7310977" in everything) is capture, "the argument reaches spans only with content capture"
        assert ("acct-7310977" in str(span.status.description)) is capture


@pytest.mark.parametrize("switch", ["settings", "environment"])
async def test_content_capture_puts_messages_on_spans_with_secrets_masked(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", "tok-very-secret-value-123")
    if switch == "environment":
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

    @tool
    def login(user: str, password: str) -> str:
        """Logs in."""
        return f"welcome {user}, your token is tok-very-secret-value-123"

    model = ScriptedProvider([call("login", {"user": "ann", "password": "hunter2hunter2"}), reply("logged in")])
    telemetry = otel.telemetry(capture_content=True) if switch == "settings" else otel.telemetry()
    agent = Agent(model, tools=[login], system="Be brief.", telemetry=telemetry)
    await agent.run("log me in")
    everything = json.dumps([dict(span.attributes or {}) for span in otel.spans()], default=str)
    assert "hunter2hunter2" not in everything, "a secret-named argument is hidden"
    assert "tok-very-secret-value-123" not in everything, "a known key is masked"
    first, second = otel.named("chat ")
    assert json.loads(str(attrs(first)["gen_ai.system_instructions"])) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(str(attrs(first)["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "log me in"}]}
    ]
    [output] = json.loads(str(attrs(first)["gen_ai.output.messages"]))
    assert output["finish_reason"] == "tool_call"
    assert output["parts"][0]["arguments"] == {"user": "ann", "password": "***"}
    assert "gen_ai.tool.definitions" in attrs(first)
    history = json.loads(str(attrs(second)["gen_ai.input.messages"]))
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[2]["parts"][0]["type"] == "tool_call_response"
    [tool_span] = otel.named("execute_tool login")
    assert json.loads(str(attrs(tool_span)["gen_ai.tool.call.arguments"])) == {"user": "ann", "password": "***"}
    assert "welcome ann" in str(attrs(tool_span)["gen_ai.tool.call.result"])


async def test_spans_and_events_can_be_consumed_while_the_host_has_no_context_of_the_run(otel: Otel) -> None:
    """The run's context is never left attached across a yield: the host's code sees its own context."""
    from opentelemetry import trace

    seen: list[object] = []
    agent = Agent(ScriptedProvider([call("add", {"a": 1, "b": 2}), reply("3")]), tools=[add],
                  telemetry=otel.telemetry())  # fmt: skip
    events: list[RunEvent] = []
    async for event in agent.stream("go"):
        events.append(event)
        seen.append(trace.get_current_span())
    assert any(isinstance(event, ToolCallStarted) for event in events)
    assert all(not span.get_span_context().is_valid for span in seen)  # type: ignore[attr-defined]


async def test_opting_in_to_the_latest_conventions_switches_the_client_metrics_to_the_inference_family(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")
    usage = Usage(input_tokens=10, output_tokens=4, cache_read_tokens=3)
    agent = Agent(ScriptedProvider([reply("hi", usage=usage)]), telemetry=otel.telemetry())
    await agent.run("go")
    metrics = otel.metrics()
    assert sum(p.value for p in metrics["gen_ai.client.inference.usage.input_tokens"]) == 13
    assert sum(p.value for p in metrics["gen_ai.client.inference.usage.cache_read.input_tokens"]) == 3
    assert sum(p.count for p in metrics["gen_ai.client.inference.duration"]) == 1
    assert "gen_ai.client.token.usage" not in metrics
    assert "gen_ai.client.operation.duration" not in metrics
