"""``tether run -a FILE``: the file goes to the model with the prompt, as its API takes it; a file the model
cannot read is refused before anything is sent, and one that cannot be read at all is a usage error."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import MockLLM, Say

PNG = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 8, 8) + bytes(20)


def run(project: Project, children: list[Any], *args: str) -> pexpect.spawn[str]:
    child = project.spawn("run", *args)
    children.append(child)
    child.expect(pexpect.EOF)
    child.close()
    return child


def test_an_attached_image_reaches_the_model_with_the_prompt(project: Project, children: list[Any]) -> None:
    (project.cwd / "photo.png").write_bytes(PNG)
    with MockLLM([Say("A tiny black square.")]) as server:
        project.use(server)
        child = run(project, children, "-a", "photo.png", "What is this?")
    assert child.exitstatus == 0, screen(child)
    assert "A tiny black square." in screen(child)
    [user] = [m for m in server.messages(0) if m["role"] == "user"]
    assert user["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
    ]


def test_a_file_the_model_cannot_read_is_refused_before_anything_is_sent(project: Project, children: list[Any]) -> None:
    (project.cwd / "spec.pdf").write_bytes(b"%PDF-1.7 a spec")
    with MockLLM([Say("never")]) as server:
        project.use(server)
        child = run(project, children, "-a", "spec.pdf", "Summarize it.")
    assert child.exitstatus == 1, screen(child)
    assert "cannot read documents" in screen(child)
    assert server.requests == []


def test_a_file_that_cannot_be_read_is_a_usage_error(project: Project, children: list[Any]) -> None:
    child = run(project, children, "-a", "missing.png", "hi")
    assert child.exitstatus == 2
    assert "cannot read the attachment" in screen(child)
