"""Each store's own side of keeping outputs (the shared contract is in
``tether.testing.store_conformance``): where the text lives on disk, that it is written once, that delete
leaves no byte of it, owner-only modes, the database's upgrade, I/O off the event loop, and hostile or damaged
outputs named in a ``SessionInvalid``.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tether.errors import SessionInvalid
from tether.sessions import FileSessionStore, SQLiteSessionStore
from tether.sessions.base import output_ref
from tether.testing.store_conformance import session

MARKER = "OUTPUT-MARKER-4c1e9a"
OUTPUT = "".join(f"{i:06d} {MARKER} line of a long output\n" for i in range(20_000))
REF = output_ref(OUTPUT)


@contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(path)) as connection, connection:
        yield connection


def owned_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(root.rglob("*"))}


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


# --- the file store ---------------------------------------------------------------------------------------


async def test_an_output_is_one_utf8_file_beside_the_session_written_once(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.save_output("s1", REF, OUTPUT)
    path = tmp_path / "s1.outputs" / REF
    first = path.stat()

    await store.save_output("s1", REF, OUTPUT)

    assert path.read_text(encoding="utf-8") == OUTPUT
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    assert sorted(p.name for p in (tmp_path / "s1.outputs").iterdir()) == [REF]  # no temporary file left
    await store.save(session())
    assert [s.id for s in await store.list()] == ["s1"]  # the outputs' directory is no session


@pytest.mark.usefixtures("permissive_umask")
async def test_the_file_stores_outputs_are_owner_only(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    await store.save_output("s1", REF, OUTPUT)

    assert modes(tmp_path) == {"sessions": 0o700, "sessions/s1.outputs": 0o700, f"sessions/s1.outputs/{REF}": 0o600}


async def test_after_delete_no_file_of_the_file_store_holds_an_output(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    kept = output_ref("KEPT " + OUTPUT)
    await store.save(session())
    await store.save_output("s1", REF, OUTPUT)
    await store.save_output("s1.json", kept, "KEPT " + OUTPUT)
    (tmp_path / "s1.outputs" / f".{REF}.abcd1234.tmp").write_text(OUTPUT)  # a crashed write's leftover
    assert MARKER.encode() in owned_bytes(tmp_path)

    await store.delete("s1")

    assert not (tmp_path / "s1.outputs").exists()
    assert owned_bytes(tmp_path).count(MARKER.encode()) == OUTPUT.count(MARKER)  # the other session's only
    assert await store.load_output("s1.json", kept) == "KEPT " + OUTPUT


def _replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:1000]), "corrupt: its content is not", id="cut"),
        pytest.param(lambda p: p.write_bytes(b"\xff\xfe" + p.read_bytes()), "not UTF-8 text", id="not-utf8"),
        pytest.param(lambda p: p.write_text(OUTPUT.replace("000007", "000008")), "corrupt", id="altered"),
        pytest.param(lambda p: (p.unlink(), p.symlink_to("/dev/zero")), "not a regular file", id="link"),
        pytest.param(lambda p: _replace_with_fifo(p), "not a regular file", id="fifo"),
        pytest.param(lambda p: (p.unlink(), p.mkdir()), "not a regular file", id="directory"),
    ],
)
async def test_a_damaged_output_file_is_session_invalid_naming_it_and_spares_the_others(
    tmp_path: Path, damage: Any, problem: str
) -> None:
    store = FileSessionStore(tmp_path)
    other = output_ref("other")
    await store.save_output("s1", REF, OUTPUT)
    await store.save_output("s1", other, "other")
    path = tmp_path / "s1.outputs" / REF
    damage(path)

    with pytest.raises(SessionInvalid, match=str(path)) as raised:
        await store.load_output("s1", REF)

    assert problem in raised.value.message
    assert await store.load_output("s1", other) == "other"


async def test_an_output_file_larger_than_a_store_reads_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileSessionStore(tmp_path)
    await store.save_output("s1", REF, OUTPUT)
    monkeypatch.setattr("tether.sessions.files.MAX_OUTPUT_BYTES", 1_000)

    with pytest.raises(SessionInvalid, match="more than a store reads"):
        await store.load_output("s1", REF)


@pytest.mark.parametrize("kind", ["link", "file"])
async def test_an_outputs_directory_taken_by_a_link_or_a_file_is_neither_read_nor_written_through(
    tmp_path: Path, kind: str
) -> None:
    store = FileSessionStore(tmp_path / "sessions")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / REF).write_text(OUTPUT)
    (tmp_path / "sessions").mkdir()
    folder = tmp_path / "sessions" / "s1.outputs"
    if kind == "link":
        folder.symlink_to(elsewhere)
    else:
        folder.write_text("not a directory")

    with pytest.raises(SessionInvalid, match="not a directory"):
        await store.load_output("s1", REF)
    with pytest.raises(SessionInvalid, match="not a directory"):
        await store.save_output("s1", output_ref("new"), "new")

    assert sorted(p.name for p in elsewhere.iterdir()) == [REF]
    await store.delete("s1")  # removes the link or the file, never what a link points to
    assert not folder.exists()
    assert not folder.is_symlink()
    assert (elsewhere / REF).read_text() == OUTPUT


async def test_file_store_output_io_runs_in_a_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    threads: set[int] = set()
    real_fsync, real_open = os.fsync, os.open

    def fsync(fd: int) -> None:
        threads.add(threading.get_ident())
        real_fsync(fd)

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        threads.add(threading.get_ident())
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "open", open_)
    store = FileSessionStore(tmp_path)
    await store.save_output("s1", REF, OUTPUT)
    assert await store.load_output("s1", REF) == OUTPUT

    assert threads
    assert loop_thread not in threads


# --- the SQLite store ---------------------------------------------------------------------------------------


async def test_an_output_is_one_row_inserted_once(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save_output("s1", REF, OUTPUT)
        with database(path) as db:
            db.executescript(
                "CREATE TABLE audit (op TEXT);"
                "CREATE TRIGGER i AFTER INSERT ON outputs BEGIN INSERT INTO audit VALUES ('insert'); END;"
                "CREATE TRIGGER u AFTER UPDATE ON outputs BEGIN INSERT INTO audit VALUES ('update'); END;"
                "CREATE TRIGGER d AFTER DELETE ON outputs BEGIN INSERT INTO audit VALUES ('delete'); END;"
            )

        await store.save_output("s1", REF, OUTPUT)
        await store.save_output("s2", REF, OUTPUT)

    with database(path) as db:
        assert db.execute("SELECT op FROM audit").fetchall() == [("insert",)]  # s2's row, and nothing else
        assert db.execute("SELECT session_id, ref, length(content) FROM outputs ORDER BY session_id").fetchall() == [
            ("s1", REF, len(OUTPUT)),
            ("s2", REF, len(OUTPUT)),
        ]


async def test_after_delete_neither_the_database_nor_its_log_holds_an_output(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save_output("orphan", REF, OUTPUT)  # outputs whose session was never saved
        await store.save(session())
        await store.save_output("s1", REF, OUTPUT)
        await store.save_output("kept", output_ref("kept"), "kept")
        assert MARKER.encode() in owned_bytes(tmp_path)

        await store.delete("s1")
        await store.delete("orphan")

        assert MARKER.encode() not in owned_bytes(tmp_path)
        assert await store.load_output("kept", output_ref("kept")) == "kept"


BAD_OUTPUT_ROWS = {
    "altered": ("UPDATE outputs SET content = 'something else'", "corrupt: its content is not the output"),
    "a-blob": ("UPDATE outputs SET content = x'00ff'", "content should be text"),
    "not-utf8": ("UPDATE outputs SET content = CAST(x'61ff62' AS TEXT)", "content should be text, found text that"),
    "a-number": ("UPDATE outputs SET content = 42", "corrupt"),  # a TEXT column keeps it as "42"
}


@pytest.mark.parametrize(("statement", "problem"), BAD_OUTPUT_ROWS.values(), ids=BAD_OUTPUT_ROWS.keys())
async def test_a_damaged_output_row_is_session_invalid_naming_the_row_and_spares_the_others(
    tmp_path: Path, statement: str, problem: str
) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save_output("s1", REF, OUTPUT)
        await store.save_output("s2", REF, OUTPUT)
        with database(path) as db:
            db.execute(f"{statement} WHERE session_id = 's1'")

        with pytest.raises(SessionInvalid, match=f"{path}: session 's1', outputs row {REF}: ") as raised:
            await store.load_output("s1", REF)

        assert problem in raised.value.message
        assert await store.load_output("s2", REF) == OUTPUT


async def test_a_database_of_the_first_schema_gets_the_outputs_table_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save(session())
    with database(path) as db:  # as the first schema left it
        db.execute("DROP TABLE outputs")
        db.execute("DROP TABLE exchanges")
        db.execute("PRAGMA user_version = 1")

    async with SQLiteSessionStore(path) as store:
        assert await store.load("s1") == session()
        await store.save_output("s1", REF, OUTPUT)
        assert await store.load_output("s1", REF) == OUTPUT

    with database(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)


async def test_sqlite_output_io_runs_in_a_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    threads: set[int] = set()
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = real_connect(*args, **kwargs)
        connection.set_trace_callback(lambda statement: threads.add(threading.get_ident()))
        return connection

    monkeypatch.setattr(sqlite3, "connect", connect)
    async with SQLiteSessionStore(tmp_path / "s.sqlite") as store:
        await store.save_output("s1", REF, OUTPUT)
        assert await store.load_output("s1", REF) == OUTPUT

    assert threads
    assert loop_thread not in threads
