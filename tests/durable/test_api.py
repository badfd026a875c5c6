"""tether.durable's surface: loaded only when used, and bad input answered with ``config_invalid``."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether import Agent, RunContext, tool
from tether.errors import ConfigInvalid, ToolError
from tether.providers.scripted import ScriptedProvider, call, reply


def test_importing_tether_durable_and_the_loop_loads_no_dbos() -> None:
    code = "import sys, tether.durable, tether.agent, tether.loop.engine; "
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] in {'dbos', 'sqlalchemy', 'psycopg'}))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "[]"


def test_a_durable_agent_name_must_be_a_plain_name() -> None:
    from tether.durable import DurableAgent

    with pytest.raises(ConfigInvalid, match="durable agent name"):
        DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="no spaces here")


async def test_a_run_before_launch_says_to_launch_first() -> None:
    from tether.durable import DurableAgent

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="not-launched")
    with pytest.raises(ConfigInvalid, match=r"launch\(") as raised:
        await durable.run("hello")
    assert raised.value.code == "config_invalid"


def test_launch_refuses_a_file_and_a_url_together_and_a_url_of_another_kind(tmp_path: Path) -> None:
    from tether.durable import launch

    with pytest.raises(ConfigInvalid, match="not both"):
        launch(tmp_path / "runs.sqlite", system_database_url="postgresql://127.0.0.1/x")
    with pytest.raises(ConfigInvalid, match="postgresql://"):
        launch(system_database_url="mysql://127.0.0.1/x")


def test_sqlite_url_is_absolute(tmp_path: Path) -> None:
    from tether.durable import sqlite_url

    assert sqlite_url(tmp_path / "runs.sqlite") == f"sqlite:///{tmp_path.resolve() / 'runs.sqlite'}"


async def test_a_durable_run_in_a_session_needs_a_store_and_no_history(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, Queue, launch, shutdown
    from tether.messages import Message
    from tether.sessions import SQLiteSessionStore

    bare = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="session-bare")
    stored = DurableAgent(Agent(ScriptedProvider([reply("hi")]), store=SQLiteSessionStore(tmp_path / "s.db")), name="s")
    launch(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ConfigInvalid, match="session store"):
            await bare.run("hello", session="s1")
        with pytest.raises(ConfigInvalid, match="not both"):
            await stored.enqueue("hello", queue=Queue("q"), session="s1", history=[Message.user("earlier")])
    finally:
        shutdown()


@dataclass
class Handle:
    serial: int
    secret: str = "deps-only-c0ffee"


made: list[Handle] = []


def make_handle() -> Handle:
    made.append(Handle(len(made) + 1))
    return made[-1]


@tool
def which(ctx: RunContext[Handle]) -> str:
    """Which handle this run holds."""
    return f"handle {ctx.deps.serial}"


async def test_a_durable_runs_deps_are_made_where_it_runs_and_never_stored(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    model = ScriptedProvider([call("which", {}), reply("one"), call("which", {}), reply("two")])
    durable = DurableAgent(Agent(model, tools=[which], deps_type=Handle), name="with-deps", deps=make_handle)
    with pytest.raises(ConfigInvalid, match="deps must be a function"):
        DurableAgent(Agent(ScriptedProvider([])), name="bad-deps", deps=Handle(0))  # type: ignore[arg-type]
    launch(tmp_path / "runs.sqlite")
    try:
        first = await durable.run("which?")
        second = await durable.run("which?")
    finally:
        shutdown()
    assert [r.messages[2].tool_results[0].content for r in (first, second)] == ["handle 1", "handle 2"]
    assert b"deps-only-c0ffee" not in (tmp_path / "runs.sqlite").read_bytes(), "the deps are not in its records"


class Total(BaseModel):
    amount: int


async def test_a_durable_run_returns_its_typed_output(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    model = ScriptedProvider([call("final_result", {"amount": "x"}), call("final_result", {"amount": 12})])
    durable = DurableAgent(Agent(model, output_type=Total), name="typed")
    launch(tmp_path / "runs.sqlite")
    try:
        result = await durable.run("How much?", workflow_id="typed-1")
        again = await durable.result("typed-1")
    finally:
        shutdown()
    output: Any = result.output  # a durable agent's results are RunResult[Any]
    kept: Any = again.output
    assert output == Total(amount=12)
    assert kept == Total(amount=12), "the kept result holds the output, typed"


async def test_a_run_id_the_store_would_refuse_is_config_invalid(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, Queue, get_run, launch, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")] * 4)), name="ids")
    launch(tmp_path / "runs.sqlite")
    try:
        for bad in ("", "   ", "a\x00b", " leading", "trailing\n", "x" * 300):
            with pytest.raises(ConfigInvalid, match="a run id must be"):
                await durable.run("hello", workflow_id=bad)
            with pytest.raises(ConfigInvalid, match="a run id must be"):
                await durable.enqueue("hello", queue=Queue("ids"), workflow_id=bad)
            with pytest.raises(ConfigInvalid, match="a run id must be"):
                await get_run(bad)
        assert (await durable.run("hello", workflow_id="run 1: fine")).text == "hi"
    finally:
        shutdown()


async def test_what_pickle_refuses_from_a_tool_is_kept_as_its_description(tmp_path: Path) -> None:
    """A tool's exception of a class defined in a function, holding a lock, and a ``Done`` carrying a lock: the
    step keeps their descriptions, so the run completes and says why."""
    import threading

    from tether import Done
    from tether.durable import DurableAgent, launch, shutdown

    class Locked(ToolError):  # a tool's own error, as the model should read it: kept as is when it pickles
        def __init__(self, why: str) -> None:
            super().__init__(why)
            self.lock = threading.Lock()

    @tool
    def fragile() -> str:
        """Fails in a way pickle cannot keep."""
        raise Locked("the lock is held")

    @tool
    def finish() -> str:
        """Ends the run with a value pickle cannot keep."""
        raise Done(threading.Lock())  # type: ignore[arg-type]

    model = ScriptedProvider([call("fragile", {}), call("finish", {})])
    durable = DurableAgent(Agent(model, tools=[fragile, finish]), name="fragile")
    launch(tmp_path / "runs.sqlite")
    try:
        result = await durable.run("go", workflow_id="fragile-1")
    finally:
        shutdown()
    [failed] = result.messages[2].tool_results
    assert failed.is_error
    assert "the lock is held" in failed.content
    assert result.stop_reason == "done_tool"
    assert "lock object" in result.text
