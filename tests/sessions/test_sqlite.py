"""SQLiteSessionStore: WAL, saves that write only what changed in one transaction, and damaged databases or
rows named in a SessionInvalid. Rows are inspected with a second, plain sqlite3 connection."""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tether.errors import SessionInvalid
from tether.messages import Message
from tether.sessions import Session, SQLiteSessionStore
from tether.testing.store_conformance import conversation, session
from tether.usage import Usage

ROOT = Path(__file__).resolve().parents[2]
"""The repository, so that a child process can import ``tests``."""

AUDIT = """
CREATE TABLE audit (n INTEGER PRIMARY KEY, op TEXT, seq INTEGER);
CREATE TRIGGER audit_insert AFTER INSERT ON messages BEGIN INSERT INTO audit (op, seq) VALUES ('insert', NEW.seq); END;
CREATE TRIGGER audit_update AFTER UPDATE ON messages BEGIN INSERT INTO audit (op, seq) VALUES ('update', NEW.seq); END;
CREATE TRIGGER audit_delete AFTER DELETE ON messages BEGIN INSERT INTO audit (op, seq) VALUES ('delete', OLD.seq); END;
"""


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.sqlite"


@pytest.fixture
async def store(path: Path) -> AsyncIterator[SQLiteSessionStore]:
    async with SQLiteSessionStore(path) as opened:
        yield opened


@contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to the store's file, committing on exit."""
    with closing(sqlite3.connect(path)) as connection, connection:
        yield connection


def audit(path: Path) -> list[tuple[str, int]]:
    """What was done to message rows since the audit started, and then start again."""
    with database(path) as db:
        rows = db.execute("SELECT op, seq FROM audit ORDER BY n").fetchall()
        db.execute("DELETE FROM audit")
    return rows


async def reload(path: Path, session_id: str) -> Session:
    """The session as a new store object reads it from the file."""
    async with SQLiteSessionStore(path) as fresh:
        return await fresh.load(session_id)


def start_audit(path: Path) -> None:
    with database(path) as db:
        db.executescript(AUDIT)


