"""``tether run "What is in notes.txt?"`` in a pseudo-terminal ends with an answer: a model that asks for the
same read again gets the earlier result (labelled as such) and is then asked only to answer. Once against a
scripted server, and once on the real embedded model, which tether picks when nothing is configured."""

from __future__ import annotations

import re
from typing import Any

import pexpect
import pytest

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import Call, MockLLM, Say
from tether.providers.default_model import local_model_installed

NOTES = "Buy milk\nCall Alice at 5pm\n"
READ = {"path": "notes.txt"}


def test_a_repeated_read_is_answered_from_the_first_and_the_run_ends_with_the_answer(
    project: Project, children: list[Any]
) -> None:
    (project.cwd / "notes.txt").write_text(NOTES)
    script: list[Any] = [Call("read", READ), Call("read", READ), Say("The notes say: buy milk, call Alice at 5pm.")]
    with MockLLM(script) as server:
        project.use(server)
        child = project.spawn("run", "What is in notes.txt?")
        children.append(child)
        child.expect_exact("The notes say: buy milk, call Alice at 5pm.")
        child.expect(pexpect.EOF)
        child.close()

    shown = screen(child)
    assert child.exitstatus == 0, shown
    assert shown.count("✓ read: 1 Buy milk (+1 line)") == 1
    assert "↺ read: (repeated: answered from the earlier result)" in shown
    assert "permission_denied" not in shown
    assert "(asking the model for a final answer, without tools)" in shown
    assert "[consecutive_errors]" not in shown
    assert [request["tool_choice"] for request in server.requests] == ["auto", "auto", "none"]
    repeated = [m for m in server.messages(2) if m["role"] == "tool"][-1]
    assert repeated["content"] == [m for m in server.messages(1) if m["role"] == "tool"][-1]["content"]


@pytest.mark.skipif(not local_model_installed(), reason="the embedded model (tether[local]) is not installed")
def test_on_the_embedded_model_a_question_about_the_notes_ends_with_an_answer(
    project: Project, children: list[Any]
) -> None:
    # JSON action mode offers the answer first (loop/actions.py): the 135M model answers what it can rather than
    # calling a tool with made-up arguments until the consecutive-errors guard stops it. It may still read the
    # file; either way the run ends with an answer.
    (project.cwd / "notes.txt").write_text(NOTES)
    child = project.spawn("run", "What is in notes.txt?")
    children.append(child)
    child.expect(pexpect.EOF, timeout=600)
    child.close()

    shown = screen(child)
    assert child.exitstatus == 0, shown
    assert "local:smollm2" in shown
    assert len(re.findall(r"→ read\(", shown)) <= 2, shown
    assert "[consecutive_errors]" not in shown
    assert "permission_denied" not in shown
