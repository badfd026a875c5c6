"""The one rule for whole-file writes (tether.atomic): old or new never half, modes, backups, links, dir fds."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tether import atomic
from tether.atomic import create_file, replace_file, temporary_files


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_replace_writes_the_new_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "data.txt"
    target.write_bytes(b"old")
    replace_file(target, b"new")
    assert target.read_bytes() == b"new"
    assert names(tmp_path) == ["data.txt"]


def test_a_crash_at_the_rename_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "data.txt"
    target.write_bytes(b"old")

    def replace(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "simulated crash during rename")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="simulated crash"):
        replace_file(target, b"new")
    assert target.read_bytes() == b"old"
    assert names(tmp_path) == ["data.txt"]


def test_a_write_failing_midway_leaves_the_old_file_and_a_failed_create_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "keep.txt"
    target.write_bytes(b"old content\n")
    real_write_all = atomic._write_all

    def half_then_disk_full(fd: int, data: bytes) -> None:
        real_write_all(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "_write_all", half_then_disk_full)
    with pytest.raises(OSError, match="No space left"):
        replace_file(target, b"a much longer new content\n" * 100)
    assert target.read_bytes() == b"old content\n"
    with pytest.raises(OSError, match="No space left"):
        replace_file(tmp_path / "fresh.txt", b"new file\n")
    assert names(tmp_path) == ["keep.txt"]


def test_the_file_is_fsynced_before_the_rename_and_the_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "data.txt"
    target.write_text("old\n")
    real_fsync = os.fsync
    seen: list[tuple[str, str, list[str]]] = []

    def spy(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        seen.append((kind, target.read_text(), names(tmp_path)))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    replace_file(target, b"new\n")
    (file_kind, target_then, names_then), (dir_kind, target_after, names_after) = seen
    assert (file_kind, target_then) == ("file", "old\n"), "the new bytes went to another file first"
    assert len(names_then) == 2
    assert names_then[0].startswith(".data.txt.")
    assert names_then[0].endswith(".tmp")
    assert (dir_kind, target_after, names_after) == ("dir", "new\n", ["data.txt"])


def test_a_directory_that_cannot_be_synced_is_not_an_error_but_other_failures_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    failure = [errno.EINVAL]

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(failure[0], os.strerror(failure[0]))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    replace_file(tmp_path / "a.txt", b"a")
    assert (tmp_path / "a.txt").read_bytes() == b"a"
    failure[0] = errno.EIO
    with pytest.raises(OSError, match=os.strerror(errno.EIO)):
        replace_file(tmp_path / "b.txt", b"b")


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o751)
    replace_file(target, b"new", new_mode=0o600)
    assert mode_of(target) == 0o751


def test_a_new_file_gets_new_mode_whatever_the_umask(tmp_path: Path) -> None:
    old_umask = os.umask(0o077)
    try:
        replace_file(tmp_path / "agent.toml", b"x", new_mode=0o644)
    finally:
        os.umask(old_umask)
    assert mode_of(tmp_path / "agent.toml") == 0o644


def test_a_new_file_without_new_mode_gets_the_umask_default(tmp_path: Path) -> None:
    old_umask = os.umask(0o027)
    try:
        replace_file(tmp_path / "notes.txt", b"x")
    finally:
        os.umask(old_umask)
    assert mode_of(tmp_path / "notes.txt") == 0o640


def test_a_fixed_mode_wins_over_the_old_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "s1.json"
    target.write_text("old")
    target.chmod(0o644)
    replace_file(target, b"new", mode=0o600)
    assert mode_of(target) == 0o600


def test_backup_keeps_the_previous_version_and_a_first_write_has_none(tmp_path: Path) -> None:
    target = tmp_path / "s1.json"
    replace_file(target, b"one", backup=True)
    assert names(tmp_path) == ["s1.json"]
    replace_file(target, b"two", backup=True)
    replace_file(target, b"three", backup=True)
    assert target.read_bytes() == b"three"
    assert (tmp_path / "s1.json.bak").read_bytes() == b"two"
    assert names(tmp_path) == ["s1.json", "s1.json.bak"]


def test_the_backup_is_copied_with_its_mode_where_there_are_no_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def link(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", link)
    target = tmp_path / "agent.toml"
    target.write_text("first")
    target.chmod(0o640)
    replace_file(target, b"second", backup=True)
    assert (tmp_path / "agent.toml.bak").read_bytes() == b"first"
    assert mode_of(tmp_path / "agent.toml.bak") == 0o640
    assert names(tmp_path) == ["agent.toml", "agent.toml.bak"]


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    link = tmp_path / "f.txt"
    link.symlink_to(outside)
    replace_file(link, b"new")
    assert outside.read_text() == "outside"
    assert not link.is_symlink()
    assert link.read_bytes() == b"new"


def test_with_a_directory_descriptor_every_step_goes_through_it(tmp_path: Path) -> None:
    checked = tmp_path / "checked"
    checked.mkdir()
    (checked / "f.txt").write_text("old")
    dir_fd = os.open(checked, os.O_RDONLY)
    try:
        checked.rename(tmp_path / "moved")  # the path no longer leads there: the descriptor still does
        replace_file("f.txt", b"new", dir_fd=dir_fd, backup=True)
    finally:
        os.close(dir_fd)
    assert names(tmp_path / "moved") == ["f.txt", "f.txt.bak"]
    assert (tmp_path / "moved" / "f.txt").read_bytes() == b"new"
    assert (tmp_path / "moved" / "f.txt.bak").read_bytes() == b"old"


def test_a_long_name_still_gets_a_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / ("n" * 250)
    replace_file(target, b"x", backup=True)
    replace_file(target, b"y", backup=True)
    assert target.read_bytes() == b"y"


def test_create_publishes_once_and_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "out-1"
    assert create_file(target, b"first", mode=0o600) is True
    assert create_file(target, b"second", mode=0o600) is False
    assert target.read_bytes() == b"first"
    assert mode_of(target) == 0o600
    assert names(tmp_path) == ["out-1"]


def test_create_renames_where_there_are_no_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def link(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", link)
    assert create_file(tmp_path / "out-1", b"first") is True
    assert create_file(tmp_path / "out-1", b"second") is False
    assert (tmp_path / "out-1").read_bytes() == b"first"
    assert names(tmp_path) == ["out-1"]


def test_temporary_files_finds_the_leftovers_of_one_name_only(tmp_path: Path) -> None:
    for name in (".s1.json.abcd1234.tmp", ".s1.json.bak.0123abcd.tmp", ".s10.json.abcd1234.tmp", "s1.json"):
        (tmp_path / name).write_text("x")
    found = sorted(p.name for p in temporary_files(tmp_path / "s1.json"))
    assert found == [".s1.json.abcd1234.tmp", ".s1.json.bak.0123abcd.tmp"]
    assert temporary_files(tmp_path / "missing" / "s1.json") == []


def test_concurrent_writes_with_backups_of_one_target_leave_only_the_target_and_its_backup(tmp_path: Path) -> None:
    import threading

    target = tmp_path / "data.txt"
    target.write_bytes(b"first")
    contents = [f"writer {n}".encode() for n in range(8)]
    for _ in range(5):
        barrier = threading.Barrier(len(contents))

        def write(data: bytes, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            replace_file(target, data, backup=True)

        threads = [threading.Thread(target=write, args=(data,)) for data in contents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert names(tmp_path) == ["data.txt", "data.txt.bak"]
    assert target.read_bytes() in contents
    assert (tmp_path / "data.txt.bak").read_bytes() in contents
