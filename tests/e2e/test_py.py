"""``tether py`` in a pseudo-terminal against a mock model: a question about the session's last exception
answered through ``get_last_exception``, Ctrl-C during a question and at the prompt, a script run first, and
a model that cannot call tools."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, MockLLM, Say, Step

PROMPT = ">>>"  # prompt_toolkit draws the space after it as a cursor move


def _explain_the_exception(body: dict[str, Any]) -> Step:
    """The model answers from what ``get_last_exception`` returned (so the answer proves the round trip)."""
    envelope = json.loads(next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool"))
    exception = envelope["result"]["exception"]
    return Say(f"The last line raised {exception['exc_type']}: {exception['message']}.")


def test_a_question_about_the_last_exception_is_answered_and_the_session_goes_on(
    project: Project, children: list[Any]
) -> None:
    script: list[Any] = [Call("get_last_exception", {}, text="Let me look. "), _explain_the_exception]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("py")
        children.append(child)
        child.expect_exact("?QUESTION asks about this session")
        child.expect_exact(PROMPT)
        child.sendline("total = 41")
        child.expect_exact(PROMPT)
        child.sendline("total / 0")
        child.expect_exact("ZeroDivisionError: division by zero")
        child.expect_exact(PROMPT)
        child.sendline("?why did the last line fail?")
        child.expect_exact("get_last_exception()")
        child.expect_exact("The last line raised ZeroDivisionError: division by zero.")
        child.expect_exact(PROMPT)
        child.sendline("total + 1")
        child.expect_exact("42")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert "Let me look." in screen(child)
    assert len(server.requests) == 2
    first = server.requests[0]
    assert "why did the last line fail?" in first["messages"][-1]["content"]
    assert "get_last_exception" in {tool["function"]["name"] for tool in first["tools"]}
    traceback = json.loads(server.messages(1)[-1]["content"])["result"]["exception"]["traceback"]
    assert 'File "<stdin>", line 1, in <module>' in traceback
    history = (project.root / "state" / "tether" / "py_history").read_text()
    assert "+total = 41" in history
    assert "+?why did the last line fail?" in history


def test_the_assistant_sees_the_traceback_the_console_printed_and_nothing_of_the_console(
    project: Project, children: list[Any]
) -> None:
    """The traceback ``get_last_exception`` gives is the one on the screen: the user's frames, without the
    frame of Python's console that ran the line (``code.py``, under the interpreter's own path)."""
    script: list[Any] = [Call("get_last_exception", {}), _explain_the_exception]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("py")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("def half(x): return x / 0")
        child.expect_exact("...")
        child.sendline("")
        child.expect_exact(PROMPT)
        child.sendline("half(4)")
        child.expect(r"Traceback \(most recent call last\):.*?ZeroDivisionError: division by zero")
        match = child.match
        assert isinstance(match, re.Match)
        printed = match.group(0).replace("\r\n", "\n")
        child.expect_exact(PROMPT)
        child.sendline("?why")
        child.expect_exact("The last line raised ZeroDivisionError")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    traceback = json.loads(server.messages(1)[-1]["content"])["result"]["exception"]["traceback"]
    assert traceback.rstrip("\n") == printed, (traceback, printed)
    assert "code.py" not in traceback
    assert sys.base_prefix not in traceback
    assert traceback.count('File "<stdin>"') == 2


def test_ctrl_c_cancels_a_question_never_the_session(project: Project, children: list[Any]) -> None:
    script: list[Any] = [Say("Still thinking about", stall=True), Say("Fresh answer.")]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("py")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("kept = 'still here'")
        child.expect_exact(PROMPT)
        child.sendline("?what is kept")
        child.expect_exact("Still thinking about")
        assert server.stalled.wait(30)
        child.sendintr()
        child.expect_exact("cancelled")
        child.expect_exact(PROMPT)
        child.send("thrown = 'away'")
        child.sendintr()  # Ctrl-C at the prompt: the line is dropped
        child.expect_exact("KeyboardInterrupt")
        child.expect_exact(PROMPT)
        child.sendline("kept.upper(), 'thrown' in dir()")
        child.expect_exact("('STILL HERE', False)")
        child.expect_exact(PROMPT)
        child.sendline("?and now")
        child.expect_exact("Fresh answer.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert len(server.requests) == 2
    assert "and now" in server.messages(1)[-1]["content"]


def test_a_script_runs_first_then_the_session_starts_with_its_exception(project: Project, children: list[Any]) -> None:
    (project.cwd / "job.py").write_text(
        "import sys\nrows = [3, 4]\nprint('args', sys.argv, __name__)\nraise ValueError(f'bad row {rows[-1]}')\n"
    )
    child = project.spawn("py", "job.py", "--fast", "x")
    children.append(child)
    child.expect_exact("args ['job.py', '--fast', 'x'] __main__")
    child.expect_exact('File "job.py", line 4, in <module>')
    child.expect_exact("ValueError: bad row 4")
    child.expect_exact(PROMPT)
    child.sendline("rows, repr(sys.last_value)")
    child.expect_exact("([3, 4], \"ValueError('bad row 4')\")")
    child.expect_exact(PROMPT)
    child.sendline("raise SystemExit(7)")
    child.expect(pexpect.EOF)
    child.close()

    assert child.exitstatus == 7, screen(child)


def test_a_model_that_cannot_call_tools_leaves_the_console_working(project: Project, children: list[Any]) -> None:
    with MockLLM([]) as server:
        project.use(server)
        child = project.spawn("py", "--model", "openai-compatible:o1-mini")
        children.append(child)
        child.expect_exact("cannot call tools natively")
        child.expect_exact(PROMPT)
        child.sendline("?why")
        child.expect_exact("questions are off: openai-compatible:o1-mini cannot call tools natively")
        child.expect_exact("--model or runtime.model")
        child.expect_exact(PROMPT)
        child.sendline("6 * 7")
        child.expect_exact("42")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert server.requests == []


def test_piped_lines_are_read_plainly(project: Project) -> None:
    completed = project.run("py", stdin="n = 6\nfor i in range(2):\n    n += i\n\nprint(n)\n1/0\n?why\n")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "7\n"
    assert "ZeroDivisionError: division by zero" in completed.stderr
    assert "questions are off: " in completed.stderr, "no model is configured in this project"
    assert completed.stderr.count(">>> ") >= 5
