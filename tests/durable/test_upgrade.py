"""Values written by an earlier version read with today's code: the committed fixture of format version 1
(``tests/fixtures/durable/runs-v1.sqlite``, written by ``write_v1.py``), and rows written before tether had
its own format (the engine's pickles). Results, records and steps are read back with the engine and without."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from tests.fixtures.durable.shapes import Invoice
from tether import Agent
from tether.durable.store import read_runs
from tether.errors import AuthFailed
from tether.limits import StopReason
from tether.loop.accumulator import AccumulatedTurn
from tether.loop.steps import ToolOutcome
from tether.providers.scripted import ScriptedProvider, reply

FIXTURE = Path(__file__).parents[1] / "fixtures" / "durable" / "runs-v1.sqlite"


def copy_of_fixture(tmp_path: Path) -> Path:
    copy = tmp_path / "runs-v1.sqlite"
    shutil.copyfile(FIXTURE, copy)
    return copy


def test_the_fixture_is_of_format_version_1() -> None:
    """The fixture is what it says: every value tether's JSON, version 1 (a guard against rewriting it)."""
    with sqlite3.connect(f"{FIXTURE.as_uri()}?mode=ro", uri=True) as connection:
        kinds = {row[0] for row in connection.execute("SELECT serialization FROM workflow_status")}
        outputs = [row[0] for row in connection.execute("SELECT output FROM workflow_output")]
    assert kinds == {"tether_json"}
    assert outputs
    assert all(text.startswith('{"tether_format":1,') for text in outputs)


async def test_results_records_and_steps_of_format_1_read_with_todays_code(tmp_path: Path) -> None:
    from dbos import DBOS

    from tether.durable import DurableAgent, DurableRun, get_run, launch, list_runs, shutdown

    for name in ("tools", "typed", "failed"):  # a deploy of today's code: the same agents' names
        DurableAgent(Agent(ScriptedProvider([reply("unused")])), name=name)
    path = copy_of_fixture(tmp_path)
    launch(path)
    try:
        tools = await DurableRun("v1-tools").result()
        typed = await DurableRun("v1-typed").result()
        failed = await DurableRun("v1-failed").result()
        records = await list_runs()
        queued = await get_run("v1-queued")
        steps = await DBOS.list_workflow_steps_async("v1-tools")
        failed_steps = await DBOS.list_workflow_steps_async("v1-failed")
    finally:
        shutdown()

    assert tools.text == "5, and charged"
    assert tools.stop_reason is StopReason.COMPLETE
    assert tools.degraded is False
    assert [r.content for m in tools.messages for r in m.tool_results] == ["5", "charged 5 cents"]
    assert tools.turns == 3
    assert len(tools.turn_records) == 3
    assert tools.usage.requests == 3
    assert tools.last_agent == "counter"
    output: Any = typed.output
    assert output == Invoice(number=7, lines=["tea", "cake"])
    assert failed.stop_reason is StopReason.ERROR
    assert failed.degraded is True
    assert isinstance(failed.error, AuthFailed)
    assert (failed.error.code, failed.error.status, failed.error.request_id) == ("auth_failed", 401, "req-1")

    assert {r.run_id: r.status for r in records} == {
        "v1-tools": "completed",
        "v1-typed": "completed",
        "v1-failed": "completed",
        "v1-queued": "queued",
    }
    assert queued is not None
    assert queued.prompt_head == "never taken"
    assert queued.queue == "upgrade"
    assert read_runs(path=path) == records, "the reader without the engine reads the same records"

    by_name = {step["function_name"]: step for step in steps}
    model = by_name["model:1.1"]["output"]
    assert isinstance(model, AccumulatedTurn)
    assert [c.name for c in model.tool_calls] == ["add"]
    outcome = by_name["tool:charge:call_2"]["output"]
    assert isinstance(outcome, ToolOutcome)
    assert outcome.result is not None
    assert outcome.result.content == "charged 5 cents"
    assert isinstance(by_name["tool:charge:call_2:started"]["output"], str)
    [model_call] = [step for step in failed_steps if step["function_name"] == "model:1.1"]
    assert isinstance(model_call["error"], AuthFailed), "a step's kept exception is raised again as its own type"


async def test_rows_the_engine_pickled_before_tethers_format_still_read(tmp_path: Path) -> None:
    """A database written before tether had its own format: the engine's default serializer (pickle)."""
    from dbos import DBOS

    from tether.durable import DurableAgent, DurableRun, launch, list_runs, shutdown, sqlite_url

    durable = DurableAgent(Agent(ScriptedProvider([reply("from before")])), name="before")
    path = tmp_path / "runs.sqlite"
    DBOS(config={"name": "tether", "system_database_url": sqlite_url(path), "log_level": "WARNING"})
    DBOS.launch()
    try:
        await durable.run("an old run", workflow_id="old-1")
    finally:
        DBOS.destroy()
    with sqlite3.connect(path) as connection:
        [(kind,)] = connection.execute("SELECT serialization FROM workflow_status").fetchall()
    assert kind == "py_pickle"

    launch(path)
    try:
        result = await DurableRun("old-1").result()
        records = await list_runs()
    finally:
        shutdown()
    assert result.text == "from before"
    assert [(r.run_id, r.prompt_head, r.stop_reason) for r in records] == [("old-1", "an old run", "complete")]
    assert read_runs(path=path) == records
