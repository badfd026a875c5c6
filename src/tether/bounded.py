"""Reading a file a user or a repository names, safely: only a regular file, and only so much of it.

A configuration file, an ``AGENTS.md``, a ``--system @FILE``, a ``--schema`` file or an attachment can be a
symlink to ``/dev/zero`` (read until memory runs out) or a FIFO (opening it waits for a writer forever). The
file is opened without blocking (``O_NONBLOCK``: opening a FIFO returns at once), checked to be a regular file
on the descriptor it was opened as (no race between a check and the open), and read to at most ``limit`` bytes:
:class:`NotRegular` and :class:`TooLarge` say which rule it broke, both ``OSError``s, so a caller's handling of
an unreadable file covers them.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["NotRegular", "TooLarge", "read_bounded"]


class NotRegular(OSError):
    """The path names a directory, a device, a FIFO or a socket, not a regular file."""


class TooLarge(OSError):
    """The file is larger than the reader takes."""


def read_bounded(path: str | os.PathLike[str], limit: int, *, head: bool = False) -> bytes:
    """The bytes of the regular file at ``path``: all of them, or :class:`TooLarge` past ``limit`` bytes (with
    ``head``: its first ``limit`` bytes instead). :class:`NotRegular` for anything but a regular file;
    ``FileNotFoundError`` and the other ``OSError`` s as ``open`` raises them."""
    descriptor = os.open(Path(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, "a directory" if stat.S_ISDIR(mode) else "not a regular file")
        with os.fdopen(descriptor, "rb", closefd=True) as file:
            descriptor = -1
            data = file.read(limit + 1)
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    if len(data) > limit:
        if head:
            return data[:limit]
        raise TooLarge(errno.EFBIG, f"larger than {limit:,} bytes")
    return data
