"""``tether runs pending``, ``approve``, ``deny`` and ``result``: a person's decisions on the calls paused
durable runs wait on (the ``runs`` group is :mod:`tether.cli.runs_commands`'s; :mod:`tether.cli.runs_admin`
joins its commands too).

Contract: ``pending`` only reads the database (:mod:`tether.durable.store`, without the engine): each paused
run's calls still without a decision, with their arguments and why they wait. ``approve``, ``deny`` and
``result`` send decisions through the engine (:func:`tether.durable.decide`, launched under an executor id of
its own, as ``cancel`` is): the run must be paused and each call one it waits on, undecided, of the right kind
(``approve`` for a call that needs approval, ``result`` for an external call, ``deny`` for either), else
nothing is sent and the command exits 1 saying why. The run goes on, in the worker that holds it, once each of
its calls has a decision. Exit codes: 0 done, 1 refused (no such run, not paused, an unknown or decided call, a
decision of the wrong kind) or a database problem, 2 a usage error. This module imports only click; each
command loads the rest when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tether.cli.runs_admin import runs
from tether.cli.runs_commands import _database, _db_option, _fail, _with_runs, pending_lines

if TYPE_CHECKING:
    from tether.durable import RunRecord, Waiting
    from tether.paused import Decision

__all__ = ["runs"]
"""The ``runs`` group, with every one of its commands joined to it."""

_MOST = 1000
"""Paused runs ``runs pending`` reads at most."""


@runs.command("pending")
@click.argument("run_id", metavar="[ID]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the calls as JSON (one object per call).")
@_db_option
def pending(run_id: str | None, as_json: bool, db: str | None) -> None:
    """List the calls that paused runs wait on (only run ID's when given): run, call id, tool, kind
    (approval or external), why, arguments, and when an undecided call is rejected, if ever.

    Settle one with tether runs approve RUN CALL or tether runs deny RUN CALL --reason R."""
    from tether.durable.store import read_run, read_runs

    database = _database(db)
    try:
        if run_id is None:
            records = read_runs(path=database.path, url=database.url, status="paused", limit=_MOST)
        else:
            detail = read_run(run_id, path=database.path, url=database.url)
            if detail is None:
                _fail(f"there is no durable run with id {run_id!r} (`tether runs list` shows the runs)")
            records = [detail.record]
    except Exception as error:  # noqa: BLE001 - the database unreadable: one line, no traceback
        _fail(f"the workflow database {database.shown()} cannot be read: {' '.join(str(error).split())}")
    if as_json:
        _print_json(records)
        return
    lines = pending_lines(records)
    if not lines:
        click.echo("no paused run" if run_id is None else f"{run_id}: not paused", err=True)
        return
    for line in lines:
        click.echo(line)


def _print_json(records: list[RunRecord]) -> None:
    import msgspec

    for record in records:
        for call in record.pending:
            line = {"run_id": record.run_id, "decide_by": record.decide_by, **msgspec.structs.asdict(call)}
            click.echo(msgspec.json.encode(line).decode())


@runs.command("approve")
@click.argument("run_id", metavar="RUN")
@click.argument("call_ids", metavar="CALL...", nargs=-1, required=True)
@click.option("--digest", metavar="SHA256", help="Approve only if the call's arguments are these (their digest).")
@_db_option
def approve(run_id: str, call_ids: tuple[str, ...], digest: str | None, db: str | None) -> None:
    """Approve calls of the paused run RUN (one CALL id or more): each runs when the run goes on, once each of
    its calls has a decision. tether runs pending lists them."""
    from tether.paused import Approve

    _send(run_id, {call_id: Approve(digest) for call_id in call_ids}, db, "approved")


@runs.command("deny")
@click.argument("run_id", metavar="RUN")
@click.argument("call_ids", metavar="CALL...", nargs=-1, required=True)
@click.option("--reason", "-r", default="", metavar="TEXT", help="Why: the model reads it as the call's result.")
@_db_option
def deny(run_id: str, call_ids: tuple[str, ...], reason: str, db: str | None) -> None:
    """Reject calls of the paused run RUN (one CALL id or more): none of them runs, and the model reads the
    reason as each one's result when the run goes on."""
    from tether.paused import Reject

    _send(run_id, {call_id: Reject(reason) for call_id in call_ids}, db, "rejected")


@runs.command("result")
@click.argument("run_id", metavar="RUN")
@click.argument("call_id", metavar="CALL")
@click.argument("value", metavar="VALUE")
@click.option("--error", "is_error", is_flag=True, help="The call failed: the model reads VALUE as its error.")
@_db_option
def result(run_id: str, call_id: str, value: str, is_error: bool, db: str | None) -> None:
    """Give the external call CALL of the paused run RUN its result: VALUE, read as JSON when it is JSON, else
    as text. The model reads it as the call's result when the run goes on."""
    import json

    from tether.paused import ExternalResult

    try:
        content = json.loads(value)
    except ValueError:
        content = value
    _send(run_id, {call_id: ExternalResult(content, is_error=is_error)}, db, "answered")


def _send(run_id: str, decisions: dict[str, Decision], db: str | None, done: str) -> None:
    """Send ``decisions`` to the run (refusals exit 1, nothing sent) and say what is left to decide."""
    from tether.durable import decide
    from tether.errors import DecisionInvalid

    async def sent() -> Waiting | DecisionInvalid:
        try:
            return await decide(run_id, decisions)
        except DecisionInvalid as refused:
            return refused

    before = _with_runs(db, sent)
    if isinstance(before, DecisionInvalid):
        _fail(f"{before.message} (`tether runs pending {run_id}` lists the calls it waits on)")
    left = [call.id for call in before.undecided if call.id not in decisions]
    named = ", ".join(decisions)
    if left:
        click.echo(f"{run_id}: {named} {done}; the run waits for {len(left)} more: {', '.join(left)}")
    else:
        click.echo(f"{run_id}: {named} {done}; every call is decided: the run goes on")
