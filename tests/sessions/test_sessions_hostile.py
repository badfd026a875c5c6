"""Sessions that cannot be bricked, cannot leak copies and are not readable by others.

Every store (memory, JSON files, SQLite) through the conformance fixtures where the behaviour is shared:
usage counts out of range are normalised on save and load, a session that cannot be written so that it reads
back is refused before the stored version is touched, and hostile data on disk (deep nesting, invalid UTF-8,
wrong types, truncation, links, FIFOs) is ``session_invalid`` naming the session, never a traceback, and never
costs the other sessions. Store-specific parts (a file's bytes, a database's rows, freed pages and the
write-ahead log, file modes under a permissive umask) are checked on real files.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import SessionInvalid
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.sessions import FileSessionStore, Session, SessionStore, SQLiteSessionStore
from tether.sessions.base import MAX_COUNT
from tether.testing.store_conformance import Stores, session
from tether.usage import Usage

FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "requests")

hostile_counts = (
    st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
    | st.text(max_size=5)
)


def expected_count(value: Any) -> int:
    """What a count out of range is normalised to (the documented rule, restated)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value):
            return 0
        return min(MAX_COUNT, max(0, math.floor(value)))
    return min(MAX_COUNT, max(0, int(value)))


def deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def with_marker(marker: str) -> tuple[Message, ...]:
    return (
        Message.user(f"please remember {marker}"),
        Message("assistant", (ToolCall("c1", "note", {"text": marker}, json.dumps({"text": marker})),)),
        Message("tool", (ToolResult("c1", "note", f"noted {marker}"),)),
        Message.assistant(f"I noted {marker}."),
    )


@contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        yield db


