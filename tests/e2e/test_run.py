"""``tether run`` as a subprocess and in a pseudo-terminal against a mock model: JSON output, exit codes,
permissions, Ctrl-C, resuming after kill -9, and API keys kept out of every output and the session store."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import WAIT, Call, Fail, MockLLM, Say
from tests.e2e.test_chat import load_sessions
from tether.messages import transcript_problems

JSON_KEYS = {"text", "stop_reason", "degraded", "finish_reason", "detail", "error", "usage", "cost", "turns",
             "session_id", "model", "exit_code", "duration_ms", "turn_records", "messages", "output",
             "fallbacks", "pending", "state"}  # fmt: skip


def test_json_prints_the_whole_result_on_stdout_and_nothing_else(project: Project) -> None:
    with MockLLM([Call("read", {"path": "notes.txt"}), Say("The notes say hello.")]) as server:
        project.use(server)
        (project.cwd / "notes.txt").write_text("hello\n")
        completed = project.run("run", "What do the notes say?", "--json")

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert set(result) == JSON_KEYS
    assert result["fallbacks"] == [], "one model: nothing to move on from"
    assert result["pending"] == [], "a run that answered waits on nothing"
    assert result["state"] is None
    assert result["text"] == "The notes say hello."
    assert result["stop_reason"] == "complete"
    assert result["exit_code"] == 0
    assert result["usage"]["requests"] == 2
    assert result["usage"]["input_tokens"] > 0
    assert result["cost"] is None, "mock's price is unknown"
    assert result["model"] == "openai-compatible:mock"
    assert [m["role"] for m in result["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert result["messages"][3]["parts"][0]["content"].endswith("hello")
    assert "tokens" in completed.stderr
    assert result["session_id"] in completed.stderr


def test_the_answer_streams_to_stdout_and_the_usage_goes_to_stderr(project: Project) -> None:
    with MockLLM([Say("Hello there, friend.")]) as server:
        project.use(server)
        completed = project.run("run", "Greet me")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "Hello there, friend.\n"
    assert "10 out" in completed.stderr
    assert "1 request" in completed.stderr


def test_a_guard_stop_exits_3_with_the_summary_as_the_answer(project: Project) -> None:
    script: list[Any] = [Call("read", {"path": "a.txt"}), Say("Summary: nothing found.")]
    with MockLLM(script) as server:
        project.use(server)
        (project.cwd / "a.txt").write_text("a\n")
        completed = project.run("run", "Look around", "--max-turns", "1", "--json")

    assert completed.returncode == 3, completed.stderr
    result = json.loads(completed.stdout)
    assert result["stop_reason"] == "max_turns"
    assert result["text"] == "Summary: nothing found."
    assert server.requests[1]["tool_choice"] == "none", "the summary call allows no tools"


def test_a_provider_error_exits_4_and_says_why(project: Project) -> None:
    with MockLLM([Fail(400, {"error": {"message": "model 'mock' does not exist"}})]) as server:
        project.use(server)
        completed = project.run("run", "Hi")

    assert completed.returncode == 4
    assert "[error]" in completed.stderr
    assert "does not exist" in completed.stderr
    assert completed.stdout == ""


def test_a_configuration_problem_exits_1_naming_the_key_and_line(project: Project) -> None:
    (project.cwd / "agent.toml").write_text('[runtime]\nmodel = "openai:gpt-4o-mini"\n\n[tools]\nmode = "all"\n')
    completed = project.run("run", "Hi")

    assert completed.returncode == 1
    assert "tools.mode" in completed.stderr
    assert "line 5" in completed.stderr
    assert completed.stdout == ""


def test_usage_errors_exit_2(project: Project) -> None:
    assert project.run("run").returncode == 2
    both = project.run("run", "Hi", "--session", "abc", "--continue")
    assert both.returncode == 2
    assert "cannot be used together" in both.stderr
    assert project.run("run", "Hi", "--mode", "everything").returncode == 2


def test_without_a_terminal_write_tools_are_refused_unless_yes(project: Project) -> None:
    script: list[Any] = [Call("write", {"path": "out.txt", "content": "x"}), Say("I could not write it.")]
    with MockLLM(script) as server:
        project.use(server)
        refused = project.run("run", "Write out.txt")

    assert refused.returncode == 0, refused.stderr
    assert not (project.cwd / "out.txt").exists()
    assert "permission_denied" in refused.stderr
    assert "--yes" in refused.stderr
    tool_message = next(m for m in server.messages(1) if m["role"] == "tool")
    assert "--yes" in tool_message["content"]

    with MockLLM([Call("write", {"path": "out.txt", "content": "x"}), Say("Written.")]) as server:
        project.use(server)
        allowed = project.run("run", "Write out.txt", "--yes")

    assert allowed.returncode == 0, allowed.stderr
    assert (project.cwd / "out.txt").read_text() == "x"


def test_read_only_mode_does_not_offer_write_tools(project: Project) -> None:
    with MockLLM([Say("ok")]) as server:
        project.use(server)
        completed = project.run("run", "Hi", "--mode", "read-only")

    assert completed.returncode == 0, completed.stderr
    assert [tool["function"]["name"] for tool in server.requests[0]["tools"]] == ["read", "calculate"]


def test_a_session_is_continued_by_id_and_by_continue(project: Project) -> None:
    script: list[Any] = [Say("First."), Say("Other."), Say("Second."), Say("Third.")]
    with MockLLM(script) as server:
        project.use(server)
        first = project.run("run", "One", "--session", "mine")
        project.run("run", "Unrelated")
        second = project.run("run", "Two", "--session", "mine")
        third = project.run("run", "Three", "--continue")

    assert [c.returncode for c in (first, second, third)] == [0, 0, 0]
    users = [m["content"] for m in server.messages(2) if m["role"] == "user"]
    assert users == ["One", "Two"]
    users = [m["content"] for m in server.messages(3) if m["role"] == "user"]
    assert users == ["One", "Two", "Three"], "--continue takes the most recent session"


def test_ctrl_c_cancels_the_run_exits_130_and_saves_a_valid_session(project: Project, children: list[Any]) -> None:
    with MockLLM([Call("read", {"path": "a.txt"}), Say("Halfway through", stall=True)]) as server:
        project.use(server)
        (project.cwd / "a.txt").write_text("a\n")
        child = project.spawn("run", "Read a.txt and think")
        children.append(child)
        child.expect_exact("Halfway through")
        assert server.stalled.wait(30)
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 130, screen(child)
    assert "[cancelled]" in screen(child)
    (session,) = load_sessions(project)
    assert transcript_problems(session.messages) == []
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool"]


def test_a_run_killed_mid_turn_is_resumed_by_continue(project: Project, children: list[Any]) -> None:
    script: list[Any] = [
        Call("read", {"path": "notes.txt"}),
        Say("Thinking about the notes", stall=True),
        Say("The notes mention pelicans."),
    ]
    with MockLLM(script) as server:
        project.use(server)
        (project.cwd / "notes.txt").write_text("Pelicans are large water birds.\n")
        child = project.spawn("run", "Summarize notes.txt")
        children.append(child)
        child.expect_exact("Thinking about the notes")
        assert server.stalled.wait(30)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.expect(pexpect.EOF)
        child.close()
        assert child.signalstatus == signal.SIGKILL
        server.release()
        resumed = project.run("run", "--continue", "Go on")

    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "The notes mention pelicans.\n"
    sent = server.messages(2)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert sent[1]["content"] == "Summarize notes.txt"
    assert sent[2]["tool_calls"][0]["function"]["name"] == "read"
    assert "Pelicans are large water birds." in sent[3]["content"]
    assert sent[4]["content"] == "Go on"


KEY = "sk-e2e-Zr8QpL2vXc7NwT4mKd9s"


def test_an_api_key_reaches_the_server_but_no_output_and_no_session(project: Project) -> None:
    script: list[Any] = [Call("bash", {"command": "env; echo done"}), Say("Environment listed.")]
    with MockLLM(script) as server:
        project.use(server)
        ok = project.run("run", "List the environment", "--yes", "--json", OPENAI_COMPATIBLE_API_KEY=KEY)
    with MockLLM([Fail(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})]) as failing:
        project.use(failing)
        refused = project.run("run", "Hi", "--json", OPENAI_COMPATIBLE_API_KEY=KEY)

    assert server.authorizations[0] == f"Bearer {KEY}", "the key was used"
    assert failing.authorizations[0] == f"Bearer {KEY}"
    assert ok.returncode == 0
    assert refused.returncode == 4
    bash_result = json.loads(ok.stdout)["messages"][3]["parts"][0]["content"]
    assert "HOME=" in bash_result, "the command ran and printed its environment"
    assert "done" in bash_result
    for completed in (ok, refused):
        assert KEY not in completed.stdout
        assert KEY not in completed.stderr
    stored = [path for path in project.data.rglob("*") if path.is_file()]
    assert stored, "the session store was written"
    assert not [path for path in stored if KEY.encode() in path.read_bytes()]


def test_in_a_terminal_a_write_tool_asks_on_one_line_and_no_refuses_it(project: Project, children: list[Any]) -> None:
    script: list[Any] = [Call("write", {"path": "out.txt", "content": "x"}), Say("Fine, I will not.")]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("run", "Write out.txt")
        children.append(child)
        child.expect_exact("Allow write(path='out.txt', content='x')? [y/N]")
        child.sendline("n")
        child.expect_exact("Fine, I will not.")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert not (project.cwd / "out.txt").exists()
    tool_message = next(m for m in server.messages(1) if m["role"] == "tool")
    assert "did not approve" in tool_message["content"]


def test_in_a_terminal_a_missing_prompt_is_a_usage_error_not_a_wait_on_stdin(
    project: Project, children: list[Any]
) -> None:
    child = project.spawn("run", "--model", "scripted:echo")
    children.append(child)
    child.expect_exact("Missing argument 'PROMPT'")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2, screen(child)


def test_cli_stream_false_prints_the_answer_whole_once_the_model_has_written_it(
    project: Project, children: list[Any]
) -> None:
    """In a terminal, thinking sent after the answer's text shows on stderr (the same screen) as it comes: when
    streaming, the text is on screen before it; with cli.stream = false, after it, in one piece."""
    for stream, text_first in ((True, True), (False, False)):
        with MockLLM([Say("The whole answer, in pieces.", pieces=4, then_think="pondering")]) as server:
            project.use(server)
            with (project.cwd / "agent.toml").open("a") as file:
                file.write(f"\n[cli]\nstream = {str(stream).lower()}\n")
            child = project.spawn("run", "Answer me")
            children.append(child)
            child.expect(pexpect.EOF)
            child.close()

        shown = screen(child)
        assert child.exitstatus == 0, shown
        answer, thinking = shown.find("The whole answer, in pieces."), shown.find("pondering")
        assert answer >= 0, shown
        assert thinking >= 0, shown
        assert (answer < thinking) is text_first, shown


def test_an_answer_cut_at_the_output_limit_is_continued_and_shown_whole(project: Project) -> None:
    with MockLLM([Say("The capital of France is", finish="length"), Say(" Paris.")]) as server:
        project.use(server)
        completed = project.run("run", "Capital of France?", "--json")

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["text"] == "The capital of France is Paris."
    assert result["degraded"] is False
    assert result["finish_reason"] == "stop"
    asked = server.messages(1)
    assert asked[-2] == {"role": "assistant", "content": "The capital of France is"}
    assert "cut off at the output limit" in asked[-1]["content"]


def test_an_answer_still_cut_at_the_output_limit_is_marked_on_screen_and_in_json(
    project: Project, children: list[Any]
) -> None:
    """A truncated answer is never a clean success: exit 0 (the model answered) but marked on the closing lines,
    and ``degraded`` with ``finish_reason`` ``length`` in ``--json``."""
    script: list[Any] = [Say("The capital of", finish="length"), Say(" France", finish="length")]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("run", "Capital of France?")
        children.append(child)
        child.expect_exact("The capital of France")
        child.expect_exact("[complete, degraded, cut off at the output limit] the model's answer was cut off")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0, screen(child)
    assert "final answer" not in screen(child), "the continuation is not announced as a summary call"

    with MockLLM(list(script)) as server:
        project.use(server)
        completed = project.run("run", "Capital of France?", "--json")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["degraded"] is True
    assert result["finish_reason"] == "length"
    assert result["stop_reason"] == "complete"
    assert result["exit_code"] == 0
    assert result["text"] == "The capital of France"
    assert "cut off at the output limit" in result["detail"]


def test_text_typed_ahead_does_not_answer_the_approval_question(project: Project, children: list[Any]) -> None:
    """A "yes" typed while the model was still thinking is not taken as the answer to the question asked after
    it: the question waits for a real answer (here "n"), and the command says the typed-ahead text was ignored."""
    script: list[Any] = [Call("write", {"path": "out.txt", "content": "x"}, stall=True), Say("Fine, I will not.")]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("run", "Write out.txt")
        children.append(child)
        assert server.stalled.wait(WAIT), screen(child)
        child.send("yes\n")  # typed ahead, before any question
        child.expect_exact("yes")  # echoed: the terminal has it in its input queue
        server.release()
        child.expect_exact("(typed before this question, so not taken as its answer: 'yes')")
        child.expect_exact("Allow write(path='out.txt', content='x')? [y/N]")
        child.sendline("n")
        child.expect_exact("Fine, I will not.")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert not (project.cwd / "out.txt").exists(), "the typed-ahead 'yes' allowed the write"
    tool_message = next(m for m in server.messages(1) if m["role"] == "tool")
    assert "did not approve" in tool_message["content"]
