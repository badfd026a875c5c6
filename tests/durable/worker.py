"""A worker process for the durable-run tests: one durable run of a small agent, against a model over HTTP.

``python worker.py DB_URL BASE_URL LOG BLOCK RUN_ID OUT [--recover] [--session STORE] [--run-timeout S]`` makes the
agent (tools: ``append``, which adds a line to ``LOG``; ``wait_here``, which writes ``BLOCK.reached`` and then,
while the file ``BLOCK`` exists, never returns; ``pay``, not safe to repeat, which logs a line and then waits
like ``wait_here``), launches tether.durable on ``DB_URL`` and either starts the run ``RUN_ID`` or, with
``--recover``, waits for the run that launching recovered. With ``--session``, the agent keeps sessions in
the SQLite file ``STORE`` and the run continues the session ``s1``. With ``--run-timeout``, the agent's runs
have that deadline (``Limits.run_timeout``, seconds). The result goes to ``OUT`` (pickled),
written whole with a rename so that a reader never sees half of it; its ``turn_usage`` and ``turn_records`` to
``OUT.records``, before it.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
import threading
from pathlib import Path

from tether import Agent, Limits, tool
from tether.durable import DurableAgent, launch, shutdown
from tether.sessions import SQLiteSessionStore


def make_agent(
    base_url: str, log: Path, block: Path, store: Path | None = None, run_timeout: float | None = None
) -> Agent:
    @tool
    def append(text: str) -> str:
        """Append a line to the log."""
        with log.open("a") as file:
            file.write(text + "\n")
        return f"appended {text}"

    @tool
    def wait_here() -> str:
        """Wait until released."""
        Path(f"{block}.reached").write_text("reached")
        if block.exists():
            threading.Event().wait()  # the test kills the process here
        return "released"

    @tool(idempotent=False)
    def pay(amount: int) -> str:
        """Pay an amount (logged, then waits like ``wait_here``): not safe to repeat."""
        with log.open("a") as file:
            file.write(f"paid {amount}\n")
        Path(f"{block}.reached").write_text("reached")
        if block.exists():
            threading.Event().wait()
        return f"paid {amount}"

    tools = [append, wait_here, pay]
    sessions = None if store is None else SQLiteSessionStore(store)
    limits = Limits(run_timeout=run_timeout)
    return Agent(
        "openai-compatible:mock", base_url=base_url, api_key="test-key", tools=tools, store=sessions, limits=limits
    )


RECORDS: list[object] = []
"""The run's ``turn_usage`` and ``turn_records``, once it ended: written beside ``OUT`` (``OUT.records``)."""


async def main(argv: list[str]) -> tuple[object, ...]:
    db_url, base_url, log, block, run_id = argv[:5]
    store = Path(argv[argv.index("--session") + 1]) if "--session" in argv else None
    timeout = float(argv[argv.index("--run-timeout") + 1]) if "--run-timeout" in argv else None
    durable = DurableAgent(make_agent(base_url, Path(log), Path(block), store, timeout), name="e2e")
    launch(system_database_url=db_url)
    try:
        if "--recover" in argv:
            result = await durable.result(run_id)
        else:
            session = None if store is None else "s1"
            result = await durable.run("Append one, then wait.", workflow_id=run_id, session=session)
    finally:
        shutdown()
    RECORDS[:] = [result.turn_usage, result.turn_records]
    return (result.text, result.stop_reason, result.messages, result.usage, result.run_id)


if __name__ == "__main__":
    kept = asyncio.run(main(sys.argv[1:]))
    out = sys.argv[6]
    Path(f"{out}.part").write_bytes(pickle.dumps(kept))
    Path(f"{out}.records").write_bytes(pickle.dumps(tuple(RECORDS)))
    os.replace(f"{out}.part", out)