def owned_bytes(root: Path) -> bytes:
    """Every byte of every file under ``root``."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


# --- usage counts: normalised, never a brick (every store) -------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.fixed_dictionaries(dict.fromkeys(FIELDS, hostile_counts)), n=st.integers(0, 10**9))
async def test_usage_counts_out_of_range_are_normalised_on_save_and_the_session_loads(
    stores: Stores, counts: dict[str, Any], n: int
) -> None:
    store = stores.open()
    saved = session(f"u{n}", usage=Usage(**counts))

    await store.save(saved)
    loaded = await store.load(saved.id)

    assert {name: getattr(loaded.usage, name) for name in FIELDS} == {
        name: expected_count(value) for name, value in counts.items()
    }
    assert loaded.messages == saved.messages
    assert all(type(getattr(loaded.usage, name)) is int for name in FIELDS)


async def test_a_json_file_written_with_usage_out_of_range_loads_normalised_and_saves_again(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.save(session())
    data = json.loads((tmp_path / "s1.json").read_text())
    data["usage"] = {"input_tokens": -5, "output_tokens": 2.75, "requests": "x", "cache_read_tokens": 10**40}
    (tmp_path / "s1.json").write_text(json.dumps(data))

    loaded = await store.load("s1")
    await store.save(loaded.updated(usage=loaded.usage + Usage(requests=1)))

    assert loaded.usage == Usage(input_tokens=0, output_tokens=2, cache_read_tokens=MAX_COUNT, requests=0)
    assert (await store.load("s1")).usage.requests == 1


@pytest.mark.parametrize(
    "usage",
    ['\'{"input_tokens": -5, "output_tokens": 1.5}\'', "'not json'", "42", "x'ff00'", "'[1, 2]'", "'[[[[['"],
)
async def test_a_sqlite_row_written_with_usage_out_of_range_loads_normalised_and_saves_again(
    tmp_path: Path, usage: str
) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save(session())
    with database(path) as db:
        db.execute(f"UPDATE sessions SET usage = {usage}, revision = 'x' WHERE id = 's1'")

    async with SQLiteSessionStore(path) as store:
        loaded = await store.load("s1")
        await store.save(loaded.updated(usage=loaded.usage + Usage(requests=1)))
        again = await store.load("s1")

    assert loaded.usage.input_tokens == 0
    assert loaded.usage.requests == 0
    assert loaded.messages == session().messages
    assert again.usage.requests == 1


# --- saves that would not read back are refused before anything changes (every store) ------------------------------


def too_deep() -> Session:
    call = ToolCall("c1", "f", {"a": deep(5000)}, "{}")
    return session(
        messages=(Message.user("hi"), Message("assistant", (call,)), Message("tool", (ToolResult("c1", "f", "x"),)))
    )


UNSTORABLE = {
    "arguments-nested-too-deep": (too_deep, r"session 's1': message 1 cannot be stored"),
    "provider-data-nested-too-deep": (
        lambda: session(messages=(Message("user", (Text("hi"),), provider_data={"x": deep(5000)}),)),
        r"session 's1': message 0 cannot be stored",
    ),
    "title-not-text": (lambda: session(title=7), r"session 's1': title must be a string, not 7"),
    "model-with-a-lone-surrogate": (lambda: session(model="openai:\ud800"), "model is not valid text"),
    "message-not-a-message": (
        lambda: session(messages=cast(tuple[Message, ...], ("hello",))),
        r"message 0 is 'hello', not a Message",
    ),
}


@pytest.mark.parametrize(("make", "problem"), UNSTORABLE.values(), ids=UNSTORABLE.keys())
async def test_a_session_that_would_not_read_back_is_refused_and_the_stored_version_kept(
    stores: Stores, make: Any, problem: str
) -> None:
    store = stores.open()
    await store.save(session())

    with pytest.raises(SessionInvalid, match=problem):
        await store.save(make())

    assert await store.load("s1") == session()
    await stores.close()
    assert await stores.open().load("s1") == session()


async def test_a_title_suggested_from_a_prompt_with_a_lone_surrogate_can_be_stored(store: SessionStore) -> None:
    from tether.sessions import suggest_title

    messages = (Message.user("look: \udcff here"), Message.assistant("ok"))
    await store.save(session(messages=messages, title=suggest_title(messages)))

    assert (await store.load("s1")).title == "look: \ufffd here"


# --- hostile data on disk: session_invalid, never a traceback, never the other sessions ------------------------------

HOSTILE_FILES: dict[str, bytes] = {
    "deeply-nested": b"[" * 100_000 + b"]" * 100_000,
    "messages-nested-400-deep": b'{"version": 1, "id": "s1", "title": "t", "model": "m", "messages": '
    + b"[" * 400
    + b"]" * 400
    + b"}",
    "truncated-deep": b'{"version": 1, "messages": ' + b"[" * 50_000,
    "invalid-utf8": b'{"version": 1, "id": "s1", "title": "\xff\xfe"}',
    "huge-number": b'{"version": 1' + b"9" * 10_000 + b"}",
    "huge-string-wrong-type": b'{"version": 1, "id": "s1", "title": "t", "model": "m", "messages": "'
    + b"a" * 5_000_000
    + b'"}',
    "version-a-float": b'{"version": 1.0e999}',
    "a-list": b"[1, 2, 3]",
    "nul-bytes": b"\x00" * 1000,
}


@pytest.mark.parametrize("content", HOSTILE_FILES.values(), ids=HOSTILE_FILES.keys())
async def test_a_hostile_session_file_is_session_invalid_and_spares_the_others(tmp_path: Path, content: bytes) -> None:
    store = FileSessionStore(tmp_path)
    await store.save(session("fine"))
    (tmp_path / "s1.json").write_bytes(content)

    with pytest.raises(SessionInvalid, match=f"^\\[session_invalid\\] {tmp_path / 's1.json'}: "):
        await store.load("s1")

    assert await store.load("fine") == session("fine")
    assert [s.id for s in await store.list()] == ["fine"]


@pytest.mark.parametrize("kind", ["link-to-dev-zero", "fifo", "directory", "dangling-link"])
async def test_a_session_file_that_is_not_a_regular_file_is_refused_without_reading_it(
    tmp_path: Path, kind: str
) -> None:
    store = FileSessionStore(tmp_path)
    await store.save(session("fine"))
    target = tmp_path / "s1.json"
    if kind == "link-to-dev-zero":
        target.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "nowhere")

    with pytest.raises(SessionInvalid, match="not a regular file"):
        await store.load("s1")

    assert [s.id for s in await store.list()] == ["fine"]


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(0, 10_000), flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4))
async def test_any_truncated_or_corrupted_session_file_loads_or_is_session_invalid(
    cut: int, flips: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        store = FileSessionStore(root)
        await store.save(session())
        await store.save(session("fine"))
        data = bytearray((root / "s1.json").read_bytes())
        for at, value in flips:
            data[at % len(data)] = value
        (root / "s1.json").write_bytes(bytes(data[: max(1, cut % (len(data) + 1))]))

        outcome: Session | SessionInvalid
        try:
            outcome = await store.load("s1")
        except SessionInvalid as error:
            outcome = error

        if isinstance(outcome, SessionInvalid):
            assert outcome.code == "session_invalid"
            assert str(root / "s1.json") in outcome.message
        else:
            assert outcome.id == "s1"

        assert "fine" in [s.id for s in await store.list()]
        assert await store.load("fine") == session("fine")


BAD_ROWS = {
    "data-not-utf8": (
        "UPDATE messages SET data = CAST(x'7b22726f6c65ff' AS TEXT) WHERE session_id = 's1' AND seq = 1",
        r"session 's1', messages row seq=1: data should be JSON text, found text that is not UTF-8",
    ),
    "data-nested-too-deep": (
        "UPDATE messages SET data = '" + "[" * 100_000 + "' WHERE session_id = 's1' AND seq = 1",
        r"session 's1', messages row seq=1: not valid JSON",
    ),
    "count-not-a-number": (
        "UPDATE sessions SET message_count = 'many' WHERE id = 's1'",
        r"sessions row 's1': message_count should be int, found 'many'",
    ),
    "count-huge": (
        f"UPDATE sessions SET message_count = {2**63 - 1} WHERE id = 's1'",
        r"session 's1': 5 message rows stored, but the session row says 9223372036854775807",
    ),
    "timestamp-a-number": (
        "UPDATE sessions SET created_at = 1.5 WHERE id = 's1'",
        r"sessions row 's1': created_at: not an ISO 8601 timestamp",
    ),
}


@pytest.mark.parametrize(("statement", "problem"), BAD_ROWS.values(), ids=BAD_ROWS.keys())
async def test_a_hostile_sqlite_row_is_session_invalid_and_spares_the_others(
    tmp_path: Path, statement: str, problem: str
) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save(session())
        await store.save(session("fine"))
        with database(path) as db:
            db.execute(statement)

        with pytest.raises(SessionInvalid, match=problem):
            await store.load("s1")

        assert await store.load("fine") == session("fine")
        assert "fine" in {s.id for s in await store.list()}


async def test_sqlite_titles_and_ids_that_are_not_utf8_do_not_break_the_list(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save(session())
        await store.save(session("fine"))
        await store.save(session("odd"))
        with database(path) as db:
            db.execute("UPDATE sessions SET title = CAST(x'41ff42' AS TEXT) WHERE id = 's1'")
            db.execute("UPDATE sessions SET id = CAST(x'6fff' AS TEXT) WHERE id = 'odd'")

        summaries = {s.id: s for s in await store.list()}
        loaded = await store.load("s1")
        await store.save(loaded)

    assert set(summaries) == {"s1", "fine"}
    assert summaries["s1"].title == loaded.title == "A\ufffdB"


# --- delete leaves no copy ---------------------------------------------------------------------------------------


async def test_after_delete_no_file_of_the_json_store_holds_the_conversation(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    marker, kept = "MARKER-9f3e1c-GONE", "MARKER-KEPT-77aa"
    for end in (1, 2, 4):  # three versions: the backup holds an older one
        await store.save(session(messages=with_marker(marker)[:end], title=marker))
    await store.save(session("s1.json", messages=with_marker(kept)))
    for name in ("s1.json", "s1.json.json"):  # what crashed saves of both sessions leave behind
        fd, _ = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=tmp_path)
        os.write(fd, (marker if name == "s1.json" else kept).encode())
        os.close(fd)
    (tmp_path / ".s1.json.bak.0123abcd.tmp").write_text(marker)
    assert marker.encode() in owned_bytes(tmp_path)

    await store.delete("s1")

    assert marker.encode() not in owned_bytes(tmp_path)
    assert owned_bytes(tmp_path).count(kept.encode()) >= 2, "the other session and its leftovers are untouched"
    assert (await store.load("s1.json")).messages == with_marker(kept)


async def test_after_delete_neither_the_database_nor_its_log_holds_the_conversation(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    marker, kept = "MARKER-5b7d20-GONE", "MARKER-KEPT-0c1d"
    async with SQLiteSessionStore(path) as store:
        for end in (1, 2, 4, 2, 4):  # appended and rewritten: older rows freed along the way
            await store.save(session(messages=with_marker(marker)[:end], title=marker))
        await store.save(session("other", messages=with_marker(kept), title=kept))
        assert marker.encode() in owned_bytes(tmp_path)

        await store.delete("s1")

        assert marker.encode() not in owned_bytes(tmp_path)
        assert kept.encode() in owned_bytes(tmp_path)
        assert (await store.load("other")).messages == with_marker(kept)


# --- owner-only files whatever the umask ---------------------------------------------------------------------------


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(root.rglob("*"))}


@pytest.mark.usefixtures("permissive_umask")
async def test_the_sqlite_store_creates_its_directory_database_and_log_owner_only(tmp_path: Path) -> None:
    async with SQLiteSessionStore(tmp_path / "new" / "deeper" / "s.sqlite") as store:
        await store.save(session())
        found = modes(tmp_path)

    assert found == {
        "new": 0o700,
        "new/deeper": 0o700,
        "new/deeper/s.sqlite": 0o600,
        "new/deeper/s.sqlite-wal": 0o600,
        "new/deeper/s.sqlite-shm": 0o600,
    }


@pytest.mark.usefixtures("permissive_umask")
async def test_an_existing_database_readable_by_others_is_tightened_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save(session())
    for name in ("s.sqlite", "s.sqlite-wal", "s.sqlite-shm"):
        if (tmp_path / name).exists():
            os.chmod(tmp_path / name, 0o666)
    with database(path) as db:  # leave a log behind, readable by everyone
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("UPDATE sessions SET title = 'x'")
        os.chmod(tmp_path / "s.sqlite-wal", 0o666)
        async with SQLiteSessionStore(path) as store:
            await store.load("s1")
            found = modes(tmp_path)

    assert all(mode == 0o600 for mode in found.values()), found


@pytest.mark.usefixtures("permissive_umask")
async def test_the_json_store_creates_its_directory_and_files_owner_only(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "new" / "sessions")
    await store.save(session())
    await store.save(session())

    assert modes(tmp_path) == {
        "new": 0o700,
        "new/sessions": 0o700,
        "new/sessions/s1.json": 0o600,
        "new/sessions/s1.json.bak": 0o600,
    }
