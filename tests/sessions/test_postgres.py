"""PostgresSessionStore on a real server: saves that write only what changed in one transaction, the schema
and its version, damaged rows named in a SessionInvalid, two processes saving one session, a process killed
in the middle of a save, and connection failures. Rows are inspected with a plain psycopg connection
(``tests/postgres.py``); every test has a schema of its own."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC
from pathlib import Path

import psycopg
import pytest

from tests.postgres import PgSchema, run_sql
from tether.errors import SessionInvalid
from tether.messages import Message
from tether.sessions import PostgresSessionStore, Session
from tether.sessions.base import output_ref
from tether.testing.store_conformance import conversation, session
from tether.usage import Usage

ROOT = Path(__file__).resolve().parents[2]
"""The repository, so that a child process can import ``tests``."""

AUDIT = """
CREATE TABLE {s}.audit (n SERIAL PRIMARY KEY, op TEXT, seq INTEGER);
CREATE FUNCTION {s}.audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO {s}.audit (op, seq) VALUES ('delete', OLD.seq);
        RETURN OLD;
    END IF;
    INSERT INTO {s}.audit (op, seq) VALUES (lower(TG_OP), NEW.seq);
    RETURN NEW;
END $$;
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON {s}.messages FOR EACH ROW EXECUTE FUNCTION {s}.audit_row();
"""


@pytest.fixture
async def store(postgres: PgSchema) -> AsyncIterator[PostgresSessionStore]:
    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as opened:
        yield opened


def sql(pg: PgSchema, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """``query`` with ``{s}`` standing for the test's schema, run on its own connection."""
    return run_sql(query.replace("{s}", f'"{pg.schema}"'), params)


def audit(pg: PgSchema) -> list[tuple[object, ...]]:
    """What was done to message rows since the audit started, and then start again."""
    rows = sql(pg, "SELECT op, seq FROM {s}.audit ORDER BY n")
    sql(pg, "DELETE FROM {s}.audit")
    return rows


async def reload(pg: PgSchema, session_id: str) -> Session:
    """The session as a new store object reads it."""
    async with PostgresSessionStore(pg.url, schema=pg.schema) as fresh:
        return await fresh.load(session_id)


# --- what a save writes -----------------------------------------------------------------------------------


async def test_each_message_is_one_row_in_order_and_text_with_nul_round_trips(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session(title="a NUL \x00 in the title", model="m\x00"))

    rows = sql(postgres, "SELECT seq, role FROM {s}.messages WHERE session_id = 's1' ORDER BY seq")
    assert rows == [(i, m.role) for i, m in enumerate(conversation())]
    assert await reload(postgres, "s1") == session(title="a NUL \x00 in the title", model="m\x00")


async def test_saving_a_longer_session_inserts_only_the_new_rows(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session(messages=conversation()[:2]))
    sql(postgres, AUDIT)

    await store.save(session())

    assert audit(postgres) == [("insert", 2), ("insert", 3), ("insert", 4)]


async def test_a_rewritten_history_replaces_the_rows_from_the_first_change_on(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session())
    sql(postgres, AUDIT)

    await store.save(session(messages=(*conversation()[:4], Message.assistant("another ending"))))

    assert audit(postgres) == [("delete", 4), ("insert", 4)]


async def test_a_save_after_another_writer_compares_the_stored_rows_and_writes_only_the_difference(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session(messages=conversation()[:2]))
    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as other:
        await other.save(session(messages=conversation()[:4]))
    sql(postgres, AUDIT)

    await store.save(session())  # its remembered revision is stale: the stored rows are compared

    assert audit(postgres) == [("insert", 4)]
    assert await reload(postgres, "s1") == session()


async def test_a_row_changed_behind_the_stores_back_is_not_trusted_from_memory(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session(messages=conversation()[:4]))
    sql(
        postgres,
        "UPDATE {s}.messages SET data = replace(data, 'Add 2 and 3', 'Add 2 and 4') "
        "WHERE session_id = 's1' AND seq = 1",
    )
    assert await reload(postgres, "s1") != session(messages=conversation()[:4]), "the row was changed"
    sql(postgres, AUDIT)

    await store.save(session())  # same revision, same count: only the rows' digest tells

    assert await reload(postgres, "s1") == session()
    assert ("delete", 1) in audit(postgres)


