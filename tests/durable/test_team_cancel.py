"""Cancelling a durable run (``cancel_run``) while an agent it runs as a tool is at work: the sub-agent reads the
cancel before its next model call, and the run and the sub-run both end ``cancelled``, their transcripts valid."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tether import Agent, SubAgentEvent, tool
from tether.events import RunCompleted, RunEvent
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.testing.runs import assert_valid_transcript


async def test_a_durable_run_cancelled_during_its_sub_agent_ends_cancelled_at_the_sub_agents_next_model_call(
    tmp_path: Path,
) -> None:
    from tether.durable import DurableAgent, cancel_run, launch, shutdown

    reached, release = asyncio.Event(), asyncio.Event()

    @tool
    async def work() -> str:
        """Work until released."""
        reached.set()
        await release.wait()
        return "worked"

    helper_model = ScriptedProvider([call("work", {}), reply("never asked")])
    helper = Agent(helper_model, tools=[work])
    boss = Agent(
        ScriptedProvider([call("helper", {"input": "work"}), reply("never")]), tools=[helper.as_tool(name="helper")]
    )
    durable = DurableAgent(boss, name="team-cancel")
    events: list[RunEvent] = []
    launch(tmp_path / "runs.sqlite")
    try:
        running = asyncio.ensure_future(durable.run("go", workflow_id="team-cancel-run", on_event=events.append))
        await reached.wait()
        await cancel_run("team-cancel-run")
        release.set()
        result = await running
    finally:
        shutdown()
    assert result.stop_reason == "cancelled"
    assert_valid_transcript(result)
    (inner,) = [e.event.result for e in events if type(e) is SubAgentEvent and type(e.event) is RunCompleted]
    assert inner.stop_reason == "cancelled"
    assert_valid_transcript(inner)
    assert len(helper_model.requests) == 1  # its second model call was never made
