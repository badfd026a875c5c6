"""A ``tether batch`` process's identity and liveness: a unique id, a heartbeat, and the runs of its items that
another batch process had under way taken over only once that process is dead.

Why: every batch used to launch under the same id, so a second batch on a shared database recovered (ran
again) the first one's runs while it was healthy. Now each batch process has its own id
(``batch-<host>-<pid>-<hex>``, :func:`tether.durable.liveness.unique_id`) and beats in the workflow database.

Contract: when it starts, a batch looks at the runs of its own items (their ids come from the prompts file and
the item, ``batch_files``) that are still ``running`` under another process. A process that is dead (its
heartbeat past its lease, stopped, gone from this host, or one that keeps no heartbeat: an older tether) is
claimed (:func:`~tether.durable.liveness.claim_dead`: of two batches started at once, one recovers it) and its
runs are put back to run here, from their last finished step. A live one is waited for: its results are
written here as they come, and should it die while this batch waits, this batch's heartbeat claims it then.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.cli.batch_files import BatchItem
    from tether.cli.runs_db import RunsDatabase
    from tether.durable.liveness import Heartbeat, Table

DEAD_AFTER = 30.0
"""A batch process's lease: seconds without its heartbeat after which another batch may take its runs."""


@asynccontextmanager
async def launched(
    database: RunsDatabase, pending: Sequence[BatchItem], say: Callable[[str], None], dead_after: float = DEAD_AFTER
) -> AsyncIterator[str]:
    """Launch the engine under a new batch id (yielded), beat while the batch runs, take over the runs of
    ``pending`` a dead batch left; shut down and mark the batch stopped at the end."""
    from tether.durable import launch, shutdown
    from tether.durable.dbos_launch import _recover_pending
    from tether.durable.liveness import Heartbeat, Table, unique_id

    batch_id = unique_id("batch")
    watched: set[str] = set()
    beat = Heartbeat(
        Table.of(database.path, database.url),
        batch_id,
        kind="batch",
        dead_after=dead_after,
        recover=_recover_pending,
        kinds=("batch",),
        watch=lambda: set(watched),
    )
    await asyncio.to_thread(beat.claim)
    try:
        launch(**database.launch_arguments(), worker_id=batch_id)  # type: ignore[arg-type]
        try:
            beat.start()
            await _take_over(pending, batch_id, beat, watched, say)
            yield batch_id
        finally:
            shutdown()
    finally:
        with ThreadPoolExecutor(1) as thread:  # DBOS, shut down, took the loop's default executor with it
            await asyncio.get_running_loop().run_in_executor(thread, beat.stop)


async def _take_over(
    pending: Sequence[BatchItem], batch_id: str, beat: Heartbeat, watched: set[str], say: Callable[[str], None]
) -> None:
    """Recover here the runs of ``pending`` that dead processes left; watch the live ones' (see the module)."""
    from tether.durable import list_runs

    ids = {item.workflow_id for item in pending}
    running = [r for r in await list_runs("running", limit=max(100, 10 * len(ids))) if r.run_id in ids]
    held: dict[str, int] = {}
    for record in running:
        if record.worker is not None and record.worker != batch_id:
            held[record.worker] = held.get(record.worker, 0) + 1
    if held:
        await asyncio.to_thread(_judge, beat.table, held, beat, watched, say)


def _judge(table: Table, held: dict[str, int], beat: Heartbeat, watched: set[str], say: Callable[[str], None]) -> None:
    from tether.durable.liveness import claim_dead

    rows = {row.worker_id: row for row in table.rows(held)}
    for owner, count in sorted(held.items()):
        row = rows.get(owner)
        if row is not None and row.alive:
            watched.add(owner)
            say(
                f"{count} of these prompts are running in the live batch {owner} (host {row.host}, pid {row.pid}): "
                "their results are written here as they come"
            )
            continue
        gone = row.pid if row is not None and row.gone_here() else None
        if claim_dead(table, owner, beat.worker_id, gone_pid=gone):
            beat.recover_one(owner)
            say(f"{count} of these prompts were left running by {owner}, which is gone: they go on here")
        else:
            watched.add(owner)  # another process claimed it first and recovers its runs
