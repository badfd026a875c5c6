"""Spans of many runs: any script leaves every span ended and rightly parented; concurrent runs never mix."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.telemetry.conftest import Otel, attrs, check_tree, parent_of
from tether import Agent, Limits, tool
from tether.errors import ProviderUnavailable
from tether.providers.scripted import ScriptedProvider, Step, call, fail, parallel, reply
from tether.telemetry import Telemetry


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


CALLS = st.sampled_from([call("add", {"a": 1, "b": 2}), call("explode", {}), call("missing", {}),
                         call("add", '{"a": 1,')])  # fmt: skip
STEPS: st.SearchStrategy[Step] = st.one_of(
    st.builds(reply, st.text(min_size=1, max_size=8)),
    CALLS,
    st.lists(CALLS, min_size=2, max_size=4).map(lambda calls: parallel(*calls)),
    st.just(fail(ProviderUnavailable("down"))),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(STEPS, max_size=6), max_turns=st.integers(1, 4), concurrent=st.booleans())
def test_any_script_leaves_every_span_ended_under_exactly_one_run(
    script: list[Step], max_turns: int, concurrent: bool
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedProvider(script)
    agent = Agent(model, tools=[add, explode], concurrent_tools=concurrent, limits=Limits(max_turns=max_turns),
                  telemetry=Telemetry(tracer_provider=provider))  # fmt: skip
    result = asyncio.run(agent.run("go"))
    spans = list(exporter.get_finished_spans())
    runs = check_tree(spans)
    assert list(runs) == [result.run_id], "exactly one invoke_agent root per run"
    assert runs[result.run_id].parent is None
    chats = [span for span in spans if span.name.startswith("chat ")]
    assert len(chats) == len(result.turn_records), "one chat span per provider call"
    tool_spans = [span for span in spans if span.name.startswith("execute_tool ")]
    assert len(tool_spans) == sum(len(record.tool_calls) for record in result.turn_records)
    assert len(spans) == 1 + len(chats) + len(tool_spans)
    provider.shutdown()


async def test_concurrent_runs_never_mix_their_spans(otel: Otel) -> None:
    runs = 300  # 10,000 take about a minute here; 300 keep the suite fast and still interleave every step

    async def one(index: int) -> str:
        @tool
        async def mark(n: int) -> str:
            """Yields to the other runs, then answers."""
            await asyncio.sleep(0)
            return str(n)

        calls = (call("mark", {"n": index}, id=f"r{index}-a"), call("mark", {"n": -index}, id=f"r{index}-b"))
        model = ScriptedProvider([parallel(*calls), reply("ok")])
        agent = Agent(model, tools=[mark], concurrent_tools=True, telemetry=otel.telemetry(capture_content=True))
        result = await agent.run(f"run {index}")
        return result.run_id

    run_ids = await asyncio.gather(*(one(index) for index in range(runs)))
    index_of = {run_id: index for index, run_id in enumerate(run_ids)}
    spans = otel.spans()
    roots = check_tree(spans)
    assert sorted(roots) == sorted(run_ids)
    children = dict.fromkeys(run_ids, 0)
    for span in spans:
        if not span.name.startswith(("chat ", "execute_tool ")):
            continue
        parent = parent_of(span, spans)
        assert parent is not None
        run_id = str(attrs(parent)["tether.run.id"])
        index = index_of[run_id]
        if span.name.startswith("chat "):  # its own prompt, captured, says which run it belongs to
            assert f'"run {index}"' in str(attrs(span)["gen_ai.input.messages"])
        else:
            assert str(attrs(span)["gen_ai.tool.call.id"]).startswith(f"r{index}-")
        children[run_id] += 1
    assert set(children.values()) == {4}, "each run has its own two chat and two tool spans"
    assert len({root.context.trace_id for root in roots.values()}) == runs, "every run is a trace of its own"
