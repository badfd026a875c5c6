"""Spans of an agent run as a tool: its ``invoke_agent`` inside the call's ``execute_tool``, its own spans below it,
three levels deep, all in one trace (checked with the SDK's in-memory exporter)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from tests.telemetry.conftest import Otel, attrs, check_tree, parent_of
from tether import Agent, tool
from tether.providers.scripted import ScriptedProvider, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def chain(span: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """The names of ``span`` and its ancestors, outermost first."""
    names: list[str] = []
    node: ReadableSpan | None = span
    while node is not None:
        names.insert(0, node.name)
        node = parent_of(node, spans)
    return names


async def test_a_sub_agents_spans_nest_inside_the_calling_tool_span_three_levels_deep(otel: Otel) -> None:
    inner = Agent(ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")]), tools=[add])
    middle = Agent(ScriptedProvider([call("inner", {"input": "sum"}), reply("5")]), tools=[inner.as_tool(name="inner")])
    boss = Agent(
        ScriptedProvider([call("middle", {"input": "delegate"}), reply("5")]),
        tools=[middle.as_tool(name="middle")],
        telemetry=otel.telemetry(agent_name="boss"),
    )
    result = await boss.run("go")
    assert result.text == "5"
    spans = otel.spans()
    runs = check_tree(spans)
    assert len(runs) == 3
    assert len({span.context.trace_id for span in spans}) == 1
    (add_span,) = otel.named("execute_tool add")
    assert chain(add_span, spans) == [
        "invoke_agent boss",
        "execute_tool middle",
        "invoke_agent",
        "execute_tool inner",
        "invoke_agent",
        "execute_tool add",
    ]
    inner_runs = [span for span in otel.named("invoke_agent") if parent_of(span, spans) is not None]
    assert {parent_of(span, spans).name for span in inner_runs} == {"execute_tool middle", "execute_tool inner"}  # type: ignore[union-attr]
    chats = otel.named("chat ")
    assert len(chats) == 6
    assert all(attrs(span)["gen_ai.operation.name"] == "chat" for span in chats)
