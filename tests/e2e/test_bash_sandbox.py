"""The ``tether`` command's bash tool and ``[tools.bash]``, run as a user would: confined by default where
bubblewrap works, and where it does not, running unconfined with one notice on stderr for the whole run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import Call, MockLLM, Say
from tests.tools.sandboxing import require_bwrap


def tool_parts(stdout: str) -> list[dict[str, Any]]:
    messages = json.loads(stdout)["messages"]
    return [part for message in messages if message["role"] == "tool" for part in message["parts"]]


def tool_results(stdout: str) -> list[str]:
    return [part["content"] for part in tool_parts(stdout)]


def test_the_command_lines_bash_is_confined_by_default(project: Project, request: pytest.FixtureRequest) -> None:
    require_bwrap(request.config)
    (project.home / "diary.txt").write_text("private\n")
    script: list[Any] = [Call("bash", {"command": f"cat {project.home}/diary.txt; echo HOME=$HOME"}), Say("ok")]
    with MockLLM(script) as server:
        project.use(server)
        done = project.run("run", "Read my diary", "--yes", "--json")

    assert done.returncode == 0, done.stderr
    (result,) = tool_results(done.stdout)
    assert "private" not in result
    assert "No such file or directory" in result
    assert "HOME=/tmp/home" in result
    assert "without a sandbox" not in done.stderr


def test_without_bwrap_the_command_says_so_once_and_runs_unconfined(project: Project) -> None:
    (project.home / "diary.txt").write_text("private\n")
    read = Call("bash", {"command": f"cat {project.home}/diary.txt"})
    script: list[Any] = [read, Call("bash", {"command": "echo second"}), Say("ok")]
    with MockLLM(script) as server:
        project.use(server)
        done = project.run("run", "Read my diary", "--yes", "--json", TETHER_TOOLS__BASH__BWRAP="/missing/bwrap")

    assert done.returncode == 0, done.stderr
    first, second = tool_results(done.stdout)
    assert "private" in first
    assert "second" in second
    assert done.stderr.count("bash commands run without a sandbox") == 1
    assert "bubblewrap (/missing/bwrap) was not found" in done.stderr


def test_required_without_bwrap_refuses_each_command(project: Project) -> None:
    script: list[Any] = [Call("bash", {"command": "echo ran"}), Say("ok")]
    with MockLLM(script) as server:
        project.use(server)
        done = project.run(
            "run", "Run it", "--yes", "--json",
            TETHER_TOOLS__BASH__SANDBOX="required", TETHER_TOOLS__BASH__BWRAP="/missing/bwrap",
        )  # fmt: skip

    assert done.returncode == 0, done.stderr
    (result,) = tool_parts(done.stdout)
    assert result["is_error"] is True
    assert result["code"] == "permission_denied"
    assert "install bubblewrap" in result["content"]
