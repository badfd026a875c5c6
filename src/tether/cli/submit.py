"""``tether runs submit``: a prompt put on a queue of the workflow database, for a ``tether worker`` to run.

Contract:

* The run is enqueued on ``--queue`` (``default``, the queue ``tether worker`` serves by default) of the
  database ``--db`` names (:mod:`tether.cli.runs_db`), and its id is printed on stdout, alone: the run is
  then ``queued`` in ``tether runs list`` until a worker serving that queue takes it.
* The durable agent is the worker's: agent.toml's, named :data:`~tether.cli.worker.AGENT_NAME`, or the one
  ``--agent module:attr`` names. This process only enqueues (it takes no run and runs no model), but a worker
  takes only the runs of the durable agents it has itself (the store stamps each run with them), so the
  agent is made here as the worker makes it; its MCP servers are not started.
* ``--id ID`` names the run: submitting the same id again enqueues nothing and prints the id (a retried
  submission runs once).
* Exit codes: 0 submitted, 1 a configuration or database problem (one line, no traceback), 2 a usage error.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tether.cli import exits
from tether.cli.build import NoModel, close_store, config_problem, load_setup
from tether.cli.runs_db import RunsDatabase, runs_database
from tether.cli.worker import AGENT_NAME, entry_point
from tether.errors import ConfigInvalid, TetherError

if TYPE_CHECKING:
    from tether.durable import DurableAgent, DurableRun, Queue


@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """What ``tether runs submit`` was asked."""

    prompt: str
    queue: str = "default"
    run_id: str | None = None
    agent: str | None = None
    db: str | None = None
    config_file: str | None = None


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(options: SubmitOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run ``tether runs submit`` and return its exit code; the run id goes to stdout."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    try:
        from tether.durable import DurableAgent, Queue

        queue = Queue(options.queue)
        database = runs_database(options.db, cwd, env)
        if options.agent is not None:
            return _submit(entry_point(options.agent, cwd), queue, database, options)
        setup = load_setup(cwd, env, {}, options.config_file)
    except (ConfigInvalid, NoModel) as error:
        _say(config_problem(error))
        return exits.CONFIG
    try:
        durable = DurableAgent(setup.agent(interactive=False, durable=True), name=AGENT_NAME)
        return _submit(durable, queue, database, options)
    except ConfigInvalid as error:
        _say(config_problem(error))
        return exits.CONFIG
    finally:
        asyncio.run(close_store(setup.store))


def _submit(durable: DurableAgent, queue: object, database: RunsDatabase, options: SubmitOptions) -> int:
    """Launch on the database (taking no queue), enqueue, print the run's id, shut down."""
    from tether.durable import Queue, launch, shutdown

    assert isinstance(queue, Queue)
    try:
        launch(**database.launch_arguments(), worker_id=f"submit-{uuid.uuid4().hex[:12]}")  # type: ignore[arg-type]
    except TetherError as error:
        _say(f"error: {error.message}")
        return exits.CONFIG
    except Exception as error:  # noqa: BLE001 - the database out of reach: one line, never a traceback
        _say(f"error: the workflow database {database.shown()} cannot be opened: {' '.join(str(error).split())}")
        return exits.CONFIG
    try:
        run, mine, taken = asyncio.run(_enqueue(durable, queue, options))
    except TetherError as error:
        _say(f"error: {error.message}")
        return exits.CONFIG
    finally:
        shutdown()
    sys.stdout.write(run.run_id + "\n")
    sys.stdout.flush()
    _say(f"queued on {queue.name!r} of {database.shown()}: tether runs show {run.run_id}")
    if taken and mine not in taken:
        _say(
            f"warning: the runs lately taken from {queue.name!r} are of version {', '.join(taken[:3])}, not this "
            f"run's {mine}: it waits for a worker of its agent (this agent differs from the workers')"
        )
    return exits.OK


async def _enqueue(durable: DurableAgent, queue: Queue, options: SubmitOptions) -> tuple[DurableRun, str, list[str]]:
    """The run enqueued, this process's deploy version, and those of the runs lately taken from the queue."""
    from tether.durable import taken_versions, version

    run = await durable.enqueue(options.prompt, queue=queue, workflow_id=options.run_id)
    return run, version(), await taken_versions(queue.name)
