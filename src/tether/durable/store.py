"""The store of durable runs read without the engine: what ``tether runs list`` shows, in the time a query takes.

Why: the engine (DBOS) takes about two seconds to import, and a listing needs none of it: the runs are rows
of the workflow database's ``workflow_status`` table (their inputs and outputs in ``workflow_input`` and
``workflow_output`` when the engine keeps them apart). This module reads those rows with ``sqlite3`` (a
SQLite file) or ``psycopg`` (PostgreSQL, the engine's ``dbos`` schema) and makes the same
:class:`~tether.durable.records.RunRecord` the engine's :func:`~tether.durable.list_runs` makes.

Contract: reading never writes. A SQLite file that does not exist, or a database the engine never opened
(no ``workflow_status`` table), holds no runs; :func:`require_database` tells such a database apart, for a
command that must not mistake a mistyped name for an empty store. :func:`read_run` reads one run with its
result and its steps (the engine's ``operation_outputs`` rows), for ``tether runs show``; :func:`ended_runs`
the runs ``tether runs prune`` may delete. Values the engine serialized are read as it writes them
(``tether_json``: tether's own versioned JSON, :mod:`tether.durable.formats`, what runs are stored in; rows
written before it, ``py_pickle``: base64 of a pickle; ``portable_json``: JSON); a value that cannot be
read leaves its part of the record empty (no prompt, no result) rather than failing the listing. The
tables' layout is the engine's pinned version's (``dbos>=3.4,<3.5``): a change of version re-checks it
(``tests/durable/test_store.py`` compares this reader with the engine on the same database).
"""

from __future__ import annotations

import base64
import binascii
import json
import pickle
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.durable import formats
from tether.durable.records import (
    ENGINE_STATUSES,
    PENDING_EVENT,
    RUN_STATUSES,
    UNDER_WAY,
    WORKFLOW_PREFIX,
    RunRecord,
    RunStatus,
    run_record,
)
from tether.errors import ConfigInvalid, FormatUnsupported

if TYPE_CHECKING:
    from tether.events import RunResult

_COLUMNS = (
    "s.workflow_uuid, s.status, s.name, s.queue_name, s.executor_id, s.created_at, s.updated_at, "
    "COALESCE(i.inputs, s.inputs), COALESCE(o.output, s.output), s.serialization, s.application_version, "
    "e.value, e.serialization"
)


def _runs_joined(schema: str) -> str:
    """The select of a run's row with its input and output (kept apart by the engine when it does) and what it
    waits on when it paused (its ``tether.pending`` event: :class:`~tether.durable.records.Waiting`), in
    ``schema``."""
    return (
        f"SELECT {_COLUMNS} FROM {schema}workflow_status s "
        f"LEFT JOIN {schema}workflow_input i ON i.workflow_uuid = s.workflow_uuid "
        f"LEFT JOIN {schema}workflow_output o ON o.workflow_uuid = s.workflow_uuid "
        f"LEFT JOIN {schema}workflow_events e ON e.workflow_uuid = s.workflow_uuid AND e.key = '{PENDING_EVENT}'"
    )


def _query(schema: str, placeholder: str, statuses: list[str] | None) -> str:
    where = f"s.name LIKE {placeholder}"
    if statuses:
        where += f" AND s.status IN ({', '.join([placeholder] * len(statuses))})"
    return f"{_runs_joined(schema)} WHERE {where} ORDER BY s.created_at DESC LIMIT {placeholder} OFFSET {placeholder}"


