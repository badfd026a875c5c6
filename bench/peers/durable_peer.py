"""pydantic-ai's DBOS integration on ``bench/durable.py``'s workload; prints its figures as JSON.

Run (in the peers' own environment): python bench/peers/durable_peer.py DATABASE_URL BASE_URL RUNS [--wal]

The same scenario as tether's durable client: ``tools-5`` against ``bench/mock_server.py`` (five turns with one
``add`` call each, then the final answer), one run at a time, each run a DBOS workflow on the same engine (the
``dbos`` package, the same version as tether's) and the same kind of database. pydantic-ai's ``DBOSDurability``
makes each model request a DBOS step; the tool is a DBOS step too (``@DBOS.step()``, as pydantic-ai's
documentation advises for a tool that does I/O), so that a run records the same operations as tether's: one a
model call, one a tool call. ``--wal``: the SQLite file in WAL mode with ``synchronous=NORMAL``, as tether's
``launch()`` opens it (without it: DBOS's default, the rollback journal).

Figures: CPU (user + system of the process, all threads) and wall time of each run, from calling the workflow to
its result, medians over ``RUNS`` runs after one warm-up run; and the answers that did not end as expected.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import time
from typing import Any

MODEL = "tools-5"
PROMPT = "Add the numbers."
EXPECTED_END = "is done."


class NormalSync(sqlite3.Connection):
    """A SQLite connection with ``synchronous=NORMAL`` (as tether's ``launch()`` makes DBOS's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute("PRAGMA synchronous=NORMAL")


async def main(database_url: str, base_url: str, runs: int, wal: bool) -> dict[str, Any]:
    from dbos import DBOS, DBOSConfig
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    config: DBOSConfig = {"name": "peer", "system_database_url": database_url, "log_level": "WARNING"}
    if wal and database_url.startswith("sqlite:///"):
        connection = sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=30)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.close()
        config["db_engine_kwargs"] = {"connect_args": {"factory": NormalSync}}
    DBOS(config=config)

    @DBOS.step()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="x"))
    agent = Agent(model, name="bench", tools=[add], capabilities=[DBOSDurability()])

    @DBOS.workflow()
    async def run(prompt: str) -> str:
        return str((await agent.run(prompt)).output)

    DBOS.launch()
    try:
        texts = [await run(PROMPT)]  # warm-up: imports, connections, caches
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(runs):
            started_cpu, started_wall = time.process_time_ns(), time.perf_counter_ns()
            texts.append(await run(PROMPT))
            cpu.append((time.process_time_ns() - started_cpu) / 1e6)
            wall.append((time.perf_counter_ns() - started_wall) / 1e6)
    finally:
        DBOS.destroy()
    return {
        "cpu_ms_per_run": statistics.median(cpu),
        "wall_ms_per_run": statistics.median(wall),
        "failures": sum(not text.endswith(EXPECTED_END) for text in texts),
    }


if __name__ == "__main__":
    db_url, chat_url, run_count = sys.argv[1:4]
    print(json.dumps(asyncio.run(main(db_url, chat_url, int(run_count), "--wal" in sys.argv[4:]))))
