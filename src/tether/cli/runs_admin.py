"""``tether runs prune``, ``recover`` and ``queue``: the operator's commands on a workflow database (the
``runs`` group and its shared options are :mod:`tether.cli.runs_commands`'s).

Contract: as :mod:`tether.cli.runs_commands` says: the database ``--db`` names must exist; a command that writes
launches the engine under an executor id of its own and shuts it down before it returns. ``prune`` deletes only
ended runs; ``recover`` refuses a live worker unless ``--force``; ``queue`` shows or changes a queue's global
limits (the one way they change). This module imports only click; each command loads the rest when it runs.
"""

from __future__ import annotations

from typing import Any

import click

from tether.cli.runs_commands import _database, _db_option, _fail, _when, _with_runs, runs

__all__ = ["runs"]
"""The ``runs`` group, with this module's commands joined to it."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> float:
    """Seconds of a duration as the command line writes it: ``90s``, ``30m``, ``12h``, ``7d``, ``2w`` (a bare
    number is seconds); ``ValueError`` otherwise."""
    import re

    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if found is None:
        raise ValueError(f"{text!r} is not a duration: a number and a unit, s, m, h, d or w (7d, 12h, 30m)")
    return float(found[1]) * _UNITS[found[2] or "s"]


def _older_than(context: click.Context, parameter: click.Parameter, value: str) -> float:
    try:
        seconds = duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    if seconds <= 0:
        raise click.BadParameter("the duration must be more than nothing")
    return seconds


@runs.command("prune")
@click.option(
    "--older-than", "older_than", required=True, metavar="DURATION", callback=_older_than,
    help="Delete the runs that ended longer ago than this: 7d, 12h, 30m, 90s.",
)  # fmt: skip
@click.option(
    "--status", "statuses", multiple=True, type=click.Choice(["completed", "failed", "cancelled"]),
    help="Only the ended runs in this status (repeat it for more); all three by default.",
)  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Only list the runs it would delete.")
@_db_option
def prune(older_than: float, statuses: tuple[str, ...], dry_run: bool, db: str | None) -> None:
    """Delete the runs that ended (completed, failed, cancelled) longer ago than --older-than, with their
    inputs, results and steps. A queued or running run is never deleted."""
    import time

    from tether.durable.store import ended_runs

    database = _database(db)
    before = time.time() - older_than
    try:
        chosen = ended_runs(before, path=database.path, url=database.url, statuses=statuses)  # type: ignore[arg-type]
    except Exception as error:  # noqa: BLE001 - the database unreadable: one line, no traceback
        _fail(f"the workflow database {database.shown()} cannot be read: {' '.join(str(error).split())}")
    if dry_run:
        for record in chosen:
            click.echo(f"{record.run_id}\t{record.status}\t{_when(record.updated_at)}")
        click.echo(f"{len(chosen)} runs would be deleted", err=True)
        return
    if not chosen:
        click.echo("0 runs deleted", err=True)
        return

    async def delete() -> list[str]:
        from tether.durable import delete_runs

        return await delete_runs([record.run_id for record in chosen])

    deleted = _with_runs(db, delete)
    for run_id in deleted:
        click.echo(run_id)
    click.echo(f"{len(deleted)} runs deleted", err=True)


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

    queue = _with_runs(db, go, make=concurrency is not None or rate is not None)  # limits set before any worker
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
