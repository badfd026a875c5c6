"""``tether worker``: a process that takes durable runs from a queue and runs them, until SIGTERM or SIGINT.

Contract:

* The agent is the one ``agent.toml`` defines (as ``tether batch`` builds it: tools that change things refused
  unless ``--yes``), or the ``Agent`` or ``DurableAgent`` a Python entry point ``module:attr`` names (the
  module imported with the working directory on ``sys.path``). An ``Agent`` becomes a ``DurableAgent`` named
  :data:`AGENT_NAME`; a process enqueuing runs for this worker uses the same name (``DurableAgent(agent,
  name="agent").enqueue(...)``).
* It serves the queue ``--queue`` (at most ``--concurrency`` of its runs at once in this process, whatever
  other processes declared; the queue's own limits are its configuration, ``tether runs queue``) on the
  database ``--db`` names (:mod:`tether.cli.runs_db`), under ``--worker-id`` (default a unique id): a worker
  started again with the id of one that died recovers the runs it had taken; an id a live worker holds is
  refused (exit 1). It beats in the database while it lives, and recovers the runs of workers silent for
  their ``--dead-after`` (:mod:`tether.durable.liveness`).
* Each run it takes and each it ends is one line on stderr.
* SIGTERM or SIGINT: it stops taking runs, gives those under way ``--grace`` seconds (10 by default), shuts
  down and exits 0; a run still under way then is recovered later, from its last finished step.
* The durable engine's own log records (``tether.durable.engine``) are shown with ``-v`` only.
  Exit codes otherwise: 1 a configuration problem (a bad entry point, a bad ``--db``), 4 the worker failed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tether.cli import exits
from tether.cli.build import NoModel, close_store, config_problem, load_setup, mcp_tools
from tether.cli.runs_db import RunsDatabase, runs_database
from tether.errors import ConfigInvalid, TetherError

if TYPE_CHECKING:
    from tether.durable import DurableAgent, RunRecord

AGENT_NAME = "agent"
"""The durable agent's name when the worker makes it (its workflow is ``tether.run.agent``)."""
WATCH_INTERVAL = 0.5
"""Seconds between two looks at the runs this worker holds, for its log lines."""
STRANDED_INTERVAL = 5.0
"""Seconds between two looks for runs queued by a process of another version (:func:`_warn_stranded`)."""
STORED_TIME_RESOLUTION = 1.0
"""How coarse a stored run's times may be, in seconds: the engine keeps whole seconds on SQLite."""


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What ``tether worker`` was asked."""

    queue: str = "default"
    agent: str | None = None
    db: str | None = None
    concurrency: int = 4
    worker_id: str | None = None
    yes: bool = False
    config_file: str | None = None
    dead_after: float = 30.0
    """Seconds without this worker's heartbeat after which the others take it for dead and recover its runs."""
    grace: float = 10.0
    """Seconds the runs under way get to end after SIGTERM or SIGINT."""
    verbose: int = 0
    """``-v``: tether's log records on stderr, the durable engine's own included (``cli/verbose.py``)."""


def default_worker_id() -> str:
    """``worker-<host>-<pid>-<6 hex>``: unique, so that two workers on one host, or a worker started again,
    never share an id (a restart that took a live sibling's id would run its runs twice). A worker that died
    has its runs recovered by a live one (``--dead-after``); ``--worker-id`` names a stable id instead."""
    from tether.durable.liveness import unique_id

    return unique_id("worker")


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(options: WorkerOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run ``tether worker`` and return its exit code."""
    from tether.durable import Queue

    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    worker_id = options.worker_id or default_worker_id()
    if options.verbose > 0:
        from tether.cli.verbose import configure_logging

        configure_logging(options.verbose)
    try:
        queue = Queue(options.queue, worker_concurrency=options.concurrency)
        database = runs_database(options.db, cwd, env)
        if options.agent is not None:
            return asyncio.run(
                _serve(entry_point(options.agent, cwd), queue, database, worker_id, options.dead_after, options.grace)
            )
        setup = load_setup(cwd, env, {}, options.config_file)
    except (ConfigInvalid, NoModel) as error:
        _say(config_problem(error))
        return exits.CONFIG
    except KeyboardInterrupt:
        return exits.CANCELLED

    async def from_config() -> int:
        from tether.durable import DurableAgent

        async with mcp_tools(setup) as connected:
            durable = DurableAgent(connected.agent(yes=options.yes, interactive=False, durable=True), name=AGENT_NAME)
            try:
                return await _serve(durable, queue, database, worker_id, options.dead_after, options.grace)
            finally:  # DBOS, shut down, took the loop's default executor with it: the store closes on another
                asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
                await close_store(setup.store)

    try:
        return asyncio.run(from_config())
    except ConfigInvalid as error:
        _say(f"error: {error.message}")
        return exits.CONFIG
    except KeyboardInterrupt:
        return exits.CANCELLED


def entry_point(spec: str, cwd: Path) -> DurableAgent:
    """The ``DurableAgent`` of ``module:attr`` (:mod:`tether.cli.python_agent`; an ``Agent`` is wrapped);
    ``ConfigInvalid`` otherwise."""
    from tether.agent import Agent
    from tether.cli.python_agent import python_agent
    from tether.durable import DurableAgent

    value = python_agent(spec, cwd)
    return DurableAgent(value, name=AGENT_NAME) if isinstance(value, Agent) else value


async def _serve(
    durable: DurableAgent,
    queue: object,
    database: RunsDatabase,
    worker_id: str,
    dead_after: float = 30.0,
    grace: float = 10.0,
) -> int:
    """Serve ``queue`` until SIGTERM or SIGINT (caught from the start, even while launching)."""
    import signal

    from tether.durable import Queue, serve

    assert isinstance(queue, Queue)
    _say_liveness()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    serving = asyncio.create_task(
        serve(
            [queue],
            **database.launch_arguments(),  # type: ignore[arg-type]
            worker_id=worker_id,
            stop=stop,
            dead_after=dead_after,
            grace=grace,
        )
    )
    watcher: asyncio.Task[None] | None = None
    stranded: asyncio.Task[None] | None = None
    try:
        if await _until_launched(serving):
            from tether.durable import version

            _say(
                f"worker {worker_id} serving queue {queue.name!r} (agent {durable.name!r}, "
                f"{queue.worker_concurrency} at a time, version {version()}) on {database.shown()}"
            )
            watcher = asyncio.create_task(_watch(worker_id, time.time(), database))
            stranded = asyncio.create_task(_warn_stranded(queue.name))
        await serving
    except TetherError as error:
        _say(f"error: {error.message}")
        return exits.CONFIG if isinstance(error, ConfigInvalid) else exits.ERROR
    finally:
        for task in (watcher, stranded):
            if task is not None:
                task.cancel()
    _say(f"worker {worker_id} stopped")
    return exits.OK


def _say_liveness() -> None:
    """The heartbeat's news (a dead worker's runs recovered here, this worker judged dead) as stderr lines."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    from tether._logging import get_logger

    liveness = get_logger("tether.durable.liveness")
    liveness.addHandler(handler)
    liveness.setLevel(logging.WARNING)