async def test_a_session_deleted_and_saved_again_elsewhere_is_not_mistaken_for_the_remembered_one(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session())
    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as other:
        await other.delete("s1")
        await other.save(session(messages=(Message.user("other"), Message.assistant("x"))))

    await store.save(session(messages=(*conversation(), Message.user("more"))))

    assert (await reload(postgres, "s1")).messages == (*conversation(), Message.user("more"))


async def test_a_save_that_fails_midway_changes_nothing(store: PostgresSessionStore, postgres: PgSchema) -> None:
    await store.save(session())
    sql(postgres, "ALTER TABLE {s}.sessions ADD CONSTRAINT no_boom CHECK (title <> convert_to('boom', 'UTF8'))")

    with pytest.raises(psycopg.errors.CheckViolation):  # the session row is written after the messages
        await store.save(session(messages=(*conversation(), Message.user("q")), title="boom"))

    assert await reload(postgres, "s1") == session()
    await store.save(session(messages=(*conversation(), Message.user("q"))))  # and the store goes on
    assert len((await reload(postgres, "s1")).messages) == 6


async def test_delete_leaves_nothing_of_the_session_in_any_table(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    secret = "the launch code is 0451"
    await store.save(session("gone", messages=(Message.user(secret), Message.assistant("noted"))))
    await store.save_output("gone", output_ref(secret * 3), secret * 3)
    await store.save(session("kept"))
    await store.save_output("kept", output_ref("kept output"), "kept output")

    await store.delete("gone")

    for table in ("sessions", "messages", "outputs"):
        rows = sql(postgres, f"SELECT t::text FROM {{s}}.{table} t")
        assert rows
        assert not [row for row in rows if "gone" in str(row) or "launch code" in str(row)]
        assert not [row for row in rows if secret.encode().hex() in str(row)]
    assert await reload(postgres, "kept") == session("kept")


# --- the schema -------------------------------------------------------------------------------------------


async def test_the_first_use_creates_the_schema_with_its_version(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    assert await store.list() == []

    assert sql(postgres, "SELECT version FROM {s}.schema_version") == [(2,)]
    tables = sql(postgres, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (postgres.schema,))
    assert tables == [("exchanges",), ("messages",), ("outputs",), ("schema_version",), ("sessions",)]


async def test_a_schema_of_version_1_gets_the_exchanges_table_and_keeps_its_sessions(postgres: PgSchema) -> None:
    from tests.sessions.test_exchanges import exchange_of

    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as first:
        await first.save(session("kept"))
    sql(postgres, "DROP TABLE {s}.exchanges")  # as version 1 left it
    sql(postgres, "UPDATE {s}.schema_version SET version = 1")

    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as store:
        assert await store.load("kept") == session("kept")
        await store.save_exchanges("kept", [exchange_of("a"), exchange_of("b")])
        assert [e.run_id for e in await store.load_exchanges("kept")] == ["a", "b"]
        await store.delete("kept")
        assert await store.load_exchanges("kept") == []

    assert sql(postgres, "SELECT version FROM {s}.schema_version") == [(2,)]


async def test_stores_opening_a_new_schema_together_create_it_once(postgres: PgSchema) -> None:
    stores = [PostgresSessionStore(postgres.url, schema=postgres.schema) for _ in range(4)]
    try:
        await asyncio.gather(*(s.save(session(f"s{i}")) for i, s in enumerate(stores)))
    finally:
        for opened in stores:
            await opened.aclose()

    assert sql(postgres, "SELECT version FROM {s}.schema_version") == [(2,)]
    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as again:
        assert len(await again.list()) == 4


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        pytest.param("CREATE TABLE {s}.sessions (id TEXT)", "not a tether session schema", id="another-program"),
        pytest.param("UPDATE {s}.schema_version SET version = 3", r"a newer tether \(schema 3", id="newer"),
        pytest.param("INSERT INTO {s}.schema_version VALUES (1)", "should hold one row, found 2", id="two-versions"),
    ],
)
async def test_a_schema_that_is_not_this_tethers_is_refused_and_left_alone(
    postgres: PgSchema, setup: str, problem: str
) -> None:
    if "schema_version" in setup:
        async with PostgresSessionStore(postgres.url, schema=postgres.schema) as first:
            await first.save(session())
    else:
        sql(postgres, "CREATE SCHEMA {s}")
    sql(postgres, setup)
    before = sql(postgres, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (postgres.schema,))

    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as store:
        with pytest.raises(SessionInvalid, match=problem) as raised:
            await store.load("s1")
    assert repr(postgres.schema) in raised.value.message
    assert (
        sql(postgres, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (postgres.schema,)) == before
    )


