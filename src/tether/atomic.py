"""Whole-file writes that a crash cannot tear: the one rule every writer of a file in tether follows.

The contract
------------
* **Old or new, never half.** :func:`replace_file` writes the new content to a temporary file in the
  target's directory, ``.<name>.<8 hex digits>.tmp``, created exclusively and never through a link,
  writes it whole, fsyncs it, renames it over the target (``os.replace``) and fsyncs the directory, so the
  rename itself survives a power cut. Whatever point a crash hits, the target holds the old content or the
  new one. On any failure before the rename the temporary file is removed and the target is untouched.
* **Permissions.** The temporary file gets its final mode before a byte is written: ``mode`` when the
  caller fixes one (private data such as sessions: ``0o600`` whatever the umask); else the old file's
  permission bits when the target is a regular file; else ``new_mode``; ``None`` there leaves the mode a new
  file gets from the umask, as ``open`` would.
* **Backup** (``backup=True``). Before the rename, ``<name>.bak`` becomes the previous version, atomically
  too: the old file is hard-linked to a temporary name (copied and fsynced where the file system has no hard
  links) and renamed over the backup. A first write has nothing to keep. Concurrent writes of one target each
  leave nothing behind but the target and its backup (one of the versions they replaced).
* **Links.** A symbolic link at the target is replaced, not followed; callers that mean to write a link's
  target resolve the path first.
* **A checked directory** (``dir_fd``). A caller that has opened and checked the directory passes its
  descriptor and a bare name: every step then goes through it (``openat``, ``renameat``), so the write lands
  in the directory that was checked even if a path component is swapped meanwhile.
* **Publish once.** :func:`create_file` is the same write for content that is never rewritten: it is linked
  into place only when the name is free, so the file is whole or absent and a present one stays as it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from pathlib import Path

__all__ = ["BACKUP_SUFFIX", "create_file", "fsync_directory", "replace_file", "temporary_files"]

BACKUP_SUFFIX = ".bak"
"""The backup of ``<name>`` is ``<name>.bak``."""
_NAME_KEPT = 200
"""Characters of the target's name kept in a temporary file's name (a name may have 255 at most)."""
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_UNSYNCABLE = (errno.EINVAL, errno.ENOTSUP, errno.EBADF)
"""What ``fsync`` of a directory answers where the file system cannot sync one: not an error to report."""


def replace_file(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    dir_fd: int | None = None,
    mode: int | None = None,
    new_mode: int | None = None,
    backup: bool = False,
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see the module docstring).

    With ``dir_fd``, ``path`` is a name in that directory.
    """
    target = os.fspath(path)
    if mode is None:
        mode = _regular_mode(target, dir_fd)
    if mode is None:
        mode = new_mode
    temporary = _write_temporary(target, data, dir_fd, mode)
    try:
        if backup:
            _keep_backup(target, dir_fd)
        os.replace(temporary, target, **_between(dir_fd))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, **_at(dir_fd))
        raise
    _sync_directory_of(target, dir_fd)


def create_file(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> bool:
    """Publish ``data`` at ``path`` unless something is there already; ``True`` when this call wrote it.

    The file is written and fsynced under a temporary name, then hard-linked into place (renamed, where the
    file system has no hard links and the name is still free), so it is whole or absent.
    """
    target = os.fspath(path)
    temporary = _write_temporary(target, data, None, mode)
    try:
        try:
            os.link(temporary, target)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links
            if os.path.lexists(target):
                return False
            os.rename(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    _sync_directory_of(target, None)
    return True


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make renames in ``directory`` durable, where the platform can (Windows cannot open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        _fsync_directory_fd(fd)
    finally:
        os.close(fd)


def temporary_files(path: str | os.PathLike[str]) -> list[Path]:
    """The temporary files that writes of ``path`` (and of its backup) left behind, crashed mid-way."""
    target = Path(path)
    names = (target.name[:_NAME_KEPT], (target.name + BACKUP_SUFFIX)[:_NAME_KEPT])
    pattern = re.compile("|".join(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp" for name in names))
    try:
        found = os.listdir(target.parent)
    except FileNotFoundError:
        return []
    return [target.with_name(name) for name in found if pattern.fullmatch(name)]


def _temporary_name(target: str) -> str:
    head, name = os.path.split(target)
    return os.path.join(head, f".{name[:_NAME_KEPT]}.{secrets.token_hex(4)}.tmp")


def _write_temporary(target: str, data: bytes, dir_fd: int | None, mode: int | None) -> str:
    """A new temporary file next to ``target`` holding ``data``, fsynced, with ``mode``; its name."""
    temporary = _temporary_name(target)
    fd = os.open(temporary, _CREATE, 0o666 if mode is None else 0o600, **_at(dir_fd))
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, **_at(dir_fd))
        raise
    return temporary


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _regular_mode(target: str, dir_fd: int | None) -> int | None:
    """The permission bits of ``target`` when it is a regular file (not a link, not absent)."""
    try:
        info = os.stat(target, **_at(dir_fd), follow_symlinks=False)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None


def _keep_backup(target: str, dir_fd: int | None) -> None:
    """Make ``<target>.bak`` the current version of ``target`` (if there is one), atomically."""
    backup = target + BACKUP_SUFFIX
    staging = _temporary_name(backup)
    try:
        try:
            os.link(target, staging, **_between(dir_fd), follow_symlinks=False)
        except FileNotFoundError:
            return  # the first write: nothing to keep
        except OSError as error:
            if error.errno == errno.EEXIST:
                raise
            _copy_synced(target, staging, dir_fd)  # a file system without hard links
        os.replace(staging, backup, **_between(dir_fd))
    except FileNotFoundError:
        return  # removed meanwhile
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging, **_at(dir_fd))
        raise
    # When the backup already is the file being kept (a concurrent write of the same target kept it first), the
    # staging link and the backup are two links of one inode, and POSIX makes such a rename do nothing and
    # succeed: the staging name stays. Removing it then loses nothing, the backup holds the same content.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staging, **_at(dir_fd))


def _copy_synced(source: str, target: str, dir_fd: int | None) -> None:
    reader = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), **_at(dir_fd))
    with os.fdopen(reader, "rb") as file:
        data = file.read()
    mode = stat.S_IMODE(os.stat(source, **_at(dir_fd), follow_symlinks=False).st_mode)
    writer = os.open(target, _CREATE, 0o600, **_at(dir_fd))
    with os.fdopen(writer, "wb") as file:
        os.fchmod(writer, mode)
        file.write(data)
        file.flush()
        os.fsync(writer)


def _at(dir_fd: int | None) -> dict[str, int]:
    """``dir_fd=`` for an ``os`` call, only when there is one (a plain call otherwise)."""
    return {} if dir_fd is None else {"dir_fd": dir_fd}


def _between(dir_fd: int | None) -> dict[str, int]:
    return {} if dir_fd is None else {"src_dir_fd": dir_fd, "dst_dir_fd": dir_fd}


def _sync_directory_of(target: str, dir_fd: int | None) -> None:
    if dir_fd is None:
        fsync_directory(os.path.dirname(target) or ".")
    else:
        _fsync_directory_fd(dir_fd)


def _fsync_directory_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in _UNSYNCABLE:
            raise
