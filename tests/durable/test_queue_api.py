"""Queues and the run store on a SQLite file, in one process: enqueue, result, listing, cancel and resume.

The process takes runs from the queue ``served`` and from no other; a run enqueued on ``parked`` waits there,
so that it can be cancelled before it starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.helpers import assert_valid
from tether import Agent, StopReason, tool
from tether.durable import Queue, RateLimit
from tether.errors import Cancelled, ConfigInvalid
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, reply

DEADLINE = 60.0
"""Seconds a test waits for a run before it fails."""


def test_a_queue_declaration_is_checked_when_made() -> None:
    assert Queue("q", limit=(5, 2)).limit == RateLimit(5, 2.0)
    bad_declarations: list[Callable[[], object]] = [
        lambda: Queue("has space"),
        lambda: Queue("_internal"),
        lambda: Queue("q", concurrency=0),
        lambda: Queue("q", worker_concurrency=True),
        lambda: Queue("q", concurrency=2, worker_concurrency=3),
        lambda: Queue("q", limit=(0, 1.0)),
        lambda: Queue("q", limit=(1, -1.0)),
        lambda: Queue("q", limit=5),  # type: ignore[arg-type]
    ]
    for bad in bad_declarations:
        with pytest.raises(ConfigInvalid) as raised:
            bad()
        assert raised.value.code == "config_invalid"


def _model() -> ScriptedProvider:
    def answer(request: Request) -> Step:
        last = request.messages[-1]
        if last.role == "user":
            return call("count", {"label": last.text})
        return reply(f"counted {request.messages[-3].text}" if len(request.messages) >= 3 else "counted")

    return ScriptedProvider([answer] * 50)


async def test_enqueue_result_list_cancel_and_resume_on_sqlite(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, cancel_run, get_run, launch, list_runs, resume_run, shutdown

    counted: list[str] = []

    @tool
    def count(label: str) -> str:
        """Count a run."""
        counted.append(label)
        return "ok"

    durable = DurableAgent(Agent(_model(), tools=[count]), name="queued-api")
    served, parked = Queue("served", concurrency=2), Queue("parked")
    launch(tmp_path / "runs.sqlite", queues=[served])
    try:
        runs = [await durable.enqueue(f"prompt {n}", queue=served, workflow_id=f"run-{n}") for n in range(3)]
        results = [await run.result() for run in runs]
        assert [r.text for r in results] == [f"counted prompt {n}" for n in range(3)]
        assert [r.run_id for r in results] == ["run-0", "run-1", "run-2"]
        assert sorted(counted) == ["prompt 0", "prompt 1", "prompt 2"]

        again = await durable.enqueue("prompt 0", queue=served, workflow_id="run-0")  # the same run, not another
        assert (await again.result()).text == "counted prompt 0"
        assert (await durable.result("run-1")).text == "counted prompt 1"
        assert sorted(counted) == ["prompt 0", "prompt 1", "prompt 2"]
        assert await again.status() == "completed"

        record = await get_run("run-2")
        assert record is not None
        assert (record.run_id, record.status, record.agent, record.queue) == (
            "run-2",
            "completed",
            "queued-api",
            "served",
        )
        assert record.prompt_head == "prompt 2"
        assert record.stop_reason == StopReason.COMPLETE
        assert record.created_at is not None
        assert record.updated_at is not None
        assert await get_run("no-such-run") is None

        waiting = await durable.enqueue("x" * 200, queue=parked, workflow_id="waiting")
        assert await waiting.status() == "queued"
        assert [r.run_id for r in await list_runs("queued")] == ["waiting"]
        assert (await list_runs("queued"))[0].prompt_head == "x" * 80
        assert {r.run_id for r in await list_runs("completed")} == {"run-0", "run-1", "run-2"}
        assert len(await list_runs(limit=2)) == 2

        cancelled = await cancel_run("waiting")
        assert cancelled.status == "cancelled"
        with pytest.raises(Cancelled) as raised:
            await waiting.result()
        assert raised.value.code == "cancelled"

        resumed = await resume_run("waiting")  # back on its queue, which this process does not serve
        assert await resumed.status() == "queued"
        assert (await get_run("waiting")) == (await list_runs("queued"))[0]
        assert (await resume_run("run-0")).run_id == "run-0"  # an ended run is left as it is
        assert (await get_run("run-0")).status == "completed"  # type: ignore[union-attr]
    finally:
        shutdown()


async def test_the_run_store_refuses_bad_input_with_config_invalid(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, DurableRun, cancel_run, launch, list_runs, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="queued-bad")
    launch(tmp_path / "runs.sqlite")
    try:
        bad_calls: list[Callable[[], Awaitable[object]]] = [
            lambda: list_runs("done"),  # type: ignore[arg-type]
            lambda: list_runs(limit=0),
            lambda: cancel_run("missing"),
            lambda: DurableRun("missing").result(),
            lambda: DurableRun("missing").status(),
            lambda: durable.enqueue("hi", queue="served"),  # type: ignore[arg-type]
        ]
        for bad in bad_calls:
            with pytest.raises(ConfigInvalid):
                await bad()
    finally:
        shutdown()


async def test_cancelling_a_running_run_ends_it_cancelled_with_a_valid_transcript(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, cancel_run, get_run, launch, list_runs, resume_run, shutdown

    entered, release = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Wait until released."""
        entered.set()
        release.wait(DEADLINE)
        return "held"

    model = ScriptedProvider([call("hold", {}), reply("never said")])
    durable = DurableAgent(Agent(model, tools=[hold]), name="cancelled-api")
    served = Queue("cancel-served")
    launch(tmp_path / "runs.sqlite", queues=[served])
    try:
        run = await durable.enqueue("hold on", queue=served, workflow_id="to-cancel")
        assert await asyncio.to_thread(entered.wait, DEADLINE)
        record = await cancel_run("to-cancel")
        assert record.status == "running"  # it stops before its next model call
        release.set()
        result = await run.result()
        assert result.stop_reason == StopReason.CANCELLED
        assert_valid(result)
        assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
        assert len(model.requests) == 1  # the second model call was not made
        assert (await get_run("to-cancel")).status == "cancelled"  # type: ignore[union-attr]
        assert [r.run_id for r in await list_runs("cancelled")] == ["to-cancel"]
        assert await list_runs("completed") == []
        assert (await (await resume_run("to-cancel")).result()).stop_reason == StopReason.CANCELLED  # ended: kept
        assert len(model.requests) == 1
    finally:
        release.set()
        shutdown()
