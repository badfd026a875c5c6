"""Durable runs: an agent's run as a workflow that survives the death of the process running it.

``DurableAgent(agent)`` runs ``agent`` as a DBOS workflow: each provider call and each tool call is a step
whose result is kept in a database (a SQLite file on one machine, PostgreSQL across machines). When the
process dies, a process launched on the same database recovers the run and goes on from its last finished
step: a finished tool call is not run again, a finished model call is not made (nor paid for) again. A step
interrupted mid-way runs again (at least once); a tool that must not run twice says so with
``@tool(idempotent=False)`` and an interrupted call of it is answered with an error result instead. The
run id is the workflow id, which the caller may choose, so that submitting a run twice runs it once.

Runs can be put on a :class:`Queue` (``DurableAgent.enqueue``) and taken by worker processes (:func:`serve`)
on one or many machines; :func:`list_runs`, :func:`get_run`, :func:`cancel_run` and :func:`resume_run` read
and change the store of runs from any process.

Importing this package costs nothing; DBOS (about a second to import) is loaded on first use of a name from
it. The engine's code is all in ``dbos_engine.py``, behind the loop's step seam (``tether.loop.steps``).
See docs/durable.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.durable.records import Queue, RateLimit, RunRecord, RunStatus

if TYPE_CHECKING:
    from tether.durable.dbos_engine import (
        DurableAgent,
        DurableRun,
        cancel_run,
        get_run,
        launch,
        list_runs,
        recover_worker,
        resume_run,
        serve,
        shutdown,
        sqlite_url,
    )

__all__ = [
    "DurableAgent",
    "DurableRun",
    "Queue",
    "RateLimit",
    "RunRecord",
    "RunStatus",
    "cancel_run",
    "get_run",
    "launch",
    "list_runs",
    "recover_worker",
    "resume_run",
    "serve",
    "shutdown",
    "sqlite_url",
]
_ENGINE = {name for name in __all__ if name not in {"Queue", "RateLimit", "RunRecord", "RunStatus"}}


def __getattr__(name: str) -> Any:
    if name in _ENGINE:
        from tether.durable import dbos_engine

        return getattr(dbos_engine, name)
    raise AttributeError(f"module 'tether.durable' has no attribute {name!r}")