async def test_the_database_is_in_wal_mode(store: SQLiteSessionStore, path: Path) -> None:
    await store.save(session())

    with database(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_each_message_is_one_row_in_order(store: SQLiteSessionStore, path: Path) -> None:
    await store.save(session())

    with database(path) as db:
        rows = db.execute("SELECT seq, role FROM messages WHERE session_id = 's1' ORDER BY seq").fetchall()
        (count,) = db.execute("SELECT message_count FROM sessions WHERE id = 's1'").fetchone()
    assert rows == [(0, "system"), (1, "user"), (2, "assistant"), (3, "tool"), (4, "assistant")]
    assert count == 5


async def test_saving_a_longer_session_inserts_only_the_new_rows(store: SQLiteSessionStore, path: Path) -> None:
    current = session(messages=conversation()[:2])
    await store.save(current)
    start_audit(path)

    for end in (3, 5):
        current = current.updated(messages=conversation()[:end], usage=current.usage + Usage(requests=1))
        await store.save(current)
    current = current.updated(messages=(*current.messages, Message.user("more")))
    await store.save(current)

    assert audit(path) == [("insert", 2), ("insert", 3), ("insert", 4), ("insert", 5)]
    assert await reload(path, "s1") == current


async def test_saving_a_loaded_session_with_one_more_message_inserts_one_row(path: Path) -> None:
    async with SQLiteSessionStore(path) as first:
        await first.save(session())
    start_audit(path)

    async with SQLiteSessionStore(path) as store:
        loaded = await store.load("s1")
        await store.save(loaded.updated(messages=(*loaded.messages, Message.user("next"))))

    assert audit(path) == [("insert", 5)]


async def test_saving_the_same_messages_again_writes_no_message_row_but_updates_the_session_row(
    store: SQLiteSessionStore, path: Path
) -> None:
    await store.save(session())
    start_audit(path)

    await store.save(session(title="renamed", usage=Usage(requests=9)))

    assert audit(path) == []
    loaded = await reload(path, "s1")
    assert (loaded.title, loaded.usage) == ("renamed", Usage(requests=9))


async def test_a_rewritten_history_replaces_the_rows_from_the_first_change_on(
    store: SQLiteSessionStore, path: Path
) -> None:
    await store.save(session())
    start_audit(path)
    rewritten = (*conversation()[:2], Message.assistant("no tools after all"))

    await store.save(session(messages=rewritten))

    assert sorted(audit(path)) == [("delete", 2), ("delete", 3), ("delete", 4), ("insert", 2)]
    assert (await reload(path, "s1")).messages == rewritten


@pytest.mark.parametrize(
    ("theirs", "first_changed"),
    [
        pytest.param((*conversation()[:4], Message.assistant("theirs")), 4, id="they-appended"),
        pytest.param(
            (conversation()[0], Message.user("they changed this"), *conversation()[2:4]),
            1,
            id="they-rewrote",
        ),
    ],
)
async def test_a_save_after_another_writer_compares_the_stored_rows_and_writes_only_the_difference(
    path: Path, theirs: tuple[Message, ...], first_changed: int
) -> None:
    ours, other = SQLiteSessionStore(path), SQLiteSessionStore(path)
    try:
        await ours.save(session(messages=conversation()[:4]))
        await other.save(session(messages=theirs))
        start_audit(path)

        mine = session(messages=(*conversation()[:4], Message.assistant("mine"), Message.user("and more")))
        await ours.save(mine)  # what ours remembers of the session is out of date

        expected = [("delete", seq) for seq in range(first_changed, len(theirs))]
        expected += [("insert", seq) for seq in range(first_changed, 6)]
        assert sorted(audit(path)) == sorted(expected)
        assert await other.load("s1") == mine
    finally:
        await ours.aclose()
        await other.aclose()


def abort_insert_of(path: Path, seq: int) -> None:
    with database(path) as db:
        db.execute(
            f"CREATE TRIGGER fail BEFORE INSERT ON messages WHEN NEW.seq = {seq}"
            " BEGIN SELECT RAISE(ABORT, 'simulated failure'); END"
        )


@pytest.mark.parametrize(
    "new_messages",
    [
        pytest.param((*conversation(), Message.user("q"), Message.assistant("a")), id="append"),
        pytest.param(
            (*conversation()[:2], Message.assistant("x"), Message.user("q"), Message.assistant("a")), id="rewrite"
        ),
    ],
)
async def test_a_save_that_fails_midway_changes_nothing(
    store: SQLiteSessionStore, path: Path, new_messages: tuple[Message, ...]
) -> None:
    old = session()
    await store.save(old)
    abort_insert_of(path, len(new_messages) - 1)  # the last row: the others are written by then

    with pytest.raises(sqlite3.IntegrityError, match="simulated failure"):
        await store.save(session(messages=new_messages, title="new", usage=Usage(requests=99)))

    assert await reload(path, "s1") == old
    with database(path) as db:
        db.execute("DROP TRIGGER fail")
    await store.save(session(messages=new_messages))  # and the store still saves rightly after the failure
    assert (await reload(path, "s1")).messages == new_messages


async def test_delete_removes_the_session_row_and_its_message_rows(store: SQLiteSessionStore, path: Path) -> None:
    await store.save(session())
    await store.save(session("kept"))

    await store.delete("s1")

    with database(path) as db:
        assert db.execute("SELECT DISTINCT session_id FROM messages").fetchall() == [("kept",)]
        assert db.execute("SELECT id FROM sessions").fetchall() == [("kept",)]


def garbage(path: Path) -> bytes:
    content = b"this is not a database\n" * 400
    path.write_bytes(content)
    return content


def overwrite_a_page(path: Path) -> None:
    content = bytearray(path.read_bytes())
    content[4096 * 2 : 4096 * 2 + 300] = b"\xff" * 300
    path.write_bytes(bytes(content))


def read(path: Path) -> bytes:
    return path.read_bytes()


async def test_a_file_that_is_not_a_database_raises_session_invalid_naming_it_and_is_left_alone(
    path: Path,
) -> None:
    content = garbage(path)
    async with SQLiteSessionStore(path) as store:
        for call in (store.load("s1"), store.list(), store.save(session()), store.delete("s1")):
            with pytest.raises(SessionInvalid, match=f"^\\[session_invalid\\] {path}: not a SQLite database"):
                await call
    assert read(path) == content


async def test_a_damaged_database_raises_session_invalid_naming_it(path: Path) -> None:
    async with SQLiteSessionStore(path) as store:
        for i in range(30):
            await store.save(session(f"s{i:02}", messages=(Message.user("x" * 3000),)))
    overwrite_a_page(path)

    async with SQLiteSessionStore(path) as store:
        ids = [summary.id for summary in await store.list()]
        problems = []
        for session_id in ids:
            try:
                await store.load(session_id)
            except SessionInvalid as error:
                problems.append(error.message)

    assert problems
    assert problems[0].startswith(f"{path}: not a SQLite database, or a damaged one: database disk image is malformed")


async def test_another_programs_database_is_refused_and_left_alone(path: Path) -> None:
    with database(path) as db:
        db.execute("CREATE TABLE sessions (whatever)")
    async with SQLiteSessionStore(path) as store:
        with pytest.raises(SessionInvalid, match=f"{path}: not a tether session database"):
            await store.save(session())
    with database(path) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("sessions",)]


