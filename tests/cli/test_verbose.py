"""Where the command sends tether's log records (``tether/cli/verbose.py``): stderr, with ``-v`` deciding how
much; a real scripted run's records through the real handler."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from tether import Agent
from tether.cli.verbose import configure_logging
from tether.errors import AuthFailed
from tether.providers.scripted import ScriptedProvider, call, fail, reply
from tether.tools.base import tool

LINE = re.compile(
    r"\d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARNING) +(tether\.[a-z]+)(?: \[([0-9a-f]{8})(?:/(\d+))?\])? (.*)"
)
"""``time level logger [run/turn] message``."""


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(autouse=True)
def restore() -> Iterator[None]:
    """Leave the ``tether`` logger as it was."""
    logger = logging.getLogger("tether")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


def run_with_tool_and_failure() -> None:
    script = [call("add", {"a": 1, "b": 2}), fail(AuthFailed("the key was refused"))]
    Agent(ScriptedProvider(script), tools=[add]).run_sync("1+2?")


def test_minus_v_shows_runs_compactly_on_stderr_and_nothing_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(1)
    run_with_tool_and_failure()
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = [LINE.fullmatch(line) for line in captured.err.splitlines()]
    assert all(lines), captured.err
    shown = [(m[1], m[2], m[4], m[5]) for m in lines if m]
    run_id = lines[0][3] if lines[0] else ""
    assert [line[:3] for line in shown] == [("INFO", "tether.loop", None), ("WARNING", "tether.loop", "2"),
                                           ("INFO", "tether.loop", "2")]  # fmt: skip
    assert shown[0][3] == f"run {run_id} started: scripted:scripted"
    assert shown[1][3] == f"run {run_id} stopped on error (auth_failed): [auth_failed] the key was refused"
    assert shown[2][3].startswith(f"run {run_id} error after 1 turn in ")


def test_minus_vv_shows_every_model_call_and_tool_call(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(2)
    run_with_tool_and_failure()
    lines = [LINE.fullmatch(line) for line in capsys.readouterr().err.splitlines()]
    assert [(m[2], m[4], m[5].split(" ")[0]) for m in lines if m] == [
        ("tether.loop", None, "run"),
        ("tether.loop", "1", "turn"),
        ("tether.tools", "1", "tool"),
        ("tether.loop", "2", "turn"),
        ("tether.loop", "2", "run"),
        ("tether.loop", "2", "run"),
    ]


def test_without_v_tether_warnings_are_bare_lines_and_the_run_s_own_records_are_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(0)
    run_with_tool_and_failure()
    logging.getLogger("tether.sessions").warning("session left out of the list: %s", "broken.json")
    logging.getLogger("tether.mcp").info("not shown")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "session left out of the list: broken.json\n"


def test_configuring_again_replaces_the_handler(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(2)
    configure_logging(1)
    Agent(ScriptedProvider([reply("3")])).run_sync("1+2?")
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 2, err
