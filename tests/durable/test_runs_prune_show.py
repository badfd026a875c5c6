"""``tether runs show`` listing a run's steps and ``tether runs prune`` deleting ended runs, with the real
command on runs made through ``tether.durable``, on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tether import Agent, tool
from tether.durable import Queue
from tether.durable.store import read_run, read_runs
from tether.providers.scripted import ScriptedProvider, call, reply

WAIT = 120


@tool
def note(text: str) -> str:
    """Note something."""
    return "noted"


@tool
def broken(text: str) -> str:
    """Fail."""
    raise ValueError("the tool broke")


def _where(db_url: str) -> dict[str, object]:
    if db_url.startswith("sqlite:///"):
        return {"path": Path(db_url.removeprefix("sqlite:///"))}
    return {"url": db_url}


def tether_runs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "runs", *args], capture_output=True, text=True, timeout=WAIT, check=False
    )


async def test_runs_show_lists_each_step_with_its_outcome(db_url: str) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    model = ScriptedProvider([call("note", {"text": "a"}), call("broken", {"text": "b"}), reply("all noted")])
    durable = DurableAgent(Agent(model, tools=[note, broken]), name="shown")
    launch(system_database_url=db_url)
    try:
        await durable.run("note it", workflow_id="steps-1")
    finally:
        shutdown()

    shown = tether_runs("show", "steps-1", "--db", db_url)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "STEP"])
    rows = [line.split() for line in lines[header + 1 :] if line.strip() and line.split()[0].isdigit()]
    names = [row[1] for row in rows]
    assert [name.split(":")[0] for name in names] == ["model", "tool", "model", "tool", "model"]
    assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
    assert all(row[-1] == "ok" for row in rows), "a tool's error is its result, not a failed step"
    assert all(("ms" in row or "s" in row) for row in rows)
    assert shown.stdout.rstrip().endswith("all noted")
    detail = read_run("steps-1", **_where(db_url))  # type: ignore[arg-type]
    assert detail is not None
    assert detail.result is not None
    assert [s.name for s in detail.steps if not s.name.startswith("DBOS.")] == names
    assert all(s.duration is not None for s in detail.steps)


async def test_prune_deletes_only_ended_runs_older_than_asked_with_their_steps(db_url: str) -> None:
    from tether.durable import DurableAgent, cancel_run, launch, shutdown

    model = ScriptedProvider([call("note", {"text": "a"}), reply("one"), reply("two")])
    durable = DurableAgent(Agent(model, tools=[note]), name="pruned")
    served, parked = Queue("served"), Queue("parked")
    launch(system_database_url=db_url, queues=[served])
    try:
        for n in (1, 2):
            await (await durable.enqueue(f"prompt {n}", queue=served, workflow_id=f"done-{n}")).result()
        await durable.enqueue("waits", queue=parked, workflow_id="waiting")
        await durable.enqueue("never", queue=parked, workflow_id="dropped")
        await cancel_run("dropped")
    finally:
        shutdown()
    where = _where(db_url)
    assert read_run("done-1", **where).steps  # type: ignore[arg-type, union-attr]

    recent = tether_runs("prune", "--older-than", "1d", "--db", db_url)
    assert recent.returncode == 0, recent.stderr
    assert recent.stderr.strip() == "0 runs deleted"
    await asyncio.sleep(2.1)  # the store keeps whole seconds on SQLite: every run is now more than a second old
    dry = tether_runs("prune", "--older-than", "1s", "--status", "completed", "--dry-run", "--db", db_url)
    assert dry.returncode == 0, dry.stderr
    assert sorted(line.split("\t")[0] for line in dry.stdout.splitlines()) == ["done-1", "done-2"]
    assert "2 runs would be deleted" in dry.stderr
    assert len(read_runs(**where)) == 4, "a dry run deletes nothing"  # type: ignore[arg-type]
    pruned = tether_runs("prune", "--older-than", "1s", "--db", db_url)
    assert pruned.returncode == 0, pruned.stderr
    assert sorted(pruned.stdout.split()) == ["done-1", "done-2", "dropped"]
    assert "3 runs deleted" in pruned.stderr

    assert [r.run_id for r in read_runs(**where)] == ["waiting"]  # type: ignore[arg-type]
    assert read_run("done-1", **where) is None  # type: ignore[arg-type]
    bad = tether_runs("prune", "--older-than", "soon", "--db", db_url)
    assert bad.returncode == 2
    assert "is not a duration" in bad.stderr


def test_steps_are_gone_with_their_run(db_url: str) -> None:
    """The store's own tables, read directly: ``delete_runs`` leaves no step of a deleted run behind."""
    from tether.durable import DurableAgent, delete_runs, launch, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([call("note", {"text": "a"}), reply("one")]), tools=[note]),
                           name="gone")  # fmt: skip

    async def go() -> list[str]:
        await durable.run("note", workflow_id="gone-1")
        await durable.enqueue("waits", queue=Queue("parked"), workflow_id="kept")
        return await delete_runs(["gone-1", "kept", "no-such-run"])

    launch(system_database_url=db_url)
    try:
        deleted = asyncio.run(go())
    finally:
        shutdown()
    assert deleted == ["gone-1"], "a queued run and an unknown id are not deleted"
    query = "SELECT COUNT(*) FROM {}operation_outputs WHERE workflow_uuid = 'gone-1'"
    if db_url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as lite:
            (count,) = lite.execute(query.format("")).fetchone()
    else:
        import psycopg

        with psycopg.connect(db_url) as connection:
            row = connection.execute(query.format("dbos.")).fetchone()
            assert row is not None
            (count,) = row
    assert count == 0
