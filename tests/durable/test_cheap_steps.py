"""What a durable step costs the database: the cancel check is a plain read inside the model call's own step
(no recorded operation of its own), its decision kept in that step's output; a SQLite file runs in WAL mode."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from tests.helpers import assert_valid
from tether import Agent, StopReason, tool
from tether.providers.scripted import ScriptedProvider, call, reply

DEADLINE = 60.0
"""Seconds a test waits for a run before it fails."""


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_model_call_in_a_durable_run_costs_no_recorded_operation_for_the_cancel_check(db_url: str) -> None:
    from dbos import DBOS

    from tether.durable import DurableAgent, launch, shutdown

    model = ScriptedProvider([call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}), reply("done")])
    durable = DurableAgent(Agent(model, tools=[add]), name="cheap")
    launch(system_database_url=db_url)
    try:
        result = await durable.run("add", workflow_id="cheap-run")
        steps = await DBOS.list_workflow_steps_async("cheap-run")
    finally:
        shutdown()
    assert result.text == "done"
    names = [step["function_name"] for step in steps]
    # one recorded operation (a row of operation_outputs) per model call and per tool call: nothing else
    assert len(names) == len(model.requests) + 2 == 5, names
    assert [name.split(":")[0] for name in names] == ["model", "tool", "model", "tool", "model"], names


async def test_a_cancel_kept_in_a_model_calls_step_is_taken_again_on_replay_without_reading_again(
    db_url: str,
) -> None:
    from dbos import DBOS

    from tether.durable import DurableAgent, cancel_run, launch, shutdown
    from tether.durable.dbos_steps import CANCELLED_MARK

    entered, release = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Wait until released."""
        entered.set()
        release.wait(DEADLINE)
        return "held"

    model = ScriptedProvider([call("hold", {}), reply("never said"), reply("never said")])
    durable = DurableAgent(Agent(model, tools=[hold]), name="cancel-kept")
    launch(system_database_url=db_url)
    try:
        running = asyncio.ensure_future(durable.run("hold on", workflow_id="cancel-kept-run"))
        assert await asyncio.to_thread(entered.wait, DEADLINE)
        await cancel_run("cancel-kept-run")
        release.set()
        first = await running
        steps = await DBOS.list_workflow_steps_async("cancel-kept-run")
        (kept,) = [step for step in steps if step["output"] == CANCELLED_MARK]
        assert kept["function_name"] == "model:2.1"
        # a copy of the run past that step (a new workflow id, so no cancel message to read): it replays the
        # kept step and stops there again, without calling the model
        fork = await DBOS.fork_workflow_async("cancel-kept-run", kept["function_id"] + 1)
        again = await fork.get_result()
    finally:
        release.set()
        shutdown()
    for result in (first, again):
        assert result.stop_reason == StopReason.CANCELLED
        assert_valid(result)
        assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
    assert len(model.requests) == 1


async def test_launch_puts_a_sqlite_file_in_wal_mode_with_normal_sync(tmp_path: Path) -> None:
    from dbos._dbos import _get_dbos_instance

    from tether.durable import launch, shutdown

    path = tmp_path / "runs.sqlite"
    launch(path)
    try:
        with _get_dbos_instance()._sys_db.engine.connect() as connection:
            (synchronous,) = connection.exec_driver_sql("PRAGMA synchronous").one()
    finally:
        shutdown()
    assert synchronous == 1  # NORMAL
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_model_call_of_a_cancelled_run_is_not_made_even_where_the_cancel_reaches_no_waiting_task(
    tmp_path: Path,
) -> None:
    from tether.durable import DurableAgent, cancel_run, launch, shutdown
    from tether.durable.dbos_steps import DBOSSteps
    from tether.loop.interrupts import Interrupted

    entered, release = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Wait until released."""
        entered.set()
        release.wait(DEADLINE)
        return "held"

    durable = DurableAgent(Agent(ScriptedProvider([call("hold", {}), reply("no")]), tools=[hold]), name="unreached")
    launch(tmp_path / "runs.sqlite")
    try:
        running = asyncio.ensure_future(durable.run("hold on", workflow_id="unreached-run"))
        assert await asyncio.to_thread(entered.wait, DEADLINE)
        await cancel_run("unreached-run")
        # the run's steps seen from a task no interrupter cancels (``on_cancel`` cancels nothing here)
        steps, asked = DBOSSteps("unreached-run"), []
        steps.on_cancel = lambda: asked.append("cancel")

        async def model_call() -> str:
            asked.append("model")
            return "answer"

        try:
            await steps.step("agent:helper:call_1/model:1.1", model_call)
        except Interrupted as stopped:
            interrupt = stopped.interrupt
        release.set()
        await running
    finally:
        release.set()
        shutdown()
    assert asked == ["cancel"]
    assert interrupt.reason == StopReason.CANCELLED
