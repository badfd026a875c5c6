"""A durable run that pauses, in one process on a SQLite file: it publishes the calls it waits on, decisions that do
not fit are refused with nothing sent, partial decisions accumulate, a cancel rejects every call, and the run
store (engine and engine-free reader, the command line) shows it ``paused`` with its calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tether
from tether import Agent, tool
from tether.errors import DecisionInvalid
from tether.limits import StopReason
from tether.paused import Approve, ExternalResult, Reject, arguments_digest
from tether.providers.base import Request
from tether.providers.scripted import Responder, ScriptedProvider, Step, call, parallel, reply

WAIT = 60.0


def charging(log: list[str]) -> Agent:
    """A model that asks to charge ``a`` and ``b`` (each needs approval) in one turn, then answers with what it
    read of their results."""

    @tool(approval=True)
    def charge(item: str) -> str:
        """Charge for an item."""
        log.append(item)
        return f"charged {item}"

    def answer(request: Request) -> Step:
        results = [r.content for m in request.messages for r in m.tool_results]
        return reply("; ".join(results))

    script: list[Step | Responder] = [
        parallel(call("charge", {"item": "a"}, id="ca"), call("charge", {"item": "b"}, id="cb")),
        answer,
    ]
    return Agent(ScriptedProvider(script), tools=[charge])


async def until(condition: Callable[[], Any], what: str) -> Any:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not (found := await condition()):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
    return found


def decision_messages(database: Path, run_id: str) -> int:
    """How many decision messages were ever sent to the run (the engine's notifications table)."""
    with sqlite3.connect(database) as lite:
        row = lite.execute(
            "SELECT COUNT(*) FROM notifications WHERE destination_uuid = ? AND topic = 'tether.decisions'", (run_id,)
        ).fetchone()
    return int(row[0])


async def test_decisions_that_do_not_fit_are_refused_and_nothing_is_sent(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, decide, get_run, launch, shutdown, waiting_on

    ran: list[str] = []
    durable = DurableAgent(charging(ran), name="refusals")
    database = tmp_path / "runs.sqlite"
    launch(database)
    try:
        run_id = await durable.start("charge a and b", workflow_id="r1")
        waiting = await until(lambda: waiting_on(run_id), "the run to pause")
        assert [call.id for call in waiting.pending] == ["ca", "cb"]
        record = await get_run(run_id)
        assert record is not None
        assert record.status == "paused"
        assert [call.id for call in record.pending] == ["ca", "cb"]
        refused = {
            "unknown run": ("nope", {"ca": Approve()}),
            "unknown call": (run_id, {"ca": Approve(), "zz": Approve()}),
            "digest": (run_id, {"ca": Approve(digest="0" * 64)}),
            "kind": (run_id, {"ca": ExternalResult("made up")}),
            "not a decision": (run_id, {"ca": "yes"}),
            "none": (run_id, {}),
        }
        for why, (target, decisions) in refused.items():
            with pytest.raises(DecisionInvalid) as raised:
                await decide(target, decisions)  # type: ignore[arg-type]
            assert raised.value.code == "decision_invalid", why
        assert decision_messages(database, run_id) == 0, "nothing was sent for a refused decision"
        assert ran == []

        await durable.decide(run_id, {"ca": Approve(digest=waiting.pending[0].digest)})
        partly = await until(lambda: _decided(waiting_on, run_id, "ca"), "the first decision to be taken")
        assert [call.id for call in partly.undecided] == ["cb"], "the run still waits for cb"
        assert ran == [], "no call runs before every call has a decision"
        with pytest.raises(DecisionInvalid, match="decision already"):
            await decide(run_id, {"ca": Reject("changed my mind")})
        await decide(run_id, {"cb": Reject("not b")})
        result = await durable.result(run_id)
        with pytest.raises(DecisionInvalid, match="not paused"):
            await decide(run_id, {"cb": Approve()})
    finally:
        shutdown()
    assert ran == ["a"], "the approved call ran once, the rejected one never"
    assert result.stop_reason == StopReason.COMPLETE
    assert result.text == "charged a; not b", "the model read the rejection's reason"


async def _decided(waiting_on: Any, run_id: str, call_id: str) -> Any:
    found = await waiting_on(run_id)
    return found if found is not None and call_id in found.decided else None


async def test_a_paused_run_cancelled_rejects_its_calls_and_ends_cancelled(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, cancel_run, get_run, launch, shutdown, waiting_on

    ran: list[str] = []
    durable = DurableAgent(charging(ran), name="cancelled")
    launch(tmp_path / "runs.sqlite")
    try:
        run_id = await durable.start("charge a and b", workflow_id="c1")
        await until(lambda: waiting_on(run_id), "the run to pause")
        await durable.decide(run_id, {"ca": Approve()})
        await until(lambda: _decided(waiting_on, run_id, "ca"), "the approval to be taken")
        await cancel_run(run_id)
        result = await durable.result(run_id)
        record = await get_run(run_id)
    finally:
        shutdown()
    assert ran == [], "a cancelled run runs none of the calls it waited on, approved or not"
    assert result.stop_reason == StopReason.CANCELLED
    answered = {r.call_id: r for m in result.messages for r in m.tool_results}
    assert set(answered) == {"ca", "cb"}, "no call left open"
    assert all(r.is_error for r in answered.values())
    assert record is not None
    assert record.status == "cancelled"
    assert record.pending == ()


async def test_the_approval_timeout_rejects_what_is_undecided_and_the_run_answers(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown, waiting_on

    ran: list[str] = []
    durable = DurableAgent(charging(ran), name="timeout", approval_timeout=0.5)
    launch(tmp_path / "runs.sqlite")
    try:
        run_id = await durable.start("charge a and b", workflow_id="t1")
        waiting = await until(lambda: waiting_on(run_id), "the run to pause")
        assert waiting.deadline is not None
        result = await durable.result(run_id)
    finally:
        shutdown()
    assert ran == []
    assert result.stop_reason == StopReason.COMPLETE
    assert result.text == "no one approved this call in time; no one approved this call in time"


def tether_cli(*args: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(tether.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    argv = [sys.executable, "-m", "tether", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


async def test_the_command_line_lists_approves_and_denies_the_calls_of_a_paused_run(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown, waiting_on
    from tether.durable.store import read_run, read_runs

    ran: list[str] = []
    durable = DurableAgent(charging(ran), name="by-hand")
    database = tmp_path / "runs.sqlite"
    launch(database)
    try:
        run_id = await durable.start("charge a and b", workflow_id="h1")
        await until(lambda: waiting_on(run_id), "the run to pause")
        (record,) = read_runs(path=database, status="paused")
        assert record.run_id == run_id
        assert [c.id for c in record.pending] == ["ca", "cb"]
        detail = read_run(run_id, path=database)
        assert detail is not None
        assert detail.record.status == "paused"

        listed = await asyncio.to_thread(tether_cli, "runs", "pending", "--db", str(database))
        assert listed.returncode == 0, listed.stderr
        lines = [line.split() for line in listed.stdout.splitlines()[1:]]
        assert [(line[0], line[1], line[2], line[3]) for line in lines] == [
            (run_id, "ca", "charge", "approval"),
            (run_id, "cb", "charge", "approval"),
        ]
        as_json = await asyncio.to_thread(tether_cli, "runs", "pending", run_id, "--json", "--db", str(database))
        calls = [json.loads(line) for line in as_json.stdout.splitlines()]
        assert [(c["run_id"], c["id"], c["digest"]) for c in calls] == [
            (run_id, "ca", arguments_digest({"item": "a"})),
            (run_id, "cb", arguments_digest({"item": "b"})),
        ]
        listed = await asyncio.to_thread(tether_cli, "runs", "list", "--status", "paused", "--db", str(database))
        assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [[run_id, "paused"]]
        shown = await asyncio.to_thread(tether_cli, "runs", "show", run_id, "--db", str(database))
        assert "status:      paused" in shown.stdout
        assert "waits on" in shown.stdout

        wrong = await asyncio.to_thread(tether_cli, "runs", "approve", run_id, "zz", "--db", str(database))
        assert wrong.returncode == 1, wrong.stderr
        assert "zz" in wrong.stderr
        approved = await asyncio.to_thread(tether_cli, "runs", "approve", run_id, "ca", "--db", str(database))
        assert approved.returncode == 0, approved.stderr
        assert "waits for 1 more: cb" in approved.stdout
        denied = await asyncio.to_thread(
            tether_cli, "runs", "deny", run_id, "cb", "--reason", "b is sold out", "--db", str(database)
        )
        assert denied.returncode == 0, denied.stderr
        assert "every call is decided" in denied.stdout
        result = await durable.result(run_id)
    finally:
        shutdown()
    assert ran == ["a"]
    assert result.text == "charged a; b is sold out"


async def test_a_paused_run_in_a_session_goes_on_in_it_once_decided(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown, waiting_on
    from tether.sessions import SQLiteSessionStore

    ran: list[str] = []
    plain = charging(ran)
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    durable = DurableAgent(Agent(plain.provider, tools=list(plain.tools), store=store), name="in-session")
    launch(tmp_path / "runs.sqlite")
    try:
        run_id = await durable.start("charge a and b", workflow_id="s1", session="orders")
        await until(lambda: waiting_on(run_id), "the run to pause")
        await durable.decide(run_id, {"ca": Approve(), "cb": Reject("not b")})
        result = await durable.result(run_id)
        saved = await store.load("orders")
    finally:
        shutdown()
    assert ran == ["a"]
    assert result.text == "charged a; not b"
    assert saved is not None
    answered = Counter(r.call_id for m in saved.messages for r in m.tool_results)
    assert answered == Counter({"ca": 1, "cb": 1}), "the session holds the run as it ended, each call answered once"
    assert saved.messages[-1].text == "charged a; not b"


async def test_an_external_call_is_settled_by_the_result_given_on_the_command_line(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, decide, launch, shutdown, waiting_on

    @tool(external=True)
    def lookup(sku: str) -> str:
        """The stock of a SKU, from the warehouse's own system."""
        raise AssertionError("an external tool's body never runs")

    def answer(request: Request) -> Step:
        return reply(" ".join(r.content for m in request.messages for r in m.tool_results))

    script: list[Step | Responder] = [call("lookup", {"sku": "X-1"}, id="cx"), answer]
    durable = DurableAgent(Agent(ScriptedProvider(script), tools=[lookup]), name="external")
    database = tmp_path / "runs.sqlite"
    launch(database)
    try:
        run_id = await durable.start("how many X-1?", workflow_id="x1")
        waiting = await until(lambda: waiting_on(run_id), "the run to pause")
        assert [(c.id, c.kind) for c in waiting.pending] == [("cx", "external")]
        with pytest.raises(DecisionInvalid, match="ExternalResult"):
            await decide(run_id, {"cx": Approve()})
        with pytest.raises(DecisionInvalid, match="digest"):
            await decide(run_id, {"cx": ExternalResult("12 in stock", digest="0" * 64)})
        given = await asyncio.to_thread(
            tether_cli, "runs", "result", run_id, "cx", "12 in stock", "--db", str(database)
        )
        assert given.returncode == 0, given.stderr
        result = await durable.result(run_id)
    finally:
        shutdown()
    assert result.stop_reason == StopReason.COMPLETE
    assert result.text == "12 in stock"


async def test_a_durable_agent_with_guardrails_has_its_resumed_answer_checked(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown, waiting_on
    from tether.team.guardrails import GuardrailResult

    def no_charges(ctx: Any, answer: str) -> GuardrailResult:
        return GuardrailResult.block("withheld") if "charged" in answer else GuardrailResult.passed()

    ran: list[str] = []
    plain = charging(ran)
    guarded = Agent(plain.provider, tools=list(plain.tools), output_guardrails=[no_charges])
    durable = DurableAgent(guarded, name="guarded")
    launch(tmp_path / "runs.sqlite")
    try:
        run_id = await durable.start("charge a and b", workflow_id="g1")
        await until(lambda: waiting_on(run_id), "the run to pause")
        await durable.decide(run_id, {"ca": Approve(), "cb": Approve()})
        result = await durable.result(run_id)
    finally:
        shutdown()
    assert ran == ["a", "b"]
    assert result.stop_reason == StopReason.GUARDRAIL, "the answer after the pause went through the guardrail"


def test_an_approval_timeout_must_be_a_positive_number_of_seconds() -> None:
    from tether.durable import DurableAgent
    from tether.errors import ConfigInvalid
    from tether.limits import Limits

    for wrong in (0, -1, float("nan"), "soon", True):
        with pytest.raises(ConfigInvalid, match="approval_timeout"):
            DurableAgent(charging([]), name="bad-timeout", approval_timeout=wrong)  # type: ignore[arg-type]
    limited = Agent(ScriptedProvider([]), limits=Limits(approval_timeout=90))
    assert DurableAgent(limited, name="agent-timeout").approval_timeout == 90.0, "the agent's limit by default"
    assert DurableAgent(limited, name="no-timeout", approval_timeout=None).approval_timeout is None