def _value(text: str | None, serialization: str | None) -> Any:
    """A value as the engine serialized it; ``None`` when there is none or it cannot be read here."""
    if text is None:
        return None
    try:
        if serialization == formats.NAME:
            return formats.decode(text)
        if serialization == "portable_json":
            return json.loads(text)
        return pickle.loads(base64.b64decode(text))  # the engine's own store, which it unpickles too
    except (ValueError, binascii.Error, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        return None
    except FormatUnsupported:  # a value of a newer format, or damaged: the listing goes on without it
        return None


def _record(row: tuple[Any, ...]) -> RunRecord:
    run_id, status, name, queue, worker, created, updated, inputs, output, serialization, version = row[:11]
    waiting = _value(row[11], row[12]) if status in UNDER_WAY else None
    return run_record(
        run_id=run_id,
        engine_status=status,
        workflow_name=name,
        queue=queue,
        created_ms=created,
        updated_ms=updated,
        inputs=_value(inputs, serialization),
        output=_value(output, serialization),
        worker=worker,
        version=version,
        waiting=waiting,
    )


def _engine_statuses(status: RunStatus | None) -> list[str] | None:
    """The engine's statuses to ask for (a run cancelled while running ended ``SUCCESS``, cancelled)."""
    if status is None:
        return None
    if status not in RUN_STATUSES:
        raise ConfigInvalid(f"no run status {status!r}: one of {sorted(RUN_STATUSES)}")
    if status in ("completed", "cancelled"):
        return ["SUCCESS", "CANCELLED"]
    if status == "paused":  # a run under way that published what it waits on
        return list(UNDER_WAY)
    return [name for name, mine in ENGINE_STATUSES.items() if mine == status]


def read_runs(
    *, path: Path | None = None, url: str | None = None, status: RunStatus | None = None, limit: int = 100
) -> list[RunRecord]:
    """The newest ``limit`` durable runs of the SQLite file ``path`` or the PostgreSQL database ``url``,
    newest first; only those in ``status`` when given (see the module docstring)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigInvalid(f"limit must be a positive integer, not {limit!r}")
    statuses = _engine_statuses(status)
    records: list[RunRecord] = []
    offset = 0
    while len(records) < limit:
        rows = _rows(path, url, statuses, limit, offset)
        records += [r for r in map(_record, rows) if status is None or r.status == status]
        if len(rows) < limit:
            break
        offset += limit
    return records[:limit]


def _rows(
    path: Path | None, url: str | None, statuses: list[str] | None, limit: int, offset: int
) -> list[tuple[Any, ...]]:
    parameters = [WORKFLOW_PREFIX + "%", *(statuses or ()), limit, offset]
    query = _query("dbos.", "%s", statuses) if url is not None else _query("", "?", statuses)
    return _read(path, url, [(query, parameters)])[0]


# --- one database, checked -------------------------------------------------------------------------------------


def require_database(*, path: Path | None = None, url: str | None = None) -> None:
    """Raise ``ConfigInvalid`` unless ``path`` (a SQLite file) or ``url`` (PostgreSQL) is a workflow database
    the engine opened: a mistyped name is an error, never an empty store (nor, for a command that launches the
    engine, a new database made under that name). A server out of reach raises its own error."""
    if url is not None:
        import psycopg

        try:
            with psycopg.connect(_plain(url), connect_timeout=10) as connection:
                row = connection.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()
        except psycopg.OperationalError as error:
            if "does not exist" in str(error):
                raise ConfigInvalid(f"{_database_name(url)}: no such PostgreSQL database") from None
            raise
        if row is None or row[0] is None:
            raise ConfigInvalid(f"{_database_name(url)}: not a workflow database (it has no durable runs' tables)")
        return
    if path is None or not path.is_file():
        raise ConfigInvalid(
            f"{path}: no such workflow database (tether batch, tether worker, tether runs submit and tether runs "
            "queue make one)"
        )
    lite = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        found = lite.execute("SELECT 1 FROM sqlite_master WHERE name = 'workflow_status'").fetchone()
    except sqlite3.DatabaseError as error:
        raise ConfigInvalid(f"{path}: not a SQLite database ({error})") from None
    finally:
        lite.close()
    if found is None:
        raise ConfigInvalid(f"{path}: not a workflow database (it has no durable runs' tables)")


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _database_name(url: str) -> str:
    """The database of ``url`` as it may be printed: its name alone (the URL may hold a password)."""
    return "database " + repr(url.rsplit("/", 1)[-1].split("?", 1)[0])


# --- one run, its result and its steps ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One recorded operation of a run: a model call, a tool call, or one of the engine's own (a message read).
    Times are Unix epoch seconds, ``None`` where the engine did not keep them."""

    number: int
    name: str
    started_at: float | None
    ended_at: float | None
    error: str | None
    """``None`` when the step returned; else the error it raised, one line."""

    @property
    def duration(self) -> float | None:
        """Seconds the step took, when both of its times are kept."""
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, self.ended_at - self.started_at)


@dataclass(frozen=True, slots=True)
class RunDetail:
    """What ``tether runs show`` shows of a run: its record, its result once it ended, its steps in order."""

    record: RunRecord
    result: RunResult[Any] | None
    steps: list[StepRecord]


def read_run(run_id: str, *, path: Path | None = None, url: str | None = None) -> RunDetail | None:
    """The run ``run_id`` of the SQLite file ``path`` or the PostgreSQL database ``url``; ``None`` when there
    is none."""
    from tether.events import RunResult

    schema, mark = ("dbos.", "%s") if url is not None else ("", "?")
    query = f"{_runs_joined(schema)} WHERE s.workflow_uuid = {mark} AND s.name LIKE {mark}"
    steps_query = (
        f"SELECT function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms, error, serialization "
        f"FROM {schema}operation_outputs WHERE workflow_uuid = {mark} ORDER BY function_id"
    )
    rows, step_rows = _read(path, url, [(query, [run_id, WORKFLOW_PREFIX + "%"]), (steps_query, [run_id])])
    if not rows:
        return None
    row = rows[0]
    output = _value(row[8], row[9])
    return RunDetail(
        record=_record(row),
        result=output if isinstance(output, RunResult) else None,
        steps=[_step(one) for one in step_rows],
    )


