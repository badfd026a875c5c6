"""Durable runs: an agent's run as a workflow that survives the death of the process running it.

``DurableAgent(agent)`` runs ``agent`` as a DBOS workflow: each provider call and each tool call is a step
whose result is kept in a database (a SQLite file on one machine, PostgreSQL across machines). When the
process dies, a process launched on the same database recovers the run and goes on from its last finished
step: a finished tool call is not run again, a finished model call is not made (nor paid for) again. A step
interrupted mid-way runs again (at least once); a tool that must not run twice says so with
``@tool(idempotent=False)`` and an interrupted call of it is answered with an error result instead. The
run id is the workflow id, which the caller may choose, so that submitting a run twice runs it once.

Runs can be put on a :class:`Queue` (``DurableAgent.enqueue``) and taken by worker processes (:func:`serve`)
on one or many machines, each within its own ``worker_concurrency``; a queue's global limits are its stored
configuration, changed only with :func:`configure_queue`. :func:`list_runs`, :func:`get_run`,
:func:`cancel_run`, :func:`resume_run` and :func:`delete_runs` read and change the store of runs from any
process. A run that pauses for a person (a call that needs approval, or an external one) waits in the database,
holding no worker, until :func:`decide` (``DurableAgent.decide``) settles its calls (``dbos_pausing``).

Importing this package costs nothing; DBOS (about a second to import) is loaded on first use of a name from
it. The engine's code is in the ``dbos_*.py`` modules (the only ones that import DBOS), behind the loop's step
seam (``tether.loop.steps``): ``dbos_engine`` the workflow of an agent, ``dbos_steps`` its steps,
``dbos_launch`` the database and workers, ``dbos_queues`` the queues' configuration and limits, ``dbos_runs``
run handles and the run store. See docs/durable.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.durable.records import Queue, RateLimit, RunRecord, RunStatus, Waiting

if TYPE_CHECKING:
    from tether.durable.dbos_engine import DurableAgent
    from tether.durable.dbos_launch import launch, recover_worker, serve, shutdown, sqlite_url, version
    from tether.durable.dbos_pausing import decide, waiting_on
    from tether.durable.dbos_queues import configure_queue, queue_configuration
    from tether.durable.dbos_runs import (
        DurableRun,
        cancel_run,
        delete_runs,
        get_run,
        list_runs,
        resume_run,
        stranded_runs,
        taken_versions,
    )

__all__ = [
    "DurableAgent",
    "DurableRun",
    "Queue",
    "RateLimit",
    "RunRecord",
    "RunStatus",
    "Waiting",
    "cancel_run",
    "configure_queue",
    "decide",
    "delete_runs",
    "get_run",
    "launch",
    "list_runs",
    "queue_configuration",
    "recover_worker",
    "resume_run",
    "serve",
    "shutdown",
    "sqlite_url",
    "stranded_runs",
    "taken_versions",
    "version",
    "waiting_on",
]
_ENGINE = {
    "DurableAgent": "dbos_engine",
    **dict.fromkeys(("launch", "recover_worker", "serve", "shutdown", "sqlite_url", "version"), "dbos_launch"),
    **dict.fromkeys(("configure_queue", "queue_configuration"), "dbos_queues"),
    **dict.fromkeys(("decide", "waiting_on"), "dbos_pausing"),
    **dict.fromkeys(
        (
            "DurableRun",
            "cancel_run",
            "delete_runs",
            "get_run",
            "list_runs",
            "resume_run",
            "stranded_runs",
            "taken_versions",
        ),
        "dbos_runs",
    ),
}
"""The module of each name DBOS is imported for."""


def __getattr__(name: str) -> Any:
    module = _ENGINE.get(name)
    if module is not None:
        from importlib import import_module

        return getattr(import_module(f"tether.durable.{module}"), name)
    raise AttributeError(f"module 'tether.durable' has no attribute {name!r}")
