"""``tether config set`` typed in a terminal keeps the comments of a hand-written agent.toml."""

from __future__ import annotations

import tomllib
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen

COMMENTED = """\
# Team settings -- reviewed by hand.
[runtime]
model = "openai:gpt-4o"   # the model we pay for

[runtime.limits]
max_turns = 12   # keep runs short
# run_timeout = 600
"""


def test_config_set_in_a_terminal_keeps_every_comment(project: Project, children: list[Any]) -> None:
    path = project.cwd / "agent.toml"
    path.write_text(COMMENTED)
    child = project.spawn("config", "set", "runtime.limits.max_turns", "7")
    children.append(child)
    child.expect_exact("set runtime.limits.max_turns in")
    child.expect(pexpect.EOF)
    child.close()

    assert child.exitstatus == 0, screen(child)
    text = path.read_text()
    for comment in ("# Team settings -- reviewed by hand.", "# the model we pay for", "# keep runs short",
                    "# run_timeout = 600"):  # fmt: skip
        assert comment in text
    assert tomllib.loads(text)["runtime"]["limits"]["max_turns"] == 7
    assert text.replace("max_turns = 7", "max_turns = 12") == COMMENTED
