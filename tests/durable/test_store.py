"""The run store read without the engine (``tether.durable.store``): the same records the engine lists, on a
SQLite file and on PostgreSQL, and ``tether runs list`` answering without importing DBOS."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tether import Agent, tool
from tether.durable import Queue
from tether.durable.store import read_runs
from tether.providers.scripted import ScriptedProvider, call, reply


@tool
def note(text: str) -> str:
    """Note something."""
    return "noted"


def _where(db_url: str) -> dict[str, object]:
    if db_url.startswith("sqlite:///"):
        return {"path": Path(db_url.removeprefix("sqlite:///"))}
    return {"url": db_url}


async def test_the_store_reads_the_records_the_engine_lists(db_url: str) -> None:
    from tether.durable import DurableAgent, cancel_run, launch, list_runs, shutdown

    model = ScriptedProvider([call("note", {"text": "a"}), reply("done one"), reply("done two")])
    durable = DurableAgent(Agent(model, tools=[note]), name="stored")
    served, parked = Queue("served"), Queue("parked")
    launch(system_database_url=db_url, queues=[served])
    try:
        for n in (1, 2):
            await (await durable.enqueue(f"prompt {n} " + "x" * 100, queue=served, workflow_id=f"run-{n}")).result()
        await durable.enqueue("waits", queue=parked, workflow_id="waiting")
        await durable.enqueue("never", queue=parked, workflow_id="dropped")
        await cancel_run("dropped")
        by_engine = {status: await list_runs(status) for status in (None, "queued", "completed", "cancelled")}
        two = await list_runs(limit=2)
    finally:
        shutdown()

    where = _where(db_url)
    for status, expected in by_engine.items():
        assert read_runs(status=status, **where) == expected, status  # type: ignore[arg-type]
    assert read_runs(limit=2, **where) == two  # type: ignore[arg-type]
    (first,) = [r for r in by_engine[None] if r.run_id == "run-1"]
    assert first.prompt_head.startswith("prompt 1 ")
    assert len(first.prompt_head) == 80
    assert first.stop_reason is not None
    assert first.queue == "served"


def test_a_file_the_engine_never_opened_holds_no_runs(tmp_path: Path) -> None:
    assert read_runs(path=tmp_path / "absent.sqlite") == []
    assert not (tmp_path / "absent.sqlite").exists(), "reading never makes the file"
    empty = tmp_path / "empty.sqlite"
    import sqlite3

    sqlite3.connect(empty).close()
    assert read_runs(path=empty) == []


LIST_AND_SAY_WHAT_LOADED = """
import sys
from tether.cli.app import main
try:
    main(["runs", "list", "--db", sys.argv[1]], prog_name="tether")
except SystemExit as done:
    assert not done.code, done.code
print("dbos loaded" if "dbos" in sys.modules else "dbos not loaded", file=sys.stderr)
"""


def test_runs_list_shows_the_runs_without_importing_the_engine(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("fine")])), name="agent")

    async def one_run() -> None:
        await (await durable.enqueue("hello there", queue=Queue("jobs"), workflow_id="run-x")).result()

    launch(tmp_path / "runs.sqlite", queues=[Queue("jobs")])
    try:
        asyncio.run(one_run())
    finally:
        shutdown()

    listed = subprocess.run(
        [sys.executable, "-c", LIST_AND_SAY_WHAT_LOADED, str(tmp_path / "runs.sqlite")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert listed.returncode == 0, listed.stderr
    (row,) = [line.split() for line in listed.stdout.splitlines() if line.startswith("run-x")]
    assert row[1:3] == ["completed", "agent"]
    assert "hello there" in listed.stdout
    assert listed.stderr.strip().endswith("dbos not loaded"), listed.stderr