def _step(row: tuple[Any, ...]) -> StepRecord:
    number, name, started, ended, error, serialization = row
    return StepRecord(
        number=int(number),
        name=str(name),
        started_at=None if started is None else started / 1000,
        ended_at=None if ended is None else ended / 1000,
        error=None if error is None else _error_line(error, serialization),
    )


def _error_line(text: str, serialization: str | None) -> str:
    """A step's kept error as one line: its type and message, or only that there was one."""
    value = _value(text, serialization)
    if isinstance(value, BaseException):
        return " ".join(f"{type(value).__name__}: {value}".split())
    if isinstance(value, dict) and "name" in value:
        return " ".join(f"{value['name']}: {value.get('message', '')}".split())
    return "an error (not readable here)"


def _read(path: Path | None, url: str | None, queries: list[tuple[str, list[Any]]]) -> list[list[tuple[Any, ...]]]:
    """The rows of each query, in one connection; none for a database the engine never opened."""
    if url is not None:
        import psycopg

        with psycopg.connect(_plain(url), connect_timeout=10) as connection:
            try:
                return [connection.execute(q, p).fetchall() for q, p in queries]
            except psycopg.errors.UndefinedTable:
                return [[] for _ in queries]
    if path is None or not path.is_file():
        return [[] for _ in queries]
    lite = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        return [lite.execute(q, p).fetchall() for q, p in queries]
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return [[] for _ in queries]
        raise
    finally:
        lite.close()


# --- the runs prune may delete ----------------------------------------------------------------------------------

ENDED = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""The engine's statuses of a run that ended: prune deletes none other."""


def ended_runs(
    before: float, *, path: Path | None = None, url: str | None = None, statuses: tuple[RunStatus, ...] = ()
) -> list[RunRecord]:
    """The runs that ended (``completed``, ``failed``, ``cancelled``; only those in ``statuses`` when given)
    and were last changed before ``before`` (Unix epoch seconds), oldest first. A queued or running run is
    never among them."""
    schema, mark = ("dbos.", "%s") if url is not None else ("", "?")
    query = (
        f"{_runs_joined(schema)} "
        f"WHERE s.name LIKE {mark} AND s.status IN ({', '.join([mark] * len(ENDED))}) AND s.updated_at < {mark} "
        f"ORDER BY s.updated_at"
    )
    (rows,) = _read(path, url, [(query, [WORKFLOW_PREFIX + "%", *ENDED, int(before * 1000)])])
    records = [_record(row) for row in rows]
    return [r for r in records if r.status not in ("queued", "running") and (not statuses or r.status in statuses)]


def queued_counts(*, path: Path | None = None, url: str | None = None) -> dict[str, int]:
    """How many runs wait on each queue that has any (the engine's own queues left out)."""
    schema, mark = ("dbos.", "%s") if url is not None else ("", "?")
    query = (
        f"SELECT queue_name, COUNT(*) FROM {schema}workflow_status WHERE status = {mark} "
        f"AND queue_name IS NOT NULL GROUP BY queue_name"
    )
    (rows,) = _read(path, url, [(query, ["ENQUEUED"])])
    return {str(name): int(count) for name, count in rows if not str(name).startswith("_")}


class WorkerRuns:
    """The runs of one worker that are running or changed lately, read over one connection kept open: what
    ``tether worker`` looks at twice a second for its log lines. Why: reading the newest runs of every worker
    through the engine cost an idle worker about 20 ms of CPU a second once the store held 200 runs; this
    reads only the few rows that changed, by the index on the worker's id."""

    def __init__(self, *, path: Path | None = None, url: str | None = None) -> None:
        self._url = url
        self._path = path
        self._connection: Any = None
        schema, mark = ("dbos.", "%s") if url is not None else ("", "?")
        self._query = (
            f"{_runs_joined(schema)} "
            f"WHERE s.executor_id = {mark} AND s.name LIKE {mark} AND (s.status = {mark} OR s.updated_at >= {mark}) "
            f"ORDER BY s.created_at"
        )

    def read(self, worker: str, since: float) -> list[RunRecord]:
        """``worker``'s runs that are running, or changed at ``since`` (Unix epoch seconds) or later, oldest
        first; none while the engine has not made its tables yet."""
        parameters = [worker, WORKFLOW_PREFIX + "%", "PENDING", int(since * 1000)]
        try:
            rows = self._open().execute(self._query, parameters).fetchall()
        except Exception as error:
            self.close()  # a connection that failed is not used again
            if "no such table" in str(error) or "does not exist" in str(error):
                return []
            raise
        return [_record(row) for row in rows]

    def _open(self) -> Any:
        if self._connection is None:
            if self._url is not None:
                import psycopg

                self._connection = psycopg.connect(_plain(self._url), autocommit=True, connect_timeout=10)
            else:
                assert self._path is not None
                self._connection = sqlite3.connect(
                    f"{self._path.resolve().as_uri()}?mode=ro", uri=True, timeout=5, check_same_thread=False
                )
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
