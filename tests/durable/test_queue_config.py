"""A queue's configuration, in one process on SQLite and PostgreSQL: made by its first declaration, changed only
by ``configure_queue``, never by enqueuing or serving; a declaration with other global limits is refused; a
run is resumed only onto a queue, never onto the engine's own."""

from __future__ import annotations

import pytest

from tether import Agent
from tether.durable import Queue, RateLimit
from tether.errors import ConfigInvalid
from tether.providers.scripted import ScriptedProvider, reply


async def test_the_first_declaration_makes_the_configuration_and_only_configure_queue_changes_it(db_url: str) -> None:
    from tether.durable import DurableAgent, configure_queue, launch, queue_configuration, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="configured")
    launch(system_database_url=db_url)
    try:
        assert await queue_configuration("jobs") is None
        await durable.enqueue("a", queue=Queue("jobs", concurrency=2, limit=(30, 60)), workflow_id="a")
        made = Queue("jobs", concurrency=2, limit=RateLimit(30, 60.0))
        assert await queue_configuration("jobs") == made
        await durable.enqueue("b", queue=Queue("jobs", worker_concurrency=1), workflow_id="b")
        assert await queue_configuration("jobs") == made  # enqueuing names no limit: it changes none

        changed = await configure_queue(Queue("jobs", concurrency=5))
        assert changed == Queue("jobs", concurrency=5)  # the limit is gone: the configuration is replaced whole
        assert await queue_configuration("jobs") == changed
        await durable.enqueue("c", queue=Queue("jobs", concurrency=5), workflow_id="c")  # as configured: fine
    finally:
        shutdown()


async def test_a_declaration_naming_other_global_limits_is_refused_and_changes_nothing(db_url: str) -> None:
    from tether.durable import DurableAgent, configure_queue, launch, queue_configuration, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="clashing")
    launch(system_database_url=db_url)
    try:
        await configure_queue(Queue("jobs", concurrency=2))
        for clashing in (Queue("jobs", concurrency=8), Queue("jobs", limit=(5, 1))):
            with pytest.raises(ConfigInvalid) as raised:
                await durable.enqueue("x", queue=clashing)
            assert raised.value.code == "config_invalid"
            assert "queue 'jobs' is declared here with" in raised.value.message
            assert "configure_queue()" in raised.value.message
        assert await queue_configuration("jobs") == Queue("jobs", concurrency=2)
        with pytest.raises(ConfigInvalid):
            await configure_queue("jobs")  # type: ignore[arg-type]
    finally:
        shutdown()
    with pytest.raises(ConfigInvalid) as raised:  # a worker declaring it otherwise does not start...
        launch(system_database_url=db_url, queues=[Queue("jobs", concurrency=3)])
    assert "concurrency 3 (configured: 2)" in raised.value.message
    launch(system_database_url=db_url, queues=[Queue("jobs", worker_concurrency=1)])  # ...and left none behind
    shutdown()


async def test_a_run_with_no_queue_is_resumed_only_onto_one_named(db_url: str) -> None:
    from dbos import DBOS

    from tether.durable import DurableAgent, cancel_run, get_run, launch, resume_run, shutdown

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="requeued")
    launch(system_database_url=db_url)
    try:
        await durable.enqueue("kept", queue=Queue("parked"), workflow_id="kept")
        assert (await cancel_run("kept")).queue == "parked"  # cancelled while queued, its queue kept
        await resume_run("kept")
        assert (await get_run("kept")).queue == "parked"  # type: ignore[union-attr]

        await durable.enqueue("lost", queue=Queue("parked"), workflow_id="lost")
        await DBOS.cancel_workflow_async("lost")  # as an older tether cancelled: the engine forgets the queue
        with pytest.raises(ConfigInvalid) as raised:
            await resume_run("lost")
        assert "has no queue to go back on" in raised.value.message
        assert (await get_run("lost")).status == "cancelled"  # type: ignore[union-attr]
        await resume_run("lost", queue="parked")
        record = await get_run("lost")
        assert record is not None
        assert (record.status, record.queue) == ("queued", "parked")
    finally:
        shutdown()
