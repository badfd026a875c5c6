"""Owner-only storage: the directories and files a store creates are readable by their owner alone.

A conversation can hold secrets (keys pasted into a prompt, files a tool read), so the file and SQLite stores
create what they own with mode 0700 (directories) and 0600 (files) whatever the process's umask, and tighten
a database file found readable by others. Directories the store did not create (an existing parent, the
working directory) are left as they are: changing them would surprise their owner.

Reading is careful too: :func:`read_regular` opens without following a symbolic link and refuses anything
that is not a regular file (a FIFO would block forever, ``/dev/zero`` never ends).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tether.errors import SessionInvalid

PRIVATE_FILE = 0o600
PRIVATE_DIRECTORY = 0o700


def make_private_directory(directory: Path) -> None:
    """Create ``directory`` and any missing parents, each created one with mode 0700."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=PRIVATE_DIRECTORY)
        except FileExistsError:
            continue  # created meanwhile by someone else: theirs, left as it is
        os.chmod(path, PRIVATE_DIRECTORY)  # mkdir's mode is cut by the umask


def tighten(path: Path) -> None:
    """Make an existing file owner-only if group or others may read or write it (and we may change it)."""
    try:
        mode = os.stat(path, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode) and mode & 0o077:
        os.chmod(path, stat.S_IMODE(mode) & 0o700)


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists; an existing one is tightened."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
    except FileExistsError:
        tighten(path)
        return
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)


def read_regular(path: Path, source: str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, a regular file, read without following a symbolic link.

    ``FileNotFoundError`` when there is none; ``SessionInvalid`` naming ``source`` when it is a link, a
    directory, a FIFO, a device or anything else that is not a regular file, or larger than ``max_bytes``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError:
        if os.path.islink(path) or os.path.isdir(path):
            raise SessionInvalid(f"{source}: not a regular file (a link or a directory)") from None
        raise
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise SessionInvalid(f"{source}: not a regular file")
    if max_bytes is not None and status.st_size > max_bytes:
        os.close(fd)
        raise SessionInvalid(f"{source}: {status.st_size} bytes, more than a store reads ({max_bytes})")
    with os.fdopen(fd, "rb") as file:
        return file.read() if max_bytes is None else file.read(max_bytes + 1)
