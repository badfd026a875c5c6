"""Compaction as a user meets it: ``tether run`` and ``tether chat`` in a pseudo-terminal against a mock model,
a long run compacted to the window ``--context-window`` gives, one quiet line saying so, the summary call in
``--json``'s records, a server that refuses requests over its window recovered from (or not, with
``--no-compact``), and the session showing where the history was compacted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, Fail, MockLLM, Say, Step
from tests.e2e.test_chat import PROMPT, load_sessions
from tether.loop.context import COMPACTION_REQUEST
from tether.messages import compaction_of, messages_from_jsonable, transcript_problems

FILES = 6
LINES = 100
SUMMARY = "Summary: the user asked for every file to be read; f0.txt to f5.txt hold filler lines."
LINE = re.compile(r"context compacted: [\d,]+ → [\d,]+ tokens \(\d+ messages summarized\)")
OVERFLOW_LINE = re.compile(
    r"context compacted after the model's context overflowed: [\d,]+ → [\d,]+ tokens \(\d+ messages? summarized\)"
)
WINDOW = 4000
"""The mock's window in the overflow tests. A request to read the files is about 1,300 tokens (the system
prompt and the tools' definitions, mostly), and each file read adds about 630: the sixth request does not
fit."""
GIVEN = "4300"
"""The window ``--context-window`` and ``[compaction]`` give: the fifth request would pass 80% of it."""


def tokens(body: dict[str, Any]) -> int:
    """A request's tokens as the mock counts and reports them: about four characters of its JSON a token."""
    return len(json.dumps({"messages": body["messages"], "tools": body.get("tools", [])})) // 4


def is_summary_request(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    return body.get("tool_choice") == "none" and last["role"] == "user" and last["content"] == COMPACTION_REQUEST


def reader(answer: str = "All six files are read.") -> Iterator[Step]:
    """The model reads the files one by one, then answers."""
    yield from (Call("read", {"path": f"f{index}.txt"}) for index in range(FILES))
    yield Say(answer)


def model(steps: Iterator[Step], window: int | None = None) -> list[Any]:
    """A script for the mock: the summary when asked for one, else the next step; with a ``window``, a request
    of more :func:`tokens` than it holds is refused as OpenAI refuses it."""

    def respond(body: dict[str, Any]) -> Step:
        size = tokens(body)
        if window is not None and size > window:
            message = (
                f"This model's maximum context length is {window} tokens. However, your messages resulted in "
                f"{size} tokens. Please reduce the length of the messages."
            )
            return Fail(400, {"error": {"message": message, "type": "invalid_request_error",
                                        "code": "context_length_exceeded"}})  # fmt: skip
        return Say(SUMMARY) if is_summary_request(body) else next(steps)

    return [respond] * 40


def files(project: Project) -> None:
    for index in range(FILES):
        (project.cwd / f"f{index}.txt").write_text(f"filler line {index}\n" * LINES)


def test_a_long_run_is_compacted_to_the_given_window_and_says_so_in_one_line(project: Project) -> None:
    files(project)
    with MockLLM(model(reader()), count=tokens) as server:
        project.use(server)
        child = project.spawn("run", "Read every file", "--context-window", GIVEN, "--session", "long")
        child.expect(LINE)
        child.expect_exact("All six files are read.")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    shown = screen(child)
    assert len(LINE.findall(shown)) == 1
    assert shown.index("read(path='f3.txt')") < shown.index("context compacted") < shown.index("read(path='f4.txt')")
    summary_calls = [index for index, body in enumerate(server.requests) if is_summary_request(body)]
    assert len(summary_calls) == 1
    before, after = server.requests[summary_calls[0] - 1], server.requests[summary_calls[0] + 1]
    assert SUMMARY in after["messages"][1]["content"], "the model goes on from the summary"
    assert tokens(after) < tokens(before), "with a shorter request than the one before the compaction"
    (session,) = load_sessions(project)
    assert sum(compaction_of(message) is not None for message in session.messages) == 1
    assert transcript_problems(session.messages) == []
    show = project.run("sessions", "show", "long")
    assert "\n## Compacted\n" in show.stdout
    assert SUMMARY in show.stdout
    assert '**read** `{"path": "f0.txt"}`' in show.stdout, "what the summary replaced is still shown"


def test_run_json_records_the_summary_call_and_keeps_the_marker_in_the_messages(project: Project) -> None:
    files(project)
    with MockLLM(model(reader()), count=tokens) as server:
        project.use(server)
        completed = project.run("run", "Read every file", "--context-window", GIVEN, "--json")

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert [record["compaction"] for record in result["turn_records"]].count(True) == 1
    (summary_call,) = [record for record in result["turn_records"] if record["compaction"]]
    assert summary_call["final"] is True
    messages = messages_from_jsonable(result["messages"])
    (marker,) = [message for message in messages if compaction_of(message) is not None]
    assert SUMMARY in marker.text
    assert LINE.search(completed.stderr), "the line goes to stderr; stdout holds the JSON alone"


def test_a_server_refusing_a_request_over_its_window_is_recovered_from_by_compacting(project: Project) -> None:
    files(project)
    with MockLLM(model(reader(), window=WINDOW), count=tokens) as server:
        project.use(server)
        child = project.spawn("run", "Read every file")
        child.expect(OVERFLOW_LINE)
        child.expect_exact("All six files are read.")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    refused = [body for body in server.requests if tokens(body) > WINDOW]
    assert len(refused) == 1, "once refused, the run keeps under the window it was told"


def test_with_no_compact_the_run_stops_when_the_server_refuses_the_request(project: Project) -> None:
    files(project)
    with MockLLM(model(reader(), window=WINDOW), count=tokens) as server:
        project.use(server)
        child = project.spawn("run", "Read every file", "--no-compact")
        child.expect_exact("[error]")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 4, screen(child)
    assert "context compacted" not in screen(child)
    assert "maximum context length" in screen(child)
    assert not any(is_summary_request(body) for body in server.requests)


def test_a_chat_compacted_by_its_configured_window_says_so_and_goes_on(project: Project, children: list[Any]) -> None:
    files(project)
    steps = iter([*reader("Read them."), Say("You asked me to read every file.")])
    with MockLLM(model(steps), count=tokens) as server:
        project.use(server)
        with (project.cwd / "agent.toml").open("a") as file:
            file.write(f"\n[compaction]\ncontext_window = {GIVEN}\n")
        child = project.spawn("chat")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("Read every file")
        child.expect(LINE)
        child.expect_exact("Read them.")
        child.expect_exact(PROMPT)
        child.sendline("What did I ask?")
        child.expect_exact("You asked me to read every file.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    last = server.requests[-1]["messages"]
    assert SUMMARY in last[1]["content"], "the next turn of the chat starts from the summary"