async def test_a_database_from_a_newer_tether_is_refused(path: Path) -> None:
    with database(path) as db:
        db.execute("PRAGMA user_version = 4")
    async with SQLiteSessionStore(path) as store:
        with pytest.raises(SessionInvalid, match=r"newer tether \(schema 4"):
            await store.list()


BAD_ROWS = {
    "data-not-json": (
        "UPDATE messages SET data = '{\"role\": \"us' WHERE session_id = 's1' AND seq = 2",
        r"session 's1', messages row seq=2: not valid JSON",
    ),
    "data-not-a-message": (
        'UPDATE messages SET data = \'{"role": "robot", "parts": []}\' WHERE session_id = \'s1\' AND seq = 2',
        r"session 's1', messages row seq=2: not a valid message list: at 0\.role",
    ),
    "data-a-blob": (
        "UPDATE messages SET data = x'00ff' WHERE session_id = 's1' AND seq = 2",
        r"session 's1', messages row seq=2: data should be JSON text",
    ),
    "row-missing": (
        "DELETE FROM messages WHERE session_id = 's1' AND seq = 2",
        r"session 's1': messages row seq=2 is missing",
    ),
    "rows-missing-at-the-end": (
        "DELETE FROM messages WHERE session_id = 's1' AND seq >= 3",
        r"session 's1': 3 message rows stored, but the session row says 5",
    ),
    "title-a-blob": ("UPDATE sessions SET title = x'00' WHERE id = 's1'", r"sessions row 's1': title should be str"),
    "bad-timestamp": (
        "UPDATE sessions SET updated_at = 'soon' WHERE id = 's1'",
        r"sessions row 's1': updated_at: not an ISO 8601 timestamp",
    ),
    "bad-sequence": (
        "UPDATE messages SET data = (SELECT data FROM messages WHERE session_id = 's1' AND seq = 4)"
        " WHERE session_id = 's1' AND seq = 1",
        r"session 's1': not a valid transcript: message 1: the conversation starts with 'assistant'",
    ),
}


