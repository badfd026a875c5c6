"""The durable engine's metrics (``tether.durable.metrics``), read with an in-memory metric reader: runs
running, completed, failed and recovered, the depth of each queue, and each step's duration, on SQLite and
PostgreSQL; the recovered count from a real worker killed with SIGKILL and a new one taking its run up."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tether
from tests.durable.metrics_worker import points
from tests.durable.test_recovery import Files, finished, kill, wait_until
from tests.e2e.mock_llm import Call, MockLLM, Say
from tether import Agent, tool
from tether.durable import Queue
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.telemetry import Telemetry

METRICS_WORKER = Path(__file__).with_name("metrics_worker.py")


@tool
def note(text: str) -> str:
    """Note something."""
    return "noted"


def total(found: dict[str, list[list[Any]]], name: str, **attributes: str) -> float:
    """The sum of ``name``'s points whose attributes include ``attributes``."""
    return float(sum(value for point, value in found.get(name, []) if attributes.items() <= point.items()))


def no_deps() -> object:
    raise RuntimeError("the deps cannot be made here")


async def test_runs_and_steps_are_counted_where_they_run(db_url: str) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    reader = InMemoryMetricReader()
    telemetry = Telemetry(meter_provider=MeterProvider(metric_readers=[reader]))
    model = ScriptedProvider([call("note", {"text": "a"}), reply("one"), reply("two")])
    durable = DurableAgent(Agent(model, tools=[note], telemetry=telemetry), name="counted")
    broken = DurableAgent(Agent(ScriptedProvider([reply("never")]), telemetry=telemetry), name="broken", deps=no_deps)
    served, parked = Queue("served"), Queue("parked")
    launch(system_database_url=db_url, queues=[served])
    try:
        for n in (1, 2):
            await (await durable.enqueue(f"prompt {n}", queue=served, workflow_id=f"run-{n}")).result()
        await durable.enqueue("waits", queue=parked, workflow_id="waiting-1")
        await durable.enqueue("waits too", queue=parked, workflow_id="waiting-2")
        with contextlib.suppress(RuntimeError):
            await broken.run("fails", workflow_id="broken-1")
        found = points(reader)
    finally:
        shutdown()

    assert total(found, "tether.durable.runs.completed", **{"tether.agent": "counted"}) == 2
    assert total(found, "tether.durable.runs.completed", **{"tether.stop_reason": "complete"}) == 2
    assert total(found, "tether.durable.runs.failed", **{"tether.agent": "broken"}) == 1
    assert total(found, "tether.durable.runs.running") == 0, "every run that started here ended here"
    assert total(found, "tether.durable.runs.recovered") == 0
    queued = {point["tether.queue"]: value for point, value in found["tether.durable.runs.queued"]}
    assert queued == {"parked": 2, "served": 0}
    # run-1: a model call, the tool call, a model call; run-2: one model call
    assert total(found, "tether.durable.step.duration", **{"tether.step.kind": "model"}) == 3
    assert total(found, "tether.durable.step.duration", **{"tether.step.kind": "tool"}) == 1


def test_no_meter_means_no_metrics_and_no_opentelemetry(tmp_path: Path) -> None:
    script = """
import asyncio, sys
from tether import Agent
from tether.durable import DurableAgent, launch, shutdown
from tether.providers.scripted import ScriptedProvider, reply

durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="plain")
launch(sys.argv[1])
assert asyncio.run(durable.run("hello")).text == "hi"
shutdown()
print("otel loaded" if any(m.startswith("opentelemetry") for m in sys.modules) else "otel not loaded")
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "runs.sqlite")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "otel not loaded"


def metrics_worker(db_url: str, server: MockLLM, files: Files, run_id: str, *, recover: bool = False) -> Any:
    src = str(Path(tether.__file__).resolve().parents[1])
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, root, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(METRICS_WORKER), db_url, server.base_url, str(files.log), str(files.block), run_id]
    argv += [str(files.out), *(["--recover"] if recover else [])]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_a_run_taken_up_after_its_worker_was_killed_is_counted_recovered(db_url: str, tmp_path: Path) -> None:
    files = Files(tmp_path / "killed")
    files.block.touch()
    with MockLLM([Call("append", {"text": "one"}), Call("wait_here", {}), Say("all done")]) as server:
        first = metrics_worker(db_url, server, files, "run-kill")
        wait_until(files.reached.exists, "the tool call started", first)
        kill(first)
        files.block.unlink()
        second = metrics_worker(db_url, server, files, "run-kill", recover=True)
        finished(second)
    found = json.loads(files.out.read_text())
    assert total(found, "tether.durable.runs.recovered", **{"tether.agent": "e2e"}) == 1
    assert total(found, "tether.durable.runs.completed", **{"tether.agent": "e2e"}) == 1
    # here, only the work that was not finished before the kill: the tool call under way and the last model call
    assert total(found, "tether.durable.step.duration", **{"tether.step.kind": "tool"}) == 1
    assert total(found, "tether.durable.step.duration", **{"tether.step.kind": "model"}) == 1


def test_a_meter_leaves_the_workflows_source_and_so_the_deploy_version_as_it_was() -> None:
    import inspect

    from tether.durable import DurableAgent

    telemetry = Telemetry(meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
    measured = DurableAgent(Agent(ScriptedProvider([reply("x")]), telemetry=telemetry), name="with-meter")
    plain = DurableAgent(Agent(ScriptedProvider([reply("x")])), name="without-meter")
    assert measured._workflow is not plain._workflow
    assert inspect.getsource(measured._workflow) == inspect.getsource(plain._workflow)
