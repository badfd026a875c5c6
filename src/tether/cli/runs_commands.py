"""``tether runs``: submit, list, show, cancel and resume the durable runs of a workflow database.

Contract: every command opens the database ``--db`` names (:mod:`tether.cli.runs_db`; the state directory's
SQLite file by default) under an executor id of its own, so that it never recovers nor disturbs a worker's
runs, and shuts DBOS down before it returns; ``list`` only reads the runs' table, without the engine
(:mod:`tether.durable.store`). Exit codes: 0 success, 1 no such run or a configuration or
database problem, 2 a usage error. This module imports only click; each command loads the rest when it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from tether.cli.config_flag import config_option
from tether.cli.help import WholeSummaries

if TYPE_CHECKING:
    from tether.durable import RunRecord

T = TypeVar("T")
_STATUSES = click.Choice(["queued", "running", "completed", "failed", "cancelled"])
_HEAD = 40
"""Characters of the prompt ``runs list`` shows."""


def _db_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--db", metavar="URL", help="The workflow database: postgresql://..., sqlite:///... or a file."
    )(command)


@click.group("runs", cls=WholeSummaries)
def runs() -> None:
    """Submit, list, show, cancel and resume durable runs (those of tether batch and tether worker)."""


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _with_runs(db: str | None, operation: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Open the workflow database, run ``operation``, shut down; problems exit with 1."""
    import asyncio
    import os
    import uuid
    from pathlib import Path

    from tether.cli.runs_db import runs_database
    from tether.errors import TetherError

    try:
        database = runs_database(db, Path.cwd(), os.environ)
    except TetherError as error:
        _fail(error.message)
    from tether.durable import launch, shutdown

    try:
        launch(**database.launch_arguments(), worker_id=f"cli-{uuid.uuid4().hex[:12]}")  # type: ignore[arg-type]
    except TetherError as error:
        _fail(error.message)
    except Exception as error:  # noqa: BLE001 - the database out of reach: one line, never a traceback
        _fail(f"the workflow database {database.shown()} cannot be opened: {' '.join(str(error).split())}")
    try:
        return asyncio.run(operation())
    except TetherError as error:
        _fail(f"{error.message} (`tether runs list` shows the runs)")
    finally:
        shutdown()


def _read_runs(db: str | None, status: str | None, limit: int) -> list[RunRecord]:
    """The runs of the database ``--db`` names, read without the engine (``tether.durable.store``): a listing
    answers in the time of its query, not of DBOS's import. Problems exit with 1."""
    import os
    from pathlib import Path

    from tether.cli.runs_db import runs_database
    from tether.durable.store import read_runs
    from tether.errors import TetherError

    try:
        database = runs_database(db, Path.cwd(), os.environ)
        return read_runs(path=database.path, url=database.url, status=status, limit=limit)  # type: ignore[arg-type]
    except TetherError as error:
        _fail(error.message)
    except Exception as error:  # noqa: BLE001 - the database out of reach or unreadable: one line, no traceback
        _fail(f"the workflow database {database.shown()} cannot be read: {' '.join(str(error).split())}")


def _when(seconds: float | None) -> str:
    import datetime

    if seconds is None:
        return "-"
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


