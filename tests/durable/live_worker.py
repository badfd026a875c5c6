"""A process for the liveness tests: a worker that may hang in a tool not safe to repeat, an enqueuer, a collector.

``python live_worker.py MODE DB_URL BASE_URL LOG ARG [--hang] [--dead-after S] [--host NAME]``, the agent's model at
``BASE_URL``, on the queue :data:`QUEUE`:

* ``serve``: be the worker ``ARG`` (its lease ``--dead-after`` seconds) until SIGTERM; with ``--hang`` its
  ``charge`` tool logs ``charge N PID`` and then never returns (the test kills the worker there);
* ``enqueue``: enqueue runs ``run-0`` .. ``run-{ARG-1}`` (prompt ``run N``) and exit;
* ``collect``: print, as JSON, each run's text and the worker that ended it.

``charge`` is ``@tool(idempotent=False)``: an interrupted call of it is answered, never run again. Each line of
``LOG`` is written with one append, so that the lines of concurrent runs never mix.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path

from tether import Agent, tool
from tether.durable import DurableAgent, Queue, get_run, launch, liveness, serve, shutdown

QUEUE = Queue("live", worker_concurrency=2)


def make_agent(base_url: str, log: Path, hang: bool) -> Agent:
    @tool(idempotent=False)
    def charge(n: int) -> str:
        """Charge for run n (not safe to repeat)."""
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, f"charge {n} {os.getpid()}\n".encode())
        finally:
            os.close(descriptor)
        if hang:
            threading.Event().wait()  # the test kills the process here
        return "charged"

    return Agent("openai-compatible:mock", base_url=base_url, api_key="test-key", tools=[charge])


async def main(argv: list[str]) -> None:
    mode, db_url, base_url, log, arg = argv[:5]
    dead_after = float(argv[argv.index("--dead-after") + 1]) if "--dead-after" in argv else 30.0
    if "--host" in argv:  # this worker's heartbeat names another machine: only its lease tells it is dead
        host = argv[argv.index("--host") + 1]
        liveness.host_name = lambda: host
    durable = DurableAgent(make_agent(base_url, Path(log), "--hang" in argv), name="live")
    if mode == "serve":
        await serve([QUEUE], system_database_url=db_url, worker_id=arg, grace=0, dead_after=dead_after)
        return
    launch(system_database_url=db_url)
    try:
        if mode == "enqueue":
            for n in range(int(arg)):
                await durable.enqueue(f"run {n}", queue=QUEUE, workflow_id=f"run-{n}")
        elif mode == "collect":
            ended = {}
            for n in range(int(arg)):
                text = (await durable.result(f"run-{n}")).text
                record = await get_run(f"run-{n}")
                ended[f"run-{n}"] = [text, None if record is None else record.worker]
            print(json.dumps(ended))
    finally:
        shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