@pytest.mark.parametrize("schema", ["Tether", "a-b", "x;drop", "", "9x" + "a" * 63])
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(schema: str) -> None:
    with pytest.raises(ValueError, match="schema"):
        PostgresSessionStore("postgresql://127.0.0.1/test", schema=schema)


def test_the_repr_never_shows_the_url() -> None:
    store = PostgresSessionStore("postgresql://me:hunter2@127.0.0.1/test")

    assert "hunter2" not in repr(store)
    assert "hunter2" not in str(store)


# --- damaged rows -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        pytest.param(
            "UPDATE {s}.messages SET data = '{\"role\": ' WHERE seq = 2",
            "messages row seq=2: not valid JSON",
            id="json",
        ),
        pytest.param("UPDATE {s}.messages SET data = '[1, 2]' WHERE seq = 3", "messages row seq=3", id="not-a-message"),
        pytest.param("DELETE FROM {s}.messages WHERE seq = 1", "messages row seq=1 is missing", id="missing-row"),
        pytest.param(
            "UPDATE {s}.sessions SET message_count = 9", "5 message rows stored, but the session row says 9", id="count"
        ),
        pytest.param("UPDATE {s}.messages SET data = '' WHERE seq = 0", "messages row seq=0: empty", id="empty"),
    ],
)
async def test_a_bad_row_raises_session_invalid_naming_the_schema_session_and_row_and_spares_the_others(
    store: PostgresSessionStore, postgres: PgSchema, damage: str, problem: str
) -> None:
    await store.save(session("s1"))
    await store.save(session("other"))
    sql(
        postgres,
        damage.replace("WHERE", "WHERE session_id = 's1' AND") if "WHERE" in damage else damage + " WHERE id = 's1'",
    )

    with pytest.raises(SessionInvalid, match=problem) as raised:
        await reload(postgres, "s1")

    assert f"PostgreSQL schema {postgres.schema!r}: session 's1'" in raised.value.message
    assert await reload(postgres, "other") == session("other")
    assert {s.id for s in await store.list()} == {"s1", "other"}


async def test_a_usage_that_is_not_json_and_a_title_that_is_not_utf8_are_normalised_and_logged(
    store: PostgresSessionStore, postgres: PgSchema, caplog: pytest.LogCaptureFixture
) -> None:
    await store.save(session())
    sql(postgres, "UPDATE {s}.sessions SET usage = 'not json', title = '\\x41ff42'::bytea")

    with caplog.at_level(logging.WARNING, logger="tether.sessions"):
        loaded = await reload(postgres, "s1")
        [summary] = await store.list()

    assert (loaded.usage, loaded.title, summary.title) == (Usage(), "A\ufffdB", "A\ufffdB")
    assert "sessions row 's1': usage" in caplog.text
    assert "title is not UTF-8" in caplog.text
    await store.save(loaded)  # and it saves again
    assert await reload(postgres, "s1") == loaded


