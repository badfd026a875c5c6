"""``tether runs``: submit, list, show, cancel and resume the durable runs of a workflow database (``prune``,
``recover`` and ``queue`` are in :mod:`tether.cli.runs_admin`; ``pending``, ``approve`` and ``deny`` in
:mod:`tether.cli.runs_decisions`).

Contract: every command works on the database ``--db`` names (:mod:`tether.cli.runs_db`; the state directory's
SQLite file by default), which must exist and be a workflow database (a mistyped name is an error, never a new
empty database). ``list``, ``show`` and ``prune --dry-run`` only read it, without the engine
(:mod:`tether.durable.store`, and the workers' heartbeats, :mod:`tether.durable.liveness`): nothing is
written, nor migrated. ``cancel``, ``resume`` and ``prune`` write,
through the engine, launched under an executor id of its own (so that it never recovers nor disturbs a
worker's runs) and shut down before the command returns; ``submit`` may make the database. Exit codes: 0
success, 1 no such run, a run that cannot be resumed, a live worker's run or id, or a configuration or database
problem, 2 a usage
error. This module imports only click; each command loads the rest when it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from tether.cli.config_flag import config_option
from tether.cli.help import WholeSummaries

if TYPE_CHECKING:
    from tether.cli.runs_db import RunsDatabase
    from tether.durable import RunRecord
    from tether.durable.liveness import WorkerRow
    from tether.durable.store import StepRecord

T = TypeVar("T")
_STATUSES = click.Choice(["queued", "running", "paused", "completed", "failed", "cancelled"])
_HEAD = 40
"""Characters of the prompt ``runs list`` shows."""


def _db_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--db", metavar="URL", help="The workflow database: postgresql://..., sqlite:///... or a file."
    )(command)


@click.group("runs", cls=WholeSummaries)
def runs() -> None:
    """Submit, list, show, cancel, resume, recover and prune durable runs (those of tether batch and tether
    worker); approve or deny the calls paused runs wait on; a queue's limits."""


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _database(db: str | None, *, make: bool = False) -> RunsDatabase:
    """The workflow database ``--db`` names, which must exist (see the module docstring) unless the command may
    ``make`` it; problems exit with 1."""
    import os
    from pathlib import Path

    from tether.cli.runs_db import runs_database
    from tether.durable.store import require_database
    from tether.errors import TetherError

    try:
        database = runs_database(db, Path.cwd(), os.environ)
    except TetherError as error:
        _fail(error.message)
    if make:
        return database
    try:
        require_database(path=database.path, url=database.url)
    except TetherError as error:
        _fail(f"--db {error.message}")
    except Exception as error:  # noqa: BLE001 - the server out of reach: one line, never a traceback
        _fail(f"the workflow database {database.shown()} cannot be read: {' '.join(str(error).split())}")
    return database


def _with_runs(db: str | None, operation: Callable[[], Coroutine[Any, Any, T]], *, make: bool = False) -> T:
    """Open the workflow database (which must exist, unless the command may ``make`` it), run ``operation``, shut
    down; problems exit with 1."""
    import asyncio
    import uuid

    from tether.errors import TetherError

    database = _database(db, make=make)
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


def _read_runs(db: str | None, status: str | None, limit: int) -> tuple[list[RunRecord], dict[str, WorkerRow]]:
    """The runs of the database ``--db`` names, and the heartbeat rows of their workers, read without the
    engine (``tether.durable.store``, ``tether.durable.liveness``): a listing answers in the time of its
    queries, not of DBOS's import. Problems exit with 1."""
    from tether.durable.liveness import Table
    from tether.durable.store import read_runs
    from tether.errors import TetherError

    database = _database(db)
    try:
        records = read_runs(path=database.path, url=database.url, status=status, limit=limit)  # type: ignore[arg-type]
        table = Table.of(database.path, database.url, read_only=True)
        try:
            workers = {row.worker_id: row for row in table.rows(r.worker for r in records if r.worker)}
        finally:
            table.close()
        return records, workers
    except TetherError as error:
        _fail(error.message)
    except Exception as error:  # noqa: BLE001 - the database out of reach or unreadable: one line, no traceback
        _fail(f"the workflow database {database.shown()} cannot be read: {' '.join(str(error).split())}")


