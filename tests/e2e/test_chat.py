"""``tether chat`` in a pseudo-terminal against a mock model: tools with a permission prompt, Ctrl-C."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import WAIT, Call, MockLLM, Say, Step
from tether.messages import transcript_problems
from tether.sessions import SQLiteSessionStore

PROMPT = "tether>"  # prompt_toolkit draws the space after it as a cursor move


def _write_the_number(body: dict[str, Any]) -> Step:
    """The model writes the number it read (so the file's content proves the read result reached it)."""
    read = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")
    number = re.search(r"secret number is (\d+)", read)
    return Call("write", {"path": "answer.txt", "content": f"{number.group(1) if number else '?'}\n"})


def load_sessions(project: Project) -> list[Any]:
    async def load() -> list[Any]:
        async with SQLiteSessionStore(project.sessions_db) as store:
            return [await store.load(s.id) for s in await store.list()]

    return asyncio.run(load())


def test_a_chat_reads_a_file_asks_before_writing_one_and_answers(project: Project, children: list[Any]) -> None:
    (project.cwd / "notes.txt").write_text("Remember: the secret number is 4711.\n")
    script: list[Any] = [
        Call("read", {"path": "notes.txt"}, text="Let me look. "),
        _write_the_number,
        Say("Done: answer.txt holds 4711."),
    ]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("chat")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("Copy the secret number from notes.txt into answer.txt")
        child.expect_exact("read(path='notes.txt')")
        child.expect(r"Allow write\(path='answer.txt', content='4711'\)\? \[y/N\]")
        assert not (project.cwd / "answer.txt").exists(), "nothing is written before the user says yes"
        child.sendline("y")
        child.expect_exact("Done: answer.txt holds 4711.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert (project.cwd / "answer.txt").read_text() == "4711\n"
    assert "Let me look." in screen(child)
    assert len(server.requests) == 3
    tool_results = [m for m in server.messages(2) if m["role"] == "tool"]
    assert "4711" in tool_results[0]["content"]
    assert "wrote" in tool_results[1]["content"].lower() or "answer.txt" in tool_results[1]["content"]
    (session,) = load_sessions(project)
    assert session.messages[-1].text == "Done: answer.txt holds 4711."
    assert transcript_problems(session.messages) == []


def test_ctrl_c_cancels_the_streaming_answer_and_the_chat_goes_on(project: Project, children: list[Any]) -> None:
    script: list[Any] = [Say("Counting slowly: one, two,", stall=True), Say("Fresh answer.")]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("chat")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("count to ten")
        child.expect_exact("one, two,")
        assert server.stalled.wait(30)
        child.sendintr()
        child.expect_exact("[cancelled]")
        child.expect_exact(PROMPT)
        child.sendline("start again")
        child.expect_exact("Fresh answer.")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    second = server.messages(1)
    users = [m["content"] for m in second if m["role"] == "user"]
    assert "count to ten" in users[0]
    assert "start again" in users[-1]
    assert not any(m["role"] == "assistant" for m in second), "the cancelled answer is not part of the transcript"
    (session,) = load_sessions(project)
    assert transcript_problems(session.messages) == []
    assert session.messages[-1].text == "Fresh answer."


def test_multi_line_input_history_and_ctrl_c_at_the_prompt(project: Project, children: list[Any]) -> None:
    with MockLLM([Say("Got two lines."), Say("Got it again."), Say("Got the real one.")]) as server:
        project.use(server)
        child = project.spawn("chat")
        children.append(child)
        child.expect_exact(PROMPT)
        child.send("first line\\\r")  # a trailing backslash: Enter starts a new line
        child.send("second line\x1b\r")  # Esc then Enter: another new line
        child.send("third line\r")
        child.expect_exact("Got two lines.")
        child.expect_exact(PROMPT)
        child.send("\x1b[A")  # Up: the previous input comes back
        child.send("\r")
        child.expect_exact("Got it again.")
        child.expect_exact(PROMPT)
        child.send("thrown away")
        child.sendintr()  # Ctrl-C at the prompt clears the line; the chat goes on
        child.expect_exact(PROMPT)
        child.send("the real one\r")
        child.expect_exact("Got the real one.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    sent = [server.messages(i)[-1]["content"] for i in range(3)]
    assert sent == ["first line\nsecond line\nthird line", "first line\nsecond line\nthird line", "the real one"]
    history = (project.root / "state" / "tether" / "chat_history").read_text()
    assert "+first line" in history
    assert "+the real one" in history
    assert "thrown away" not in history


def test_text_typed_during_a_turn_waits_for_the_next_prompt_and_does_not_answer_the_approval(
    project: Project, children: list[Any]
) -> None:
    """A "y" typed while the model was still thinking does not allow the write the model then asks for: the
    question waits for an answer typed after it, and the typed text comes back at the next prompt, sent by Enter."""
    script: list[Any] = [
        Call("write", {"path": "out.txt", "content": "x"}, stall=True),
        Say("Fine, I will not."),
        Say("You said: y, and more."),
    ]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("chat")
        children.append(child)
        child.expect_exact(PROMPT)
        child.sendline("Write out.txt")
        assert server.stalled.wait(WAIT), screen(child)
        child.send("y, and more\n")  # typed ahead: meant as the next message, not as an answer
        child.expect_exact("y, and more")  # echoed: the terminal has it in its input queue
        server.release()
        child.expect_exact("(what you typed before this question is kept for your next message)")
        child.expect_exact("Allow write(path='out.txt', content='x')? [y/N]")
        child.sendline("n")
        child.expect_exact("Fine, I will not.")
        child.expect_exact(PROMPT)
        child.expect_exact("y, and more")  # the next prompt starts with it
        child.send("\r")
        child.expect_exact("You said: y, and more.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert not (project.cwd / "out.txt").exists(), "the typed-ahead text allowed the write"
    tool_message = next(m for m in server.messages(1) if m["role"] == "tool")
    assert "did not approve" in tool_message["content"]
    assert server.messages(2)[-1] == {"role": "user", "content": "y, and more"}