def _cost(record: RunRecord) -> str:
    return "-" if record.cost_usd is None else f"${record.cost_usd:.4f}"


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@runs.command("list")
@click.option("--status", type=_STATUSES, help="Only the runs in this status.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, metavar="N")
@_db_option
def list_(status: str | None, limit: int, db: str | None) -> None:
    """List the newest runs: id, status, agent, created, prompt, stop reason, cost, deploy version (only a
    worker of a run's version takes it)."""
    records = _read_runs(db, status, limit)
    if not records:
        click.echo("no runs", err=True)
        return
    rows = [("ID", "STATUS", "AGENT", "CREATED", "PROMPT", "STOP", "COST", "VERSION")]
    rows += [
        (
            r.run_id,
            r.status,
            r.agent,
            _when(r.created_at),
            _one_line(r.prompt_head, _HEAD),
            "-" if r.stop_reason is None else str(r.stop_reason),
            _cost(r),
            r.version or "-",
        )
        for r in records
    ]
    from tether.cli.table import aligned

    for line in aligned(rows):
        click.echo(line)


@runs.command("submit")
@click.argument("prompt")
@click.option("--queue", "-q", default="default", show_default=True, metavar="NAME", help="The queue to put it on.")
@click.option("--id", "run_id", metavar="ID", help="The run's id (default: a new one); an id that exists is kept.")
@click.option("--agent", metavar="MODULE:ATTR", help="The worker's --agent, when it runs one instead of agent.toml's.")
@_db_option
@config_option
def submit(
    prompt: str, queue: str, run_id: str | None, agent: str | None, db: str | None, config_file: str | None
) -> None:
    """Put PROMPT on a queue as a durable run for tether worker, and print its id.

    The run waits, queued, until a worker serving the queue (tether worker --queue NAME, on the same --db)
    takes it; tether runs show ID follows it. The agent is the worker's: agent.toml's, or --agent's. Exit
    codes: 0 submitted, 1 configuration or database problem, 2 usage error.
    """
    from tether.cli.submit import SubmitOptions
    from tether.cli.submit import main as submit_main

    if not prompt.strip():
        raise click.BadParameter("the prompt is empty", param_hint="PROMPT")
    sys.exit(submit_main(SubmitOptions(prompt, queue, run_id, agent, db, config_file)))


@runs.command("show")
@click.argument("run_id", metavar="ID")
@_db_option
def show(run_id: str, db: str | None) -> None:
    """Show the run ID; once it ended, its answer too."""

    async def fetch() -> tuple[RunRecord, str | None]:
        from tether.durable import DurableRun, get_run
        from tether.errors import ConfigInvalid

        record = await get_run(run_id)
        if record is None:
            raise ConfigInvalid(f"there is no durable run with id {run_id!r}")
        if record.stop_reason is None:
            return record, None
        return record, (await DurableRun(run_id).result()).text

    record, text = _with_runs(db, fetch)
    click.echo(_describe(record))
    if text is not None:
        click.echo("")
        click.echo(text)


def _describe(record: RunRecord) -> str:
    fields = [
        ("id", record.run_id),
        ("status", record.status),
        ("agent", record.agent),
        ("queue", record.queue or "-"),
        ("worker", record.worker or "-"),
        ("version", record.version or "-"),
        ("created", _when(record.created_at)),
        ("updated", _when(record.updated_at)),
        ("stop reason", "-" if record.stop_reason is None else str(record.stop_reason)),
        ("cost", _cost(record)),
        ("prompt", record.prompt_head),
    ]
    return "\n".join(f"{name + ':':<13}{value}" for name, value in fields)


@runs.command("cancel")
@click.argument("run_id", metavar="ID")
@_db_option
def cancel(run_id: str, db: str | None) -> None:
    """Cancel the run ID: a queued run never starts, a running one stops before its next model call."""
    from tether.durable import cancel_run

    record = _with_runs(db, lambda: cancel_run(run_id))
    click.echo(f"{record.run_id}: {record.status}")


@runs.command("resume")
@click.argument("run_id", metavar="ID")
@_db_option
def resume(run_id: str, db: str | None) -> None:
    """Put the run ID back on its queue (cancelled before it started, or left by a dead worker)."""

    async def go() -> RunRecord:
        from tether.durable import get_run, resume_run
        from tether.errors import ConfigInvalid

        await resume_run(run_id)
        record = await get_run(run_id)
        if record is None:
            raise ConfigInvalid(f"there is no durable run with id {run_id!r}")
        return record

    record = _with_runs(db, go)
    click.echo(f"{record.run_id}: {record.status}")