def _heartbeat(worker: str | None, rows: dict[str, WorkerRow]) -> str:
    """How the run's worker stands: ``alive 2s`` (its last heartbeat), ``dead 45s``, ``stopped``,
    ``recovered``, or ``gone`` (it keeps no heartbeat row: an older process, or a plain launch)."""
    if worker is None:
        return "-"
    row = rows.get(worker)
    if row is None:
        return "gone"
    health = row.health()
    return f"{health} {row.age:.0f}s" if health in ("alive", "dead") else health


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
    """List the newest runs: id, status, agent, worker and its heartbeat, created, prompt, stop reason, cost,
    deploy version (only a worker of a run's version takes it). A paused run waits for decisions on its calls
    (tether runs pending).

    HEARTBEAT: alive Ns (its last heartbeat N seconds ago), dead Ns (past its lease, its runs not yet
    recovered), stopped, recovered, or gone (it keeps no heartbeat)."""
    records, workers = _read_runs(db, status, limit)
    if not records:
        click.echo("no runs", err=True)
        return
    rows = [("ID", "STATUS", "AGENT", "WORKER", "HEARTBEAT", "CREATED", "PROMPT", "STOP", "COST", "VERSION")]
    rows += [
        (
            r.run_id,
            r.status,
            r.agent,
            r.worker or "-",
            _heartbeat(r.worker, workers),
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
    """Show the run ID and its steps (each model call and tool call: when, how long, how it ended); once it
    ended, its answer too; while it is paused, the calls it waits on."""
    from tether.durable.store import read_run

    database = _database(db)
    try:
        detail = read_run(run_id, path=database.path, url=database.url)
    except Exception as error:  # noqa: BLE001 - the database unreadable: one line, no traceback
        _fail(f"the workflow database {database.shown()} cannot be read: {' '.join(str(error).split())}")
    if detail is None:
        _fail(f"there is no durable run with id {run_id!r} (`tether runs list` shows the runs)")
    click.echo(_describe(detail.record))
    if detail.record.pending:
        click.echo("")
        click.echo("waits on (tether runs approve ID CALL, tether runs deny ID CALL --reason R):")
        for line in pending_lines([detail.record]):
            click.echo(line)
    click.echo("")
    for line in _steps(detail.steps):
        click.echo(line)
    if detail.result is not None:
        click.echo("")
        click.echo(detail.result.text)


def pending_lines(records: list[RunRecord]) -> list[str]:
    """The calls the paused runs among ``records`` wait on, as a table (none: no line)."""
    import json

    from tether.cli.table import aligned

    rows = [
        (
            record.run_id,
            call.id,
            call.tool,
            call.kind,
            _one_line(call.reason or "-", 40),
            _one_line(json.dumps(call.arguments, ensure_ascii=False), 60),
            _when(record.decide_by),
        )
        for record in records
        for call in record.pending
    ]
    return aligned([("RUN", "CALL", "TOOL", "KIND", "WHY", "ARGUMENTS", "DECIDE BY"), *rows]) if rows else []


def _steps(steps: list[StepRecord]) -> list[str]:
    """The steps of a run as a table: number, name, when it started, how long it took, how it ended. The
    engine's own operations (``DBOS.*``: the cancel check's message read) are its bookkeeping, not shown."""
    steps = [step for step in steps if not step.name.startswith("DBOS.")]
    if not steps:
        return ["steps:       none yet"]
    from tether.cli.table import aligned

    rows = [("#", "STEP", "STARTED", "TOOK", "OUTCOME")]
    rows += [
        (
            str(number),
            _one_line(step.name, 60),
            _when(step.started_at),
            _took(step.duration),
            "ok" if step.error is None else _one_line(f"error: {step.error}", 80),
        )
        for number, step in enumerate(steps, 1)
    ]
    return aligned(rows)


def _took(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


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
    click.echo(cancelled_line(record))


def cancelled_line(record: RunRecord) -> str:
    """What ``runs cancel`` says of the run ``record`` (its record after the cancel)."""
    if record.status == "running":
        return f"{record.run_id}: cancel requested; the run stops before its next model call"
    if record.status == "paused":
        return f"{record.run_id}: cancel requested; the calls it waits on are rejected and the run stops"
    if record.status == "cancelled":
        return f"{record.run_id}: cancelled"
    return f"{record.run_id}: {record.status} already; nothing to cancel"


@runs.command("resume")
@click.argument("run_id", metavar="ID")
@click.option("--queue", metavar="NAME", help="The queue to put it on (default: its own).")
@click.option("--force", is_flag=True, help="Resume a running run even when its process may be alive.")
@_db_option
def resume(run_id: str, queue: str | None, force: bool, db: str | None) -> None:
    """Put the run ID back on its queue (cancelled before it started, or left by a dead worker), for a worker
    serving that queue to run it within the queue's limits.

    A run that ended with a result (a run cancelled while running did) cannot be resumed: exit 1, saying so.
    Nor can a run still running in a live process (or one that keeps no heartbeat): resuming it would run it
    twice. --force when that process is certainly gone."""

    async def go() -> tuple[RunRecord, str | None]:
        from tether.durable import get_run, resume_run
        from tether.errors import ConfigInvalid

        before = await get_run(run_id)
        if before is None:
            raise ConfigInvalid(f"there is no durable run with id {run_id!r}")
        why = not_resumable(before)
        if why is not None:
            return before, why
        await resume_run(run_id, queue=queue, force=force)
        after = await get_run(run_id)
        return (before if after is None else after), None

    record, why = _with_runs(db, go)
    if why is not None:
        _fail(f"{record.run_id} cannot be resumed: {why}")
    click.echo(f"{record.run_id}: {record.status}")


def not_resumable(record: RunRecord) -> str | None:
    """Why the run ``record`` cannot be resumed, or ``None`` when it can."""
    if record.stop_reason is not None:
        return f"it ended with a {record.stop_reason} result ({record.status})"
    if record.status in ("completed", "failed"):
        return f"it ended ({record.status})"
    return None
