"""A process for the queue tests: enqueues runs, serves the queue, recovers a dead worker or collects results.

``python queue_worker.py MODE DB_URL BASE_URL LOG ARG``, the agent's model at ``BASE_URL``, on the queue
:data:`QUEUE`:

* ``enqueue``: enqueue runs ``run-0`` .. ``run-{ARG-1}`` (prompt ``run N``) and exit;
* ``serve``: be the worker ``ARG`` until SIGTERM; with ``--block-from K`` its ``finish`` tool, for a run
  numbered K or more, logs ``blocked`` and never returns (the test kills the worker there);
* ``recover``: put the runs of the dead worker ``ARG`` back on the queue and exit;
* ``collect``: print, as JSON, the text of the results of runs ``run-0`` .. ``run-{ARG-1}``.

The tools log to ``LOG``, one line per event, ``start N PID`` (``begin``), ``blocked N PID`` and ``end N PID``
(``finish``), each written with one append so that the lines of concurrent runs never mix.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path

from tether import Agent, tool
from tether.durable import DurableAgent, Queue, launch, recover_worker, serve, shutdown

QUEUE = Queue("shared", concurrency=4, worker_concurrency=3)


def make_agent(base_url: str, log: Path, block_from: int | None) -> Agent:
    def write(line: str) -> None:
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, f"{line} {os.getpid()}\n".encode())
        finally:
            os.close(descriptor)

    @tool
    def begin(n: int) -> str:
        """Begin run n."""
        write(f"start {n}")
        return "begun"

    @tool
    def finish(n: int) -> str:
        """Finish run n."""
        if block_from is not None and n >= block_from:
            write(f"blocked {n}")
            threading.Event().wait()  # the test kills the process here
        write(f"end {n}")
        return "finished"

    return Agent("openai-compatible:mock", base_url=base_url, api_key="test-key", tools=[begin, finish])


async def main(argv: list[str]) -> None:
    mode, db_url, base_url, log, arg = argv[:5]
    block_from = int(argv[argv.index("--block-from") + 1]) if "--block-from" in argv else None
    durable = DurableAgent(make_agent(base_url, Path(log), block_from), name="queued")
    if mode == "serve":
        await serve([QUEUE], system_database_url=db_url, worker_id=arg, grace=0)
        return
    launch(system_database_url=db_url)
    try:
        if mode == "enqueue":
            for n in range(int(arg)):
                await durable.enqueue(f"run {n}", queue=QUEUE, workflow_id=f"run-{n}")
        elif mode == "recover":
            print(json.dumps(await recover_worker(arg)))
        elif mode == "collect":
            texts = {f"run-{n}": (await durable.result(f"run-{n}")).text for n in range(int(arg))}
            print(json.dumps(texts))
    finally:
        shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
