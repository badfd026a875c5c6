"""A worker process for the durable metrics test: ``tests/durable/worker.py``'s agent and run, measured.

``python metrics_worker.py DB_URL BASE_URL LOG BLOCK RUN_ID OUT [--recover]`` runs as ``worker.py`` does,
with the agent's meter an in-memory reader's, and writes the metrics it read at the end to ``OUT`` as JSON:
``{name: [[attributes, value], ...]}`` (a histogram's value is its count of measurements).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.durable.worker import make_agent
from tether.durable import DurableAgent, launch, shutdown
from tether.telemetry import Telemetry


def points(reader: InMemoryMetricReader) -> dict[str, list[list[Any]]]:
    """What ``reader`` holds now, by instrument name."""
    found: dict[str, list[list[Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = (
                        getattr(point, "count", None)
                        if hasattr(point, "bucket_counts")
                        else getattr(point, "value", None)
                    )
                    found.setdefault(metric.name, []).append([dict(point.attributes or {}), value])
    return found


async def main(argv: list[str]) -> dict[str, list[list[Any]]]:
    db_url, base_url, log, block, run_id = argv[:5]
    reader = InMemoryMetricReader()
    agent = make_agent(base_url, Path(log), Path(block))
    agent.telemetry = Telemetry(meter_provider=MeterProvider(metric_readers=[reader]))
    durable = DurableAgent(agent, name="e2e")
    launch(system_database_url=db_url)
    try:
        if "--recover" in argv:
            await durable.result(run_id)
        else:
            await durable.run("Append one, then wait.", workflow_id=run_id)
    finally:
        shutdown()
    return points(reader)


if __name__ == "__main__":
    found = asyncio.run(main(sys.argv[1:]))
    out = sys.argv[6]
    Path(f"{out}.part").write_text(json.dumps(found))
    os.replace(f"{out}.part", out)
