"""A worker process for the durable-run test of an agent run as a tool: ``worker.py``'s agent is the helper of a
boss agent (``helper``, its tool), against the same model over HTTP; one durable run of the boss.

``python team_worker.py DB_URL BASE_URL LOG BLOCK RUN_ID OUT [--recover]``, as ``worker.py`` takes them.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
from pathlib import Path

from worker import make_agent  # type: ignore[import-not-found]  # run as a script, beside it

from tether import Agent
from tether.durable import DurableAgent, launch, shutdown


async def main(argv: list[str]) -> tuple[object, ...]:
    db_url, base_url, log, block, run_id = argv[:5]
    helper = make_agent(base_url, Path(log), Path(block))
    boss = Agent("openai-compatible:mock", base_url=base_url, api_key="test-key", tools=[helper.as_tool(name="helper")])
    durable = DurableAgent(boss, name="team")
    launch(system_database_url=db_url)
    try:
        if "--recover" in argv:
            result = await durable.result(run_id)
        else:
            result = await durable.run("Ask the helper.", workflow_id=run_id)
    finally:
        shutdown()
    return (result.text, result.stop_reason, result.messages, result.usage, result.run_id, result.turn_records)


if __name__ == "__main__":
    kept = asyncio.run(main(sys.argv[1:]))
    out = sys.argv[6]
    Path(f"{out}.part").write_bytes(pickle.dumps(kept))
    os.replace(f"{out}.part", out)
