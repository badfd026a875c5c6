"""Random interleavings of approvals, rejections, cancellations and worker kills on a paused durable run never leave
a call without its one result, nor a run that reads ``paused`` while a call it waits on has run; each approved call
runs at most once, and exactly once unless the run was cancelled before it ran.

Hypothesis draws the actions (a few examples: each starts real worker processes on a SQLite file). The run's model
asks for ``charge a`` and ``charge b`` (each needs approval) in one turn, then ``charge c``, then answers: it
pauses twice. The test process is a client of the same database (``launch`` under an id of its own): it reads the
run, decides, cancels; a ``restart`` SIGKILLs the worker and starts a new one, which takes the run up.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.durable.test_pausing_workers import WAIT, output_of, process
from tests.e2e.mock_llm import Call, MockLLM, Say, Step

ACTIONS = st.lists(st.sampled_from(["approve", "reject", "cancel", "restart"]), min_size=1, max_size=6)
_examples = itertools.count()


def answer(body: dict[str, Any]) -> Step:
    """``charge a`` and ``charge b`` at once, then ``charge c``, then ``done``."""
    messages = body["messages"]
    n = int(next(m for m in messages if m["role"] == "user")["content"].split()[-1])
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return Call("charge", {"n": n, "item": "a"}, more=(("charge", {"n": n, "item": "b"}),))
    if len(results) == 2:
        return Call("charge", {"n": n, "item": "c"})
    return Say("done")


def ran(log: Path) -> Counter[str]:
    """How many times each item's charge ran."""
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(line.split()[2] for line in lines)


class Driver:
    """One example: a worker process (killed and replaced on ``restart``), the run, and what was decided."""

    def __init__(self, db_url: str, server: MockLLM, log: Path, example: int) -> None:
        self.db_url, self.server, self.log, self.example = db_url, server, log, example
        self.workers = itertools.count()
        self.worker = self.start()
        self.decided: dict[str, str] = {}
        """Item -> ``approve`` or ``reject``, for each call decided here."""
        self.cancelled = False

    def start(self) -> subprocess.Popen[bytes]:
        return process("serve", self.db_url, self.server, self.log, f"w{self.example}-{next(self.workers)}")

    def restart(self) -> None:
        self.worker.send_signal(signal.SIGKILL)
        self.worker.communicate(timeout=WAIT)
        self.worker = self.start()

    async def drive(self, actions: list[str]) -> Any:
        from tether.durable import cancel_run, decide, get_run
        from tether.paused import Approve, Reject

        deadline = time.monotonic() + WAIT
        while True:
            assert time.monotonic() < deadline, "the run did not end"
            record = await get_run("run-0")
            assert record is not None
            if record.status in ("completed", "failed", "cancelled"):
                return record
            if record.status != "paused" or self.cancelled:  # a cancelled run is left to end
                await asyncio.sleep(0.05)
                continue
            done = ran(self.log)
            assert not [c for c in record.pending if done[c.arguments["item"]]], "a call it waits on has run"
            action = actions.pop(0) if actions else "approve"
            if action == "restart":
                self.restart()
            elif action == "cancel":
                await cancel_run("run-0")
                self.cancelled = True
                actions.clear()  # nothing more to decide: the run ends
            else:
                call = record.pending[0]
                decision = Approve() if action == "approve" else Reject(f"no {call.arguments['item']}")
                await decide("run-0", {call.id: decision})
                self.decided[call.arguments["item"]] = action
                await self.taken(call.id)

    async def taken(self, call_id: str) -> None:
        """Wait until the run took the decision on ``call_id`` (it no longer waits on that call)."""
        from tether.durable import get_run

        deadline = time.monotonic() + WAIT
        while True:
            record = await get_run("run-0")
            assert record is not None
            if record.status != "paused" and record.status != "queued":
                return  # it went on with its decisions (or ended)
            if record.status == "paused" and call_id not in [c.id for c in record.pending]:
                return
            assert time.monotonic() < deadline, f"the decision on {call_id} was never taken"
            await asyncio.sleep(0.05)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
@example(actions=["approve", "restart", "reject", "restart"])  # a kill while paused, before and after a decision
@example(actions=["reject", "approve", "cancel"])  # a cancel at the second pause
def test_interleaved_decisions_cancels_and_kills_never_orphan_a_call_nor_run_one_twice(
    actions: list[str], tmp_path: Path
) -> None:
    from tether.durable import DurableRun, launch, shutdown

    example = next(_examples)
    folder = tmp_path / f"example-{example}"
    folder.mkdir()
    db_url, log = f"sqlite:///{folder / 'runs.sqlite'}", folder / "charges.txt"
    with MockLLM([answer] * 40) as server:
        driver = Driver(db_url, server, log, example)
        try:
            output_of(process("enqueue", db_url, server, log, "1"))
            launch(system_database_url=db_url, worker_id=f"client-{example}")
            try:
                asyncio.run(driver.drive(list(actions)))
                result = asyncio.run(DurableRun("run-0").result())
            finally:
                shutdown()
        finally:
            driver.worker.terminate()
            driver.worker.communicate(timeout=WAIT)
    calls = [c.id for m in result.messages for c in m.tool_calls]
    answered = Counter(r.call_id for m in result.messages for r in m.tool_results)
    assert answered == Counter(calls), "every call of the transcript has exactly one result"
    executed = ran(log)
    assert max(executed.values(), default=0) <= 1, f"a call ran twice: {executed}"
    assert set(executed) <= {item for item, how in driver.decided.items() if how == "approve"}, "only approved ran"
    if driver.cancelled:
        assert str(result.stop_reason) == "cancelled"
    else:
        assert str(result.stop_reason) == "complete"
        assert result.text == "done"
        assert set(executed) == {item for item, how in driver.decided.items() if how == "approve"}
        rejected = {r.content for m in result.messages for r in m.tool_results if r.is_error}
        assert rejected == {f"no {item}" for item, how in driver.decided.items() if how == "reject"}
