"""FileSessionStore: atomic writes with a backup, and every kind of bad file named in a SessionInvalid."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tether.errors import SessionInvalid
from tether.messages import Message
from tether.sessions import FileSessionStore, SessionNotFound
from tether.testing.store_conformance import conversation, session


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def store(directory: Path) -> FileSessionStore:
    return FileSessionStore(directory)


def read_version(path: Path) -> Any:
    return json.loads(path.read_bytes())


def names(directory: Path) -> list[str]:
    """The names in ``directory``, sorted (a plain function: the tests' own file access is not under test)."""
    return sorted(p.name for p in directory.iterdir())


def read(path: Path) -> bytes:
    return path.read_bytes()


def write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


async def test_a_save_leaves_only_the_session_file_and_the_previous_version_as_backup(
    store: FileSessionStore, directory: Path
) -> None:
    v1, v2, v3 = (session(messages=conversation()[:n], title=f"v{n}") for n in (2, 4, 5))
    await store.save(v1)
    assert names(directory) == ["s1.json"]

    await store.save(v2)
    assert names(directory) == ["s1.json", "s1.json.bak"]
    assert read_version(directory / "s1.json.bak")["title"] == "v2"
    await store.save(v3)

    assert names(directory) == ["s1.json", "s1.json.bak"]
    assert read_version(directory / "s1.json")["title"] == "v5"
    assert read_version(directory / "s1.json.bak")["title"] == "v4"


async def test_the_file_is_versioned_json_with_the_envelope_and_the_messages(
    store: FileSessionStore, directory: Path
) -> None:
    await store.save(session())

    data = read_version(directory / "s1.json")

    assert data["version"] == 1
    assert (data["id"], data["title"], data["model"]) == ("s1", "Adding numbers", "openai:gpt-4o-mini")
    assert data["created_at"] == "2026-03-15T14:22:33.123456+00:00"
    assert data["usage"]["input_tokens"] == 120
    assert [m["role"] for m in data["messages"]] == ["system", "user", "assistant", "tool", "assistant"]


def fail_replacing(monkeypatch: pytest.MonkeyPatch, target: Path) -> list[str]:
    """Make ``os.replace`` onto ``target`` fail, as a crash at the final rename would."""
    real_replace = os.replace
    attempts: list[str] = []

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        if Path(dst) == target:
            attempts.append(str(src))
            raise OSError(5, "simulated crash during rename")
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return attempts


async def test_a_crash_at_the_rename_leaves_the_old_file_intact_and_no_temp_file(
    store: FileSessionStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = session(messages=conversation()[:2])
    await store.save(old)
    before = read(directory / "s1.json")
    attempts = fail_replacing(monkeypatch, directory / "s1.json")

    with pytest.raises(OSError, match="simulated crash"):
        await store.save(session())

    assert attempts, "the save got as far as the rename"
    assert read(directory / "s1.json") == before
    assert not [name for name in names(directory) if name.endswith(".tmp")]
    monkeypatch.undo()
    assert await store.load("s1") == old


async def test_a_failure_while_writing_the_temp_file_leaves_the_old_file_and_no_temp_file(
    store: FileSessionStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = session(messages=conversation()[:2])
    await store.save(old)
    before = read(directory / "s1.json")

    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        await store.save(session())
    monkeypatch.undo()

    assert read(directory / "s1.json") == before
    assert names(directory) == ["s1.json"]
    assert await store.load("s1") == old


async def test_a_first_save_that_fails_leaves_no_session_and_no_temp_file(
    store: FileSessionStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_replacing(monkeypatch, directory / "s1.json")

    with pytest.raises(OSError, match="simulated crash"):
        await store.save(session())

    assert names(directory) == []
    with pytest.raises(SessionNotFound):
        await store.load("s1")


async def test_the_backup_is_copied_where_the_file_system_has_no_hard_links(
    store: FileSessionStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def link(src: Any, dst: Any, **kwargs: Any) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", link)
    await store.save(session(title="first"))
    await store.save(session(title="second"))

    assert read_version(directory / "s1.json.bak")["title"] == "first"
    assert names(directory) == ["s1.json", "s1.json.bak"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
async def test_session_files_are_readable_by_their_owner_only(store: FileSessionStore, directory: Path) -> None:
    await store.save(session())
    await store.save(session())

    for name in ("s1.json", "s1.json.bak"):
        assert stat.S_IMODE((directory / name).stat().st_mode) == 0o600


async def test_delete_removes_the_backup_too(store: FileSessionStore, directory: Path) -> None:
    await store.save(session())
    await store.save(session())
    await store.save(session("other"))

    await store.delete("s1")

    assert names(directory) == ["other.json"]


def valid_file() -> dict[str, Any]:
    return {
        "version": 1,
        "id": "s1",
        "title": "t",
        "model": "m",
        "created_at": "2026-03-15T14:22:33.123456+00:00",
        "updated_at": "2026-03-15T14:22:33.123456+00:00",
        "usage": {"input_tokens": 3},
        "messages": [
            {"role": "user", "parts": [{"kind": "text", "text": "hi"}]},
            {"role": "assistant", "parts": [{"kind": "text", "text": "hello"}]},
        ],
    }


def changed(**changes: Any) -> bytes:
    data = valid_file()
    for key, value in changes.items():
        if value is ...:
            del data[key]
        else:
            data[key] = value
    return json.dumps(data).encode()


BAD_FILES = {
    "truncated": (json.dumps(valid_file()).encode()[:150], r"not valid JSON \(truncated or corrupt\?\)"),
    "empty": (b"", r"empty \(a truncated write\?\)"),
    "not-json": (b"hello, I am not JSON", "not valid JSON"),
    "not-utf8": (b'{"id": "\xff\xfe"}', "not UTF-8 text"),
    "a-list": (b"[1, 2, 3]", "expected a session object, found a list"),
    "no-version": (changed(version=...), "not a tether session file"),
    "newer-version": (changed(version=99), r"written by a newer tether \(format 99"),
    "title-not-text": (changed(title=7), "'title' must be a string, found int"),
    "another-id": (changed(id="other"), "holds session 'other', not 's1'"),
    "no-messages": (changed(messages=...), "no 'messages'"),
    "messages-not-a-list": (changed(messages={"a": 1}), "messages: not a valid message list"),
    "unknown-part": (
        changed(messages=[{"role": "user", "parts": [{"kind": "image", "url": "x"}]}]),
        r"messages: not a valid message list: at 0\.parts\.0",
    ),
    "unknown-role": (changed(messages=[{"role": "robot", "parts": []}]), r"at 0\.role"),
    "bad-timestamp": (changed(created_at="yesterday"), "created_at: not an ISO 8601 timestamp: 'yesterday'"),
    "naive-timestamp": (changed(updated_at="2026-03-15T14:22:33"), "updated_at: timestamp .* has no time zone"),
    "bad-sequence": (
        changed(messages=[{"role": "assistant", "parts": []}]),
        "not a valid transcript: message 0: the conversation starts with 'assistant'",
    ),
}


@pytest.mark.parametrize(("content", "problem"), BAD_FILES.values(), ids=BAD_FILES.keys())
async def test_a_bad_file_raises_session_invalid_naming_the_file_and_the_problem_and_spares_the_others(
    store: FileSessionStore, directory: Path, content: bytes, problem: str
) -> None:
    await store.save(session("fine"))
    write(directory / "s1.json", content)

    with pytest.raises(SessionInvalid) as raised:
        await store.load("s1")

    path = str(directory / "s1.json")
    assert raised.value.message.startswith(path + ": "), raised.value.message
    assert re.search(problem, raised.value.message), raised.value.message
    assert read(directory / "s1.json") == content, "loading never repairs or rewrites"
    assert await store.load("fine") == session("fine")
    assert "fine" in [s.id for s in await store.list()]


async def test_the_valid_file_of_those_tests_loads(store: FileSessionStore, directory: Path) -> None:
    write(directory / "s1.json", changed())

    loaded = await store.load("s1")

    assert loaded.messages == (Message.user("hi"), Message.assistant("hello"))
    assert loaded.usage.input_tokens == 3


async def test_a_corrupt_file_error_points_at_the_backup_which_use_backup_loads(
    store: FileSessionStore, directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    previous = session(messages=conversation()[:2])
    await store.save(previous)
    await store.save(session())
    whole = read(directory / "s1.json")
    write(directory / "s1.json", whole[: len(whole) // 2])

    with pytest.raises(SessionInvalid, match=r"not valid JSON.*the previous version is in .*s1\.json\.bak"):
        await store.load("s1")
    with caplog.at_level(logging.WARNING, logger="tether.sessions"):
        recovered = await FileSessionStore(directory, use_backup=True).load("s1")

    assert recovered == previous
    assert "loaded the previous version from" in caplog.text


async def test_use_backup_raises_naming_both_problems_when_the_backup_is_bad_too(directory: Path) -> None:
    store = FileSessionStore(directory, use_backup=True)
    await store.save(session())
    await store.save(session())
    write(directory / "s1.json", b"{")
    write(directory / "s1.json.bak", b"")

    with pytest.raises(SessionInvalid, match=r"s1\.json: not valid JSON.*backup cannot be used.*s1\.json\.bak: empty"):
        await store.load("s1")


async def test_use_backup_without_a_backup_raises_the_files_problem(directory: Path) -> None:
    store = FileSessionStore(directory, use_backup=True)
    await store.save(session())
    write(directory / "s1.json", b"{")

    with pytest.raises(SessionInvalid, match=r"s1\.json: not valid JSON.*backup cannot be used"):
        await store.load("s1")


async def test_list_leaves_out_and_logs_unreadable_files_and_ignores_temp_backup_and_foreign_files(
    store: FileSessionStore, directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await store.save(session("good"))
    await store.save(session("good"))
    write(directory / "broken.json", b"{")
    write(directory / ".good.json.1234.tmp", b"partial")
    write(directory / "notes.txt", b"mine")
    write(directory / "bad name.json", changed())

    with caplog.at_level(logging.WARNING, logger="tether.sessions"):
        summaries = await store.list()

    assert [s.id for s in summaries] == ["good"]
    assert "broken.json: not valid JSON" in caplog.text
    assert "bad name" in caplog.text


async def test_a_directory_that_does_not_exist_yet_lists_nothing_and_is_created_on_save(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "a" / "b")
    assert await store.list() == []
    await store.delete("s1")

    await store.save(session())

    assert (tmp_path / "a" / "b" / "s1.json").is_file()


async def test_file_io_runs_in_a_worker_thread_not_on_the_event_loop(
    store: FileSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    threads: set[int] = set()
    real_fsync, real_read_bytes, real_scandir = os.fsync, Path.read_bytes, os.scandir

    def fsync(fd: int) -> None:
        threads.add(threading.get_ident())
        real_fsync(fd)

    def read_bytes(self: Path) -> bytes:
        threads.add(threading.get_ident())
        return real_read_bytes(self)

    def scandir(path: Any) -> Any:
        threads.add(threading.get_ident())
        return real_scandir(path)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(os, "scandir", scandir)
    await store.save(session())
    await store.load("s1")
    await store.list()

    assert threads
    assert loop_thread not in threads


async def test_sessions_with_the_same_id_in_two_directories_are_apart(tmp_path: Path) -> None:
    one, two = FileSessionStore(tmp_path / "one"), FileSessionStore(tmp_path / "two")
    await one.save(session(title="one"))
    await two.save(session(title="two"))

    assert (await one.load("s1")).title == "one"
    assert (await two.load("s1")).title == "two"


def test_path_of_refuses_an_id_that_would_leave_the_directory(store: FileSessionStore) -> None:
    with pytest.raises(SessionInvalid):
        store.path_of("../outside")
    assert store.path_of("s1").name == "s1.json"


CRASHING_SAVE = """
import asyncio, os
from pathlib import Path
from tether.testing.store_conformance import session
from tether.sessions import FileSessionStore

real_replace = os.replace

def replace(src, dst, **kwargs):
    if Path(dst).name == "s1.json":
        os._exit(3)  # the process dies just before the new file takes the old one's place
    real_replace(src, dst, **kwargs)

os.replace = replace
asyncio.run(FileSessionStore({directory!r}).save(session(title="new")))
"""


def test_a_process_killed_in_the_middle_of_a_save_leaves_the_old_file_and_a_temp_file_that_is_ignored(
    store: FileSessionStore, directory: Path
) -> None:
    old = session(messages=conversation()[:2])
    asyncio.run(store.save(old))

    died = subprocess.run(
        [sys.executable, "-c", CRASHING_SAVE.format(directory=str(directory))],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        check=False,
    )

    assert died.returncode == 3, died.stderr.decode()
    assert [name for name in names(directory) if name.endswith(".tmp")], "the crash left its temp file"
    assert asyncio.run(store.load("s1")) == old
    assert [s.id for s in asyncio.run(store.list())] == ["s1"]
    asyncio.run(store.save(session()))
    assert asyncio.run(store.load("s1")) == session()


ROUNDS = 5
SAVERS = 8


def saved_titles() -> list[str]:
    return [f"writer {n}" for n in range(SAVERS)]


async def test_rounds_of_concurrent_saves_of_one_session_leave_no_temporary_file_and_a_readable_session(
    store: FileSessionStore, directory: Path
) -> None:
    for _ in range(ROUNDS):
        await asyncio.gather(*(store.save(session(title=title)) for title in saved_titles()))

    assert names(directory) == ["s1.json", "s1.json.bak"]
    assert (await store.load("s1")).title in saved_titles()
    assert read_version(directory / "s1.json.bak")["title"] in saved_titles()


CONCURRENT_SAVES = """
import asyncio, sys, time
from tether.testing.store_conformance import session
from tether.sessions import FileSessionStore

store = FileSessionStore({directory!r})
start = {start!r}
while time.time() < start:  # every process starts saving at the same moment
    time.sleep(0.001)
for round in range({rounds}):
    asyncio.run(store.save(session(title=f"process {{sys.argv[1]}} round {{round}}")))
"""


def test_processes_saving_one_session_at_once_leave_no_temporary_file_and_a_readable_session(
    store: FileSessionStore, directory: Path
) -> None:
    import time

    asyncio.run(store.save(session(title="first")))
    script = CONCURRENT_SAVES.format(directory=str(directory), start=time.time() + 2.0, rounds=ROUNDS * 4)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(n)], cwd=Path(__file__).resolve().parents[2], stderr=subprocess.PIPE
        )
        for n in range(4)
    ]
    for process in processes:
        _, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors.decode()

    assert names(directory) == ["s1.json", "s1.json.bak"]
    assert re.fullmatch(r"process \d round \d+", asyncio.run(store.load("s1")).title)
