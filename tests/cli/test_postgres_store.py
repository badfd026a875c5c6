"""`tether run` with ``[session] store = "postgres"``: a session continued across two processes, on a real
server, in a schema of the test's own."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_run_command import tether
from tests.postgres import PgSchema
from tether.messages import Message
from tether.sessions import PostgresSessionStore


async def test_two_runs_with_one_session_id_continue_one_conversation_on_postgres(
    tmp_path: Path, postgres: PgSchema
) -> None:
    (tmp_path / "agent.toml").write_text(
        f'[session]\nstore = "postgres"\nurl = "{postgres.url}"\ndb_schema = "{postgres.schema}"\n'
    )

    first = tether(tmp_path, "run", "--model", "scripted:echo", "--session", "pg-1", "first question")
    second = tether(tmp_path, "run", "--model", "scripted:echo", "--session", "pg-1", "second question")
    listed = tether(tmp_path, "sessions", "list")

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert second.stdout == "second question\n"
    assert "pg-1" in listed.stdout
    assert "first question" in listed.stdout  # the title, from the session's first prompt
    assert not (tmp_path / "data" / "tether").exists(), "nothing was kept in local files"
    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as store:
        stored = await store.load("pg-1")
    assert [m for m in stored.messages if m.role != "system"] == [
        Message.user("first question"),
        Message.assistant("first question"),
        Message.user("second question"),
        Message.assistant("second question"),
    ]
    assert stored.usage.requests == 2


def test_a_server_out_of_reach_is_one_line_naming_it_never_a_traceback_or_the_password(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(
        '[session]\nstore = "postgres"\nurl = "postgresql://agent:hunter2@127.0.0.1:1/agents"\n'
    )

    ran = tether(tmp_path, "run", "--model", "scripted:echo", "--session", "pg-1", "hello")
    listed = tether(tmp_path, "sessions", "list")

    assert (ran.returncode, listed.returncode) == (4, 1)
    for completed in (ran, listed):
        assert "error: the session store failed: connection failed" in completed.stderr
        assert 'server at "127.0.0.1", port 1 failed' in completed.stderr
        assert "Traceback" not in completed.stderr
        assert "hunter2" not in completed.stderr
