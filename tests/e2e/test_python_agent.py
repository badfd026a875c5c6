"""``tether run --agent`` and ``tether chat --agent`` as a user runs them: a Python agent of the project, with a
sub-agent as a tool, on the mock model; the sub-agent's activity shown nested under the call that runs it, in
the chat, in the run's output and in its ``--trace`` tree; and what the command says for an agent it cannot run."""

from __future__ import annotations

import re
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, MockLLM, Say
from tests.e2e.otlp_receiver import otlp_receiver
from tests.e2e.test_chat import PROMPT, load_sessions
from tether.messages import transcript_problems

TEAM = '''
import os

from tether import Agent, tool

BASE_URL = os.environ["TEAM_MOCK_URL"]


@tool(read_only=True)
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


researcher = Agent("openai-compatible:mock", base_url=BASE_URL, tools=[lookup], system="You look things up.")
lead = Agent(
    "openai-compatible:mock",
    base_url=BASE_URL,
    tools=[researcher.as_tool(name="research", description="Ask the researcher a question.")],
    system="You lead.",
)
'''

DURABLE = """
from tether.durable import DurableAgent

from team import lead

durable = DurableAgent(lead, name="lead")
"""

QUESTION = "What is the weather in Paris?"


def team_script() -> list[Any]:
    """The lead asks the researcher, who looks it up and answers; then the lead answers."""
    return [
        Call("research", {"input": QUESTION}),
        Call("lookup", {"city": "Paris"}),
        Say("It is sunny in Paris.", pieces=1),
        Say("Paris is sunny today.", pieces=1),
    ]


def with_team(project: Project) -> None:
    (project.cwd / "team.py").write_text(TEAM)
    (project.cwd / "durable_team.py").write_text(DURABLE)


def lines_of(text: str) -> list[str]:
    return [line.rstrip() for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "").split("\n")]


def assert_the_team_ran(server: MockLLM) -> None:
    assert len(server.requests) == 4
    asked = [m for m in server.messages(1) if m["role"] == "user"]
    assert [m["content"] for m in asked] == [QUESTION], "the sub-agent is asked the lead's question, alone"
    assert server.messages(1)[0]["content"] == "You look things up."
    answered = next(m for m in server.messages(3) if m["role"] == "tool")
    assert answered["content"] == "It is sunny in Paris."


NESTED = [
    "→ research(input='What is the weather in Paris?')",
    "  → lookup(city='Paris')",
    "    ✓ lookup: sunny in Paris",
    "  research: It is sunny in Paris.",
    "  ✓ research: It is sunny in Paris.",
]


def test_a_chat_with_a_python_agent_shows_its_sub_agent_nested_under_the_call(
    project: Project, children: list[Any]
) -> None:
    with_team(project)
    with MockLLM(team_script()) as server:
        child = project.spawn("chat", "--agent", "team:lead", TEAM_MOCK_URL=server.base_url)
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline(QUESTION)
        child.expect_exact("Paris is sunny today.")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    shown = lines_of(screen(child))
    assert "tether chat · openai-compatible:mock" in screen(child)
    start = shown.index(NESTED[0])
    assert shown[start : start + len(NESTED)] == NESTED, shown
    assert_the_team_ran(server)
    (session,) = load_sessions(project)  # kept in the command's store: the agent has none of its own
    assert session.messages[-1].text == "Paris is sunny today."
    assert transcript_problems(session.messages) == []


def test_run_with_a_python_agent_nests_the_sub_agent_in_its_output_and_its_trace(
    project: Project, children: list[Any]
) -> None:
    with_team(project)
    with MockLLM(team_script()) as server:
        child = project.spawn("run", "--agent", "team:lead", "--trace", QUESTION, TEAM_MOCK_URL=server.base_url)
        children.append(child)
        child.expect_exact("Paris is sunny today.")
        child.expect_exact(" · openai-compatible:mock · complete · ")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    shown = lines_of(screen(child))
    start = shown.index(NESTED[0])
    assert shown[start : start + len(NESTED)] == NESTED, shown
    assert start < shown.index("Paris is sunny today.")
    tree = [line.split(" · ")[0] for line in shown if line[:1] and line[0] in "├│└"]
    assert tree == [
        "├── turn 1",
        "│   └── ✓ research",
        "│       ├── turn 1",
        "│       │   └── ✓ lookup",
        "│       └── turn 2",
        "└── turn 2",
    ], shown
    assert_the_team_ran(server)


def test_run_exports_the_python_agents_spans_and_its_sub_agents_in_one_trace(project: Project) -> None:
    with_team(project)
    with MockLLM(team_script()) as server, otlp_receiver() as received:
        done = project.run(
            "run", "--agent", "team:lead", QUESTION, TEAM_MOCK_URL=server.base_url,
            OTEL_EXPORTER_OTLP_ENDPOINT=received.endpoint,
        )  # fmt: skip

    assert done.returncode == 0, done.stderr
    spans = [
        span
        for request in received.traces
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    names = [span.name for span in spans]
    assert len([name for name in names if name.startswith("invoke_agent")]) == 2, names
    assert len([name for name in names if name.startswith("chat")]) == 4, names
    assert len({span.trace_id for span in spans}) == 1, "the sub-agent's spans are in the lead's trace"


def test_run_says_in_one_line_why_it_cannot_run_the_agent_named(project: Project) -> None:
    with_team(project)
    env = {"TEAM_MOCK_URL": "http://127.0.0.1:9/v1"}
    cases = {
        "nosuchmodule:agent": "cannot import 'nosuchmodule'",
        "team:nobody": "'team' has no attribute 'nobody'",
        "team:BASE_URL": "is a str, not a tether Agent",
        "team": "give it as module:attribute",
        "durable_team:durable": "is a DurableAgent: tether run and tether chat run an Agent in this process",
    }
    for spec, message in cases.items():
        completed = project.run("run", "--agent", spec, "Hi", **env)
        assert completed.returncode == 1, (spec, completed.stderr)
        assert message in completed.stderr, (spec, completed.stderr)
        assert completed.stderr.startswith("error: --agent "), (spec, completed.stderr)
        assert "Traceback" not in completed.stderr
        assert completed.stdout == ""

    broken = project.run("run", "--agent", "team:lead", "Hi")  # the module itself fails: TEAM_MOCK_URL unset
    assert broken.returncode == 1
    assert "importing 'team' failed: KeyError: 'TEAM_MOCK_URL'" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_flags_that_would_change_a_python_agent_are_usage_errors(project: Project) -> None:
    with_team(project)
    for flags in (
        ["--model", "openai:gpt-4o-mini"],
        ["--max-turns", "2"],
        ["--system", "Be terse."],
        ["--cache-path", "c.db"],
    ):
        completed = project.run("run", "--agent", "team:lead", *flags, "Hi", TEAM_MOCK_URL="http://127.0.0.1:9/v1")
        assert completed.returncode == 2, (flags, completed.stderr)
        assert f"{flags[0]} cannot be used with --agent" in completed.stderr
    chat = project.run("chat", "--agent", "team:lead", "--no-compact", stdin="")
    assert chat.returncode == 2
    assert "--no-compact cannot be used with --agent" in chat.stderr
