"""tether.durable's surface: loaded only when used, and bad input answered with ``config_invalid``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tether import Agent
from tether.errors import ConfigInvalid
from tether.providers.scripted import ScriptedProvider, reply


def test_importing_tether_durable_and_the_loop_loads_no_dbos() -> None:
    code = "import sys, tether.durable, tether.agent, tether.loop.engine; "
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] in {'dbos', 'sqlalchemy', 'psycopg'}))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "[]"


def test_a_durable_agent_name_must_be_a_plain_name() -> None:
    from tether.durable import DurableAgent

    with pytest.raises(ConfigInvalid, match="durable agent name"):
        DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="no spaces here")


async def test_a_run_before_launch_says_to_launch_first() -> None:
    from tether.durable import DurableAgent

    durable = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="not-launched")
    with pytest.raises(ConfigInvalid, match=r"launch\(") as raised:
        await durable.run("hello")
    assert raised.value.code == "config_invalid"


def test_launch_refuses_a_file_and_a_url_together_and_a_url_of_another_kind(tmp_path: Path) -> None:
    from tether.durable import launch

    with pytest.raises(ConfigInvalid, match="not both"):
        launch(tmp_path / "runs.sqlite", system_database_url="postgresql://127.0.0.1/x")
    with pytest.raises(ConfigInvalid, match="postgresql://"):
        launch(system_database_url="mysql://127.0.0.1/x")


def test_sqlite_url_is_absolute(tmp_path: Path) -> None:
    from tether.durable import sqlite_url

    assert sqlite_url(tmp_path / "runs.sqlite") == f"sqlite:///{tmp_path.resolve() / 'runs.sqlite'}"


async def test_a_durable_run_in_a_session_needs_a_store_and_no_history(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, Queue, launch, shutdown
    from tether.messages import Message
    from tether.sessions import SQLiteSessionStore

    bare = DurableAgent(Agent(ScriptedProvider([reply("hi")])), name="session-bare")
    stored = DurableAgent(Agent(ScriptedProvider([reply("hi")]), store=SQLiteSessionStore(tmp_path / "s.db")), name="s")
    launch(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ConfigInvalid, match="session store"):
            await bare.run("hello", session="s1")
        with pytest.raises(ConfigInvalid, match="not both"):
            await stored.enqueue("hello", queue=Queue("q"), session="s1", history=[Message.user("earlier")])
    finally:
        shutdown()