async def test_an_altered_output_row_is_session_invalid_naming_the_row(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    ref, kept = output_ref("an output"), output_ref("another")
    await store.save_output("s1", ref, "an output")
    await store.save_output("s1", kept, "another")
    sql(postgres, "UPDATE {s}.outputs SET content = convert_to('altered', 'UTF8') WHERE ref = %s", (ref,))

    with pytest.raises(SessionInvalid, match=f"session 's1', outputs row {ref}: corrupt"):
        await store.load_output("s1", ref)
    sql(postgres, "UPDATE {s}.outputs SET content = '\\xff'::bytea WHERE ref = %s", (ref,))
    with pytest.raises(SessionInvalid, match="not UTF-8"):
        await store.load_output("s1", ref)
    assert await store.load_output("s1", kept) == "another"


# --- processes and connections ----------------------------------------------------------------------------

SAVER = """
import asyncio, sys
from tether.testing.store_conformance import conversation, session
from tether.sessions import PostgresSessionStore

async def main(url, schema, n, rounds):
    async with PostgresSessionStore(url, schema=schema) as store:
        for i in range(rounds):
            await store.save(session(messages=conversation()[:n], title=f"v{{n}}"))
            print(i, flush=True)

asyncio.run(main({url!r}, {schema!r}, {n}, {rounds}))
"""


def saver(pg: PgSchema, n: int, rounds: int) -> subprocess.Popen[bytes]:
    code = SAVER.format(url=pg.url, schema=pg.schema, n=n, rounds=rounds)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


async def test_two_processes_saving_one_session_leave_a_whole_version_at_every_moment(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    await store.save(session(messages=conversation()[:2], title="v2"))
    versions = {n: session(messages=conversation()[:n], title=f"v{n}") for n in (1, 2, 5)}
    children = [saver(postgres, 1, 60), saver(postgres, 5, 60)]
    try:
        while any(child.poll() is None for child in children):
            loaded = await store.load("s1")  # read while they write: never a mix
            assert loaded == versions[len(loaded.messages)]
    finally:
        outcomes = [child.wait(timeout=60) for child in children]
    assert outcomes == [0, 0]
    last = await reload(postgres, "s1")
    assert last in (versions[1], versions[5])


async def test_a_process_killed_in_the_middle_of_a_save_leaves_the_previous_session(
    store: PostgresSessionStore, postgres: PgSchema
) -> None:
    before = session(messages=conversation()[:2], title="v2")
    await store.save(before)
    key = secrets.randbelow(2**31)
    sql(  # an insert into messages waits for a lock the test holds: the child is caught inside its save
        postgres,
        "CREATE FUNCTION {s}.hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" PERFORM pg_advisory_lock(4242, {key}); RETURN NEW; END $$;"
        " CREATE TRIGGER hold AFTER INSERT ON {s}.messages FOR EACH ROW EXECUTE FUNCTION {s}.hold()",
    )
    waiting = "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = 4242 AND objid = %s AND NOT granted"
    async with await psycopg.AsyncConnection.connect(postgres.url, autocommit=True) as holder:
        await holder.execute("SELECT pg_advisory_lock(4242, %s)", (key,))
        child = saver(postgres, 5, 1)
        deadline = time.monotonic() + 30
        while not sql(postgres, waiting, (key,)):
            assert time.monotonic() < deadline, "the child's save never reached its first insert"
            assert child.poll() is None
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        await holder.execute("SELECT pg_advisory_unlock(4242, %s)", (key,))

    sql(postgres, "DROP TRIGGER hold ON {s}.messages")
    assert await reload(postgres, "s1") == before
    assert sql(postgres, "SELECT count(*) FROM {s}.messages") == [(2,)]


async def test_an_unreachable_server_raises_operational_error_with_the_reason() -> None:
    async with PostgresSessionStore("postgresql://postgres@127.0.0.1:1/test", timeout=2) as store:
        with pytest.raises(psycopg.OperationalError, match=r"127\.0\.0\.1"):
            await store.list()
        with pytest.raises(psycopg.OperationalError):  # and again: nothing half-open is kept
            await store.save(session())


async def test_connections_the_server_dropped_are_replaced(store: PostgresSessionStore, postgres: PgSchema) -> None:
    await store.save(session())

    dropped = sql(
        postgres,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (f"tether sessions {postgres.schema}",),
    )

    assert dropped
    assert await store.load("s1") == session()
    await store.save(session(title="after"))
    assert (await reload(postgres, "s1")).title == "after"


async def test_timestamps_load_in_utc_whatever_the_connections_time_zone(postgres: PgSchema) -> None:
    url = f"{postgres.url}?options=-c%20TimeZone%3DAsia/Kolkata"  # the URL's own settings are kept
    async with PostgresSessionStore(url, schema=postgres.schema) as store:
        await store.save(session())
        loaded = await store.load("s1")
        [summary] = await store.list()

    assert loaded == session()
    assert (loaded.created_at.tzinfo, summary.created_at.tzinfo, summary.updated_at.tzinfo) == (UTC, UTC, UTC)
    assert summary.updated_at == session().updated_at


UNCLOSED = """
import asyncio
from tether.sessions import PostgresSessionStore

async def main():
    print(len(await PostgresSessionStore({url!r}, schema={schema!r}).list()))  # never closed

for _ in range(5):
    asyncio.run(main())
"""


def test_a_store_left_open_does_not_keep_its_event_loop_from_ending(postgres: PgSchema) -> None:
    code = UNCLOSED.format(url=postgres.url, schema=postgres.schema)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=60, check=False)

    assert (done.returncode, done.stdout) == (0, b"0\n" * 5), done.stderr.decode()