@pytest.mark.parametrize(("statement", "problem"), BAD_ROWS.values(), ids=BAD_ROWS.keys())
async def test_a_bad_row_raises_session_invalid_naming_the_file_session_and_row_and_spares_the_others(
    store: SQLiteSessionStore, path: Path, statement: str, problem: str
) -> None:
    await store.save(session())
    await store.save(session("fine"))
    with database(path) as db:
        db.execute(statement)

    with pytest.raises(SessionInvalid, match=f"^\\[session_invalid\\] {re.escape(str(path))}: ") as raised:
        await store.load("s1")

    assert re.search(problem, raised.value.message), raised.value.message
    assert await store.load("fine") == session("fine")


async def test_list_leaves_out_and_logs_a_session_row_it_cannot_read(
    store: SQLiteSessionStore, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await store.save(session("good"))
    await store.save(session("bad"))
    with database(path) as db:
        db.execute("UPDATE sessions SET created_at = 'long ago' WHERE id = 'bad'")

    with caplog.at_level(logging.WARNING, logger="tether.sessions"):
        summaries = await store.list()

    assert [s.id for s in summaries] == ["good"]
    assert "sessions row 'bad': created_at: not an ISO 8601 timestamp" in caplog.text


async def test_sqlite_io_runs_in_a_worker_thread_not_on_the_event_loop(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    threads: set[int] = set()
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        threads.add(threading.get_ident())
        connection: sqlite3.Connection = real_connect(*args, **kwargs)
        connection.set_trace_callback(lambda statement: threads.add(threading.get_ident()))
        return connection

    monkeypatch.setattr(sqlite3, "connect", connect)
    async with SQLiteSessionStore(path) as store:
        await store.save(session())
        await store.load("s1")
        await store.list()
        await store.delete("s1")

    assert threads
    assert loop_thread not in threads


def test_one_store_serves_one_event_loop_after_another(path: Path) -> None:
    store = SQLiteSessionStore(path)
    asyncio.run(store.save(session(messages=conversation()[:2])))
    asyncio.run(store.save(session()))

    assert asyncio.run(store.load("s1")) == session()
    store.close()


async def test_a_closed_store_opens_again_on_use(store: SQLiteSessionStore) -> None:
    await store.save(session())
    await store.aclose()

    assert await store.load("s1") == session()


async def test_the_directory_of_the_database_is_created_on_first_use(tmp_path: Path) -> None:
    async with SQLiteSessionStore(tmp_path / "a" / "b" / "sessions.sqlite") as store:
        assert await store.list() == []
    assert (tmp_path / "a" / "b" / "sessions.sqlite").is_file()


CRASHING_SAVE = """
import asyncio, os, sqlite3
from tether.testing.store_conformance import conversation, session
from tether.messages import Message
from tether.sessions import SQLiteSessionStore

real_connect = sqlite3.connect

def connect(*args, **kwargs):
    connection = real_connect(*args, **kwargs)
    connection.create_function("crash", 0, lambda: os._exit(3))  # the process dies inside the transaction
    return connection

sqlite3.connect = connect
longer = (*conversation(), Message.user("q"), Message.assistant("a"))
asyncio.run(SQLiteSessionStore({path!r}).save(session(messages=longer, title="new")))
"""


def test_a_process_killed_in_the_middle_of_a_save_leaves_the_previous_session(path: Path) -> None:
    old = session()
    asyncio.run(SQLiteSessionStore(path).save(old))
    with database(path) as db:
        db.execute("CREATE TRIGGER die AFTER INSERT ON messages WHEN NEW.seq = 6 BEGIN SELECT crash(); END")

    died = subprocess.run(
        [sys.executable, "-c", CRASHING_SAVE.format(path=str(path))], cwd=ROOT, capture_output=True, check=False
    )

    assert died.returncode == 3, died.stderr.decode()
    with database(path) as db:
        db.execute("DROP TRIGGER die")
        assert db.execute("SELECT count(*) FROM messages").fetchone() == (5,)
    store = SQLiteSessionStore(path)
    assert asyncio.run(store.load("s1")) == old
    store.close()
