"""The store of durable runs read without the engine: what ``tether runs list`` shows, in the time a query takes.

Why: the engine (DBOS) takes about two seconds to import, and a listing needs none of it: the runs are rows
of the workflow database's ``workflow_status`` table (their inputs and outputs in ``workflow_input`` and
``workflow_output`` when the engine keeps them apart). This module reads those rows with ``sqlite3`` (a
SQLite file) or ``psycopg`` (PostgreSQL, the engine's ``dbos`` schema) and makes the same
:class:`~tether.durable.records.RunRecord` the engine's :func:`~tether.durable.list_runs` makes.

Contract: reading never writes. A SQLite file that does not exist, or a database the engine never opened
(no ``workflow_status`` table), holds no runs. Values the engine serialized are read as it writes them
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
from pathlib import Path
from typing import Any

from tether.durable import formats
from tether.durable.records import ENGINE_STATUSES, WORKFLOW_PREFIX, RunRecord, RunStatus, run_record
from tether.errors import ConfigInvalid, FormatUnsupported

_COLUMNS = (
    "s.workflow_uuid, s.status, s.name, s.queue_name, s.executor_id, s.created_at, s.updated_at, "
    "COALESCE(i.inputs, s.inputs), COALESCE(o.output, s.output), s.serialization, s.application_version"
)


def _query(schema: str, placeholder: str, statuses: list[str] | None) -> str:
    where = f"s.name LIKE {placeholder}"
    if statuses:
        where += f" AND s.status IN ({', '.join([placeholder] * len(statuses))})"
    return (
        f"SELECT {_COLUMNS} FROM {schema}workflow_status s "
        f"LEFT JOIN {schema}workflow_input i ON i.workflow_uuid = s.workflow_uuid "
        f"LEFT JOIN {schema}workflow_output o ON o.workflow_uuid = s.workflow_uuid "
        f"WHERE {where} ORDER BY s.created_at DESC LIMIT {placeholder} OFFSET {placeholder}"
    )


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
    run_id, status, name, queue, worker, created, updated, inputs, output, serialization, version = row
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
    )


def _engine_statuses(status: RunStatus | None) -> list[str] | None:
    """The engine's statuses to ask for (a run cancelled while running ended ``SUCCESS``, cancelled)."""
    if status is None:
        return None
    if status not in ENGINE_STATUSES.values():
        raise ConfigInvalid(f"no run status {status!r}: one of {sorted(set(ENGINE_STATUSES.values()))}")
    if status in ("completed", "cancelled"):
        return ["SUCCESS", "CANCELLED"]
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
    if url is not None:
        return _postgres_rows(url, _query("dbos.", "%s", statuses), parameters)
    if path is None or not path.is_file():
        return []
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        return connection.execute(_query("", "?", statuses), parameters).fetchall()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return []  # a database the engine never opened
        raise
    finally:
        connection.close()


def _postgres_rows(url: str, query: str, parameters: list[Any]) -> list[tuple[Any, ...]]:
    import psycopg  # the durable extra's; only a PostgreSQL store needs it

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), connect_timeout=10) as connection:
        try:
            return connection.execute(query, parameters).fetchall()
        except psycopg.errors.UndefinedTable:
            return []