async def _until_launched(serving: asyncio.Task[None]) -> bool:
    """Wait until DBOS is launched in this process (``True``) or ``serving`` ended (``False``)."""
    from tether.durable.dbos_base import _launched

    while not _launched():
        if serving.done():
            return False
        await asyncio.sleep(0.05)
    return True


async def _watch(worker_id: str, since: float, database: RunsDatabase) -> None:
    """Log each run this worker takes and each it ends (those it holds, or that it ended since ``since``).

    Each look reads only this worker's runs that are running or changed since the look before (one indexed
    query, ``tether.durable.store.WorkerRuns``), not the newest runs of the store: an idle worker's looks
    cost next to nothing however many runs the store keeps."""
    from tether.durable.store import WorkerRuns

    reader = WorkerRuns(path=database.path, url=database.url)
    taken: set[str] = set()
    ended: set[str] = set()
    paused: set[str] = set()
    look_from = since - STORED_TIME_RESOLUTION
    try:
        while True:
            started = time.time()
            try:
                records = await asyncio.to_thread(reader.read, worker_id, look_from)
            except Exception:  # noqa: BLE001 - not ready yet (its tables still being made) or going away: try again
                await asyncio.sleep(WATCH_INTERVAL)  # the worker cancels this watch when it stops
                continue
            for record in records:  # oldest first
                if record.status == "queued" or record.run_id in ended:
                    continue
                if record.status != "running" and ended_before(record, since):
                    continue
                if record.run_id not in taken:
                    taken.add(record.run_id)
                    _say(f"took {record.run_id}: {record.prompt_head[:60]!r}")
                if _paused(record, paused):
                    continue
                if record.status != "running":
                    ended.add(record.run_id)
                    _say(_ended(record))
            seen = {record.run_id for record in records}
            taken &= seen  # a run that left the looks is forgotten (taken again, it is reported again)
            ended &= seen
            paused &= seen
            look_from = started - STORED_TIME_RESOLUTION  # a change stamped in the second of this look is seen
            await asyncio.sleep(WATCH_INTERVAL)
    finally:
        reader.close()


async def _warn_stranded(queue: str) -> None:
    """Say once of each run queued on ``queue`` by a process of another deploy version (another agent, another
    tether): this worker never takes it; a worker of its version must (docs/durable.md, "Deploys")."""
    from tether.durable import stranded_runs, version

    warned: set[str] = set()
    while True:
        try:
            found = await stranded_runs([queue])
        except Exception:  # noqa: BLE001 - going away, or the database busy: look again later
            found = []
        for record in found:
            if record.run_id not in warned:
                warned.add(record.run_id)
                _say(
                    f"warning: queued run {record.run_id} is of version {record.version}, not this worker's "
                    f"{version()}: a worker of its version must take it (its agent differs from this one)"
                )
        await asyncio.sleep(STRANDED_INTERVAL)


def ended_before(record: RunRecord, since: float) -> bool:
    """Whether ``record``, not running, certainly ended before ``since`` (when this worker started), so that it
    is no run of this worker's to report. Its time is kept in whole seconds on SQLite: one that ended in the
    second the worker started in (a run taken and finished at once) is this worker's, and must be reported."""
    return (record.updated_at or 0) + STORED_TIME_RESOLUTION <= since


def _paused(record: RunRecord, paused: set[str]) -> bool:
    """Whether ``record`` waits for decisions; says so once per pause (a run under way, not ended)."""
    if record.status != "paused":
        paused.discard(record.run_id)
        return False
    if record.run_id not in paused:
        paused.add(record.run_id)
        calls = ", ".join(f"{call.id} ({call.tool})" for call in record.pending)
        _say(f"paused {record.run_id}: waits for decisions on {calls} (tether runs pending)")
    return True


def _ended(record: RunRecord) -> str:
    cost = "" if record.cost_usd is None else f", ${record.cost_usd:.4f}"
    reason = "" if record.stop_reason is None else f" ({record.stop_reason}{cost})"
    return f"ended {record.run_id}: {record.status}{reason}"
