"""The engine's (DBOS's) log records go to tether's logger ``tether.durable.engine``, which a host that
configures logging sees, and never to DBOS's own console handler on stderr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tether import Agent
from tether.durable import Queue
from tether.providers.scripted import ScriptedProvider, reply


async def test_an_engine_warning_is_a_record_of_tether_durable_engine(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("x")])), name="logged")
    launch(tmp_path / "runs.sqlite", worker_id="logs")
    try:
        with caplog.at_level(logging.WARNING, logger="tether.durable.engine"):
            await durable.enqueue("p", queue=Queue("one"), workflow_id="same")
            await durable.enqueue("p", queue=Queue("two"), workflow_id="same")  # the engine warns: kept on "one"
    finally:
        shutdown()
    # (pytest also hangs its capture on every logger that does not propagate, the engine's own among them)
    (record,) = [
        r
        for r in caplog.records
        if r.name == "tether.durable.engine" and "Workflow already exists in queue" in r.getMessage()
    ]
    assert record.levelno == logging.WARNING
    assert "Workflow already exists" not in capfd.readouterr().err
    assert not [h for h in logging.getLogger("dbos").handlers if h.name == "__dbos_console_log_handler__"]
