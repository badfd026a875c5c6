"""A process for the pausing tests: a worker whose runs pause on calls that need approval, an enqueuer, a collector.

``python pause_worker.py MODE DB_URL BASE_URL LOG ARG [--concurrency N] [--approval-timeout S]``, the agent's model
at ``BASE_URL``, on the queue ``approvals``:

* ``serve``: be the worker ``ARG`` (``--concurrency``: its ``worker_concurrency``; ``--grace``: the seconds it
  gives its runs on SIGTERM, 0 by default; its lease 2 s) until SIGTERM;
* ``enqueue``: enqueue runs ``run-0`` .. ``run-{ARG-1}`` (prompt ``run N``) and exit;
* ``collect``: print, as JSON, each run's stop reason, text and transcript's tool results (call id -> content).

``charge(n, item)`` needs approval (``@tool(approval=True)``): it logs ``charge N ITEM PID`` to ``LOG`` with one
append, so that the lines of concurrent runs never mix and the test counts how often each approved call ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tether import Agent, tool
from tether.durable import DurableAgent, Queue, launch, serve, shutdown

QUEUE = Queue("approvals")


def make_agent(base_url: str, log: Path) -> Agent:
    @tool(approval=True)
    def charge(n: int, item: str) -> str:
        """Charge for item of run n (a person approves it first)."""
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, f"charge {n} {item} {os.getpid()}\n".encode())
        finally:
            os.close(descriptor)
        return f"charged {item}"

    return Agent("openai-compatible:mock", base_url=base_url, api_key="test-key", tools=[charge])


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


async def main(argv: list[str]) -> None:
    mode, db_url, base_url, log, arg = argv[:5]
    timeout = option(argv, "--approval-timeout")
    durable = DurableAgent(
        make_agent(base_url, Path(log)), name="approver", approval_timeout=None if timeout is None else float(timeout)
    )
    if mode == "serve":
        limit = option(argv, "--concurrency")
        queue = Queue(QUEUE.name, worker_concurrency=None if limit is None else int(limit))
        grace = float(option(argv, "--grace") or 0)
        await serve([queue], system_database_url=db_url, worker_id=arg, grace=grace, dead_after=2.0)
        return
    launch(system_database_url=db_url)
    try:
        if mode == "enqueue":
            for n in range(int(arg)):
                await durable.enqueue(f"run {n}", queue=QUEUE, workflow_id=f"run-{n}")
        elif mode == "collect":
            ended = {}
            for n in range(int(arg)):
                result = await durable.result(f"run-{n}")
                results = {r.call_id: r.content for m in result.messages for r in m.tool_results}
                ended[f"run-{n}"] = {"stop": str(result.stop_reason), "text": result.text, "results": results}
            print(json.dumps(ended))
    finally:
        shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
