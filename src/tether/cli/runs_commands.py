"""``tether runs``: submit, list, show, cancel, resume and recover the durable runs of a workflow database, and
show or change a queue's limits (``tether runs queue``).

Contract: every command opens the database ``--db`` names (:mod:`tether.cli.runs_db`; the state directory's
SQLite file by default) under an executor id of its own, so that it never recovers nor disturbs a worker's
runs, and shuts DBOS down before it returns; ``list`` only reads the runs' table (:mod:`tether.durable.store`)
and the workers' heartbeats (:mod:`tether.durable.liveness`), without the engine. Exit codes: 0 success, 1 no
such run, a live worker's run or id, a configuration or database problem, 2 a usage error. This module imports
only click; each command loads the rest when it runs.
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
    from tether.durable.liveness import WorkerRow

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
    """Submit, list, show, cancel, resume and recover durable runs (those of tether batch and tether worker); a
    queue's limits."""


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


def _read_runs(db: str | None, status: str | None, limit: int) -> tuple[list[RunRecord], dict[str, WorkerRow]]:
    """The runs of the database ``--db`` names, and the heartbeat rows of their workers, read without the
    engine (``tether.durable.store``, ``tether.durable.liveness``): a listing answers in the time of its
    queries, not of DBOS's import. Problems exit with 1."""
    import os
    from pathlib import Path

    from tether.cli.runs_db import runs_database
    from tether.durable.liveness import Table
    from tether.durable.store import read_runs
    from tether.errors import TetherError

    try:
        database = runs_database(db, Path.cwd(), os.environ)
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
    """List the newest runs: id, status, agent, worker and its heartbeat, created, prompt, stop reason, cost.

    HEARTBEAT: alive Ns (its last heartbeat N seconds ago), dead Ns (past its lease, its runs not yet
    recovered), stopped, recovered, or gone (it keeps no heartbeat)."""
    records, workers = _read_runs(db, status, limit)
    if not records:
        click.echo("no runs", err=True)
        return
    rows = [("ID", "STATUS", "AGENT", "WORKER", "HEARTBEAT", "CREATED", "PROMPT", "STOP", "COST")]
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
@click.option("--queue", metavar="NAME", help="The queue to put it on (default: its own).")
@click.option("--force", is_flag=True, help="Resume a running run even when its process may be alive.")
@_db_option
def resume(run_id: str, queue: str | None, force: bool, db: str | None) -> None:
    """Put the run ID back on its queue (cancelled before it started, or left by a dead worker), for a worker
    serving that queue to run it within the queue's limits.

    A run still running in a live process (or one that keeps no heartbeat) is refused, exit 1: resuming it
    would run it twice. --force when that process is certainly gone."""

    async def go() -> RunRecord:
        from tether.durable import get_run, resume_run
        from tether.errors import ConfigInvalid

        await resume_run(run_id, queue=queue, force=force)
        record = await get_run(run_id)
        if record is None:
            raise ConfigInvalid(f"there is no durable run with id {run_id!r}")
        return record

    record = _with_runs(db, go)
    click.echo(f"{record.run_id}: {record.status}")


@runs.command("queue")
@click.argument("name", metavar="NAME")
@click.option("--concurrency", metavar="N|none", help="Runs of the queue at once over all workers.")
@click.option("--rate", metavar="RUNS/SECONDS|none", help="Runs started in any window of SECONDS.")
@_db_option
def queue_(name: str, concurrency: str | None, rate: str | None, db: str | None) -> None:
    """Show the queue NAME's limits, or change them (the options given; the others are kept): the one way
    they change, for every worker at its next look at the queue. Each worker's own limit is its --concurrency."""
    from tether.durable.records import Queue, RateLimit
    from tether.errors import ConfigInvalid

    try:
        Queue(name)
        count = None if concurrency in (None, "none") else _number(concurrency, "--concurrency", int)
        window = None
        if rate is not None and rate != "none":
            runs_text, slash, seconds = rate.partition("/")
            if not slash:
                raise ConfigInvalid(f"--rate {rate!r}: give RUNS/SECONDS (60/60 for 60 a minute) or none")
            window = RateLimit(_number(runs_text, "--rate", int), _number(seconds, "--rate", float))
        Queue(name, concurrency=count, limit=window)  # the values checked before the database is opened
    except ConfigInvalid as error:
        _fail(error.message)

    async def go() -> Queue | None:
        from tether.durable import configure_queue, queue_configuration

        stored = await queue_configuration(name)
        if concurrency is None and rate is None:
            return stored
        base = stored if stored is not None else Queue(name)
        return await configure_queue(
            Queue(
                name,
                concurrency=base.concurrency if concurrency is None else count,
                limit=base.limit if rate is None else window,
            )
        )

    queue = _with_runs(db, go)
    if queue is None:
        _fail(f"there is no queue {name!r} (a worker serving it or a run put on it makes it)")
    limit = "none" if queue.limit is None else f"{queue.limit.runs}/{queue.limit.seconds:g}s"
    click.echo(f"{queue.name}: concurrency {queue.concurrency or 'none'}, rate {limit}")


def _number(text: str, option: str, kind: type[int] | type[float]) -> Any:
    from tether.errors import ConfigInvalid

    try:
        return kind(text)
    except ValueError:
        raise ConfigInvalid(f"{option}: {text!r} is not a number (or none)") from None


@runs.command("recover")
@click.argument("worker_id", metavar="[WORKER_ID]", required=False)
@click.option("--force", is_flag=True, help="Recover WORKER_ID even when it may be alive.")
@_db_option
def recover(worker_id: str | None, force: bool, db: str | None) -> None:
    """Put the runs of dead workers back on their queues, for the live workers to finish.

    Without WORKER_ID: every worker past its heartbeat lease (--dead-after) or stopped (live workers do this
    on their own; this is for when none runs). With WORKER_ID: that one; refused, exit 1, while it is alive
    or when it keeps no heartbeat (an older tether): --force when it is certainly gone. Finished steps are
    not run again. One line per worker: its id and the runs put back."""
    for line in _with_runs(db, lambda: _recover_dead(worker_id, force)):
        click.echo(line)


async def _recover_dead(worker_id: str | None, force: bool) -> list[str]:
    import asyncio

    from tether.durable import dbos_launch, recover_worker
    from tether.durable.liveness import Table

    if worker_id is not None:
        return [_recovered(worker_id, await recover_worker(worker_id, force=force))]
    assert dbos_launch._url is not None
    table = Table(dbos_launch._url, read_only=True)
    try:
        rows = await asyncio.to_thread(table.rows)
    finally:
        table.close()
    dead = [row for row in rows if row.kind == "worker" and row.health() in ("dead", "stopped")]
    if not dead:
        return ["no dead worker: nothing to recover"]
    return [_recovered(row.worker_id, await recover_worker(row.worker_id)) for row in dead]


def _recovered(worker_id: str, run_ids: list[str]) -> str:
    return f"{worker_id}: {len(run_ids)} run{'s' if len(run_ids) != 1 else ''} put back" + (
        f" ({', '.join(run_ids)})" if run_ids else ""
    )
