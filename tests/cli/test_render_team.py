"""An agent run as a tool, as the terminal shows it: the sub-agent's activity nested under the call, indented by
its depth (``cli/render.py``), and its calls under the call in the run's tree (``cli/trace.py``); from real
scripted runs three levels deep."""

from __future__ import annotations

import io

from rich.console import Console

from tests.cli.test_render import Screen
from tether import Agent, Limits, tool
from tether.cli.trace import print_trace
from tether.providers.scripted import ScriptedProvider, Step, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def boss(inner_script: list[Step] | None = None, inner_limits: Limits | None = None) -> Agent:
    inner = Agent(
        ScriptedProvider(inner_script or [call("add", {"a": 2, "b": 3}), reply("Five.")]),
        tools=[add],
        limits=inner_limits,
    )
    middle = Agent(
        ScriptedProvider([call("inner", {"input": "add 2 and 3"}), reply("Inner says five.")]),
        tools=[inner.as_tool(name="inner")],
    )
    return Agent(
        ScriptedProvider([call("middle", {"input": "ask inner"}), reply("It is 5.")]),
        tools=[middle.as_tool(name="middle")],
    )


async def test_a_sub_agents_text_and_tool_calls_are_nested_under_the_call_that_runs_it() -> None:
    screen = Screen()
    async for event in boss().stream("What is 2+3?"):
        screen.renderer(event)
    assert screen.out == "It is 5.\n"  # only the run's own answer goes to out
    assert screen.err.splitlines() == [
        "→ middle(input='ask inner')",
        "  → inner(input='add 2 and 3')",
        "    → add(a=2, b=3)",
        "      ✓ add: 5",
        "    inner: Five.",
        "    ✓ inner: Five.",
        "  middle: Inner says five.",
        "  ✓ middle: Inner says five.",
    ]


async def test_a_sub_agent_that_did_not_answer_says_how_it_stopped_under_the_call() -> None:
    screen = Screen()
    script = [call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), reply("still adding")]
    async for event in boss(script, Limits(max_turns=1)).stream("What is 2+3?"):
        screen.renderer(event)
    lines = screen.err.splitlines()
    assert "    [inner: max_turns] reached the limit of 1 turns" in lines
    failed = next(line for line in lines if line.startswith("    ✗ inner: tool_failed: "))
    assert "did not finish its task" in failed


async def test_the_trace_nests_a_sub_agents_calls_under_the_call_that_ran_it() -> None:
    result = await boss().run("What is 2+3?")
    file = io.StringIO()
    console = Console(file=file, width=140, color_system=None, markup=False, highlight=False, emoji=False)
    print_trace(console, result, "scripted:boss")
    lines = [line.split(" · ")[0] for line in file.getvalue().splitlines()]
    assert lines == [
        lines[0],
        "├── turn 1",
        "│   └── ✓ middle",
        "│       ├── turn 1",
        "│       │   └── ✓ inner",
        "│       │       ├── turn 1",
        "│       │       │   └── ✓ add",
        "│       │       └── turn 2",
        "│       └── turn 2",
        "└── turn 2",
    ]
