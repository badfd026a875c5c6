"""Workspace: the directory the built-in tools may touch, and the checks that keep them inside it.

Every path a file tool receives goes through :meth:`Workspace.resolve`: it is joined to the root (unless
absolute), resolved with ``os.path.realpath`` (every ``..`` and every symlink in every component, parents
included) and refused with :class:`~tether.errors.PermissionDenied` -- which the model reads as a
``permission_denied`` error result -- when the result is not the root or below it, when it still ends in a
symlink (a loop), or when it exists and is neither a regular file nor a directory (devices, FIFOs, sockets:
reading ``/dev/zero`` or an unconnected FIFO would never end). A path that does not exist yet is fine, as
long as where it would be created is inside.

Checking a path and then opening it leaves a window in which the path can change (check-then-open). What is
closed, and what is not:

- **The final component.** Files are opened with ``O_NOFOLLOW`` on the resolved path, which has no symlink
  left in it: if the last component was swapped for a symlink after the check, the open fails and the call
  is refused. Reads also pass ``O_NONBLOCK``, so a FIFO swapped in cannot hang the open, and the opened
  descriptor must be a regular file (``fstat``). Writes rename a temporary file over the final component
  through a descriptor of its directory (``renameat``), which replaces a swapped-in symlink itself and never
  writes through it.
- **A parent directory** swapped for a symlink (or moved) after the check is not stopped by ``O_NOFOLLOW``.
  It is caught *after* the open, before any byte is read or written: on Linux the real location of the open
  descriptor is read back from ``/proc/self/fd`` and must be inside the root. Elsewhere the descriptor's
  device and inode are compared with a fresh ``stat`` of the checked path, which narrows the window without
  closing it.
- **Not closed:** a hard link inside the workspace to a file outside it (a path cannot tell; hard links need
  the same file system and write access to the target's directory), and anything done by a process with
  its own access to the files -- the ``bash`` tool included, which is not confined by this class at all.

A :class:`Workspace` also remembers which files the agent has read through it, so that ``write`` can refuse
to overwrite a file the model has never seen. The memory belongs to the instance: give each run its own
``Workspace`` (or call :meth:`Workspace.forget_reads`) for per-run tracking.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from pathlib import Path
from typing import Literal

from tether.errors import ConfigInvalid, PermissionDenied, ToolError

__all__ = ["Access", "Workspace"]

Access = Literal["read", "write"]
"""What a built-in tool does to the workspace: only looks (``read``) or may change it (``write``)."""

_PROC_FD = "/proc/self/fd"
_HAVE_PROC_FD = sys.platform.startswith("linux") and os.path.isdir(_PROC_FD)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class Workspace:
    """A root directory; the file tools built for it resolve every path against it and stay inside it."""

    __slots__ = ("_lock", "_read", "root")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ConfigInvalid(f"workspace root {os.fspath(root)!r} is not an existing directory")
        self.root = Path(real)
        """The root, fully resolved (no symlink in it)."""
        self._read: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # --- paths ---------------------------------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real absolute path ``path`` names, checked; raises ``PermissionDenied`` when it is refused."""
        raw = os.fspath(path)
        if not raw.strip():
            raise ToolError("The path is empty; give a path relative to the workspace root.")
        if "\0" in raw:
            raise PermissionDenied(f"The path {raw!r} contains a NUL character.")
        joined = os.path.join(self.root, raw)  # an absolute ``raw`` replaces the root
        real = os.path.realpath(joined)
        if not self.contains(real):
            raise PermissionDenied(self._outside_message(raw, joined, real))
        if os.path.realpath(real) != real:
            # realpath gives up at a symlink loop and normalizes the rest lexically, so a ``..`` after the
            # loop may have climbed out of a symlink it never resolved: resolving again shows it.
            raise PermissionDenied(f"Refused: {raw!r} goes through a symlink that cannot be resolved (a loop).")
        self._check_kind(raw, real)
        return Path(real)

    def contains(self, real_path: str | os.PathLike[str]) -> bool:
        """Whether an already resolved path is the root or below it."""
        real = os.fspath(real_path)
        root = str(self.root)
        return real == root or real.startswith(root if root.endswith(os.sep) else root + os.sep)

    def display(self, real_path: str | os.PathLike[str]) -> str:
        """A resolved path as the model should see it: relative to the root."""
        return os.path.relpath(os.fspath(real_path), self.root)

    def _outside_message(self, raw: str, joined: str, real: str) -> str:
        lexical = os.path.normpath(joined)
        if self.contains(lexical):  # only a symlink can have led outside
            return (
                f"Refused: {raw!r} goes through a symlink that leads outside the workspace (to {real}). "
                "Only files inside the workspace can be used."
            )
        return (
            f"Refused: {raw!r} is outside the workspace ({self.root}). "
            "Use a path relative to the workspace root, without '..' leading out of it."
        )

    def _check_kind(self, raw: str, real: str) -> None:
        try:
            mode = os.lstat(real).st_mode
        except FileNotFoundError:
            return  # not there yet: fine, it would be created inside
        except NotADirectoryError:
            raise ToolError(f"{raw!r}: a component of the path is a file, not a directory.") from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise PermissionDenied(f"Refused: {raw!r} goes through a symlink loop.") from None
            raise ToolError(f"{raw!r} cannot be examined: {error.strerror or error}.") from None
        if stat.S_ISLNK(mode):  # realpath leaves a symlink only when it cannot resolve it: a loop
            raise PermissionDenied(f"Refused: {raw!r} is a symlink that cannot be resolved (a loop).")
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise PermissionDenied(
                f"Refused: {raw!r} is a {_kind_name(mode)}, not a regular file; only files and directories can be used."
            )

    # --- opening -------------------------------------------------------------------------------------------

    def open_file(self, real_path: Path, flags: int = os.O_RDONLY) -> int:
        """Open a resolved regular file with ``O_NOFOLLOW`` and check what was opened; returns the fd."""
        extra = _O_NOFOLLOW | _O_CLOEXEC | (_O_NONBLOCK if flags & os.O_ACCMODE == os.O_RDONLY else 0)
        name = self.display(real_path)
        try:
            fd = os.open(real_path, flags | extra)
        except FileNotFoundError:
            raise ToolError(f"{name!r} does not exist.") from None
        except IsADirectoryError:
            raise ToolError(f"{name!r} is a directory, not a file.") from None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK):  # the final component is (now) a symlink
                raise PermissionDenied(f"Refused: {name!r} became a symlink after it was checked.") from None
            raise ToolError(f"{name!r} cannot be opened: {error.strerror or error}.") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                if stat.S_ISDIR(mode):
                    raise ToolError(f"{name!r} is a directory, not a file.")
                raise PermissionDenied(f"Refused: {name!r} is a {_kind_name(mode)}, not a regular file.")
            self._verify_open(fd, real_path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_directory(self, real_path: Path) -> int:
        """Open a resolved directory (to create and rename files in it) and check what was opened."""
        name = self.display(real_path)
        try:
            fd = os.open(real_path, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
        except FileNotFoundError:
            raise ToolError(f"The directory {name!r} does not exist.") from None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK) or os.path.islink(real_path):
                raise PermissionDenied(f"Refused: {name!r} became a symlink after it was checked.") from None
            if error.errno == errno.ENOTDIR:
                raise ToolError(f"{name!r} is not a directory.") from None
            raise ToolError(f"The directory {name!r} cannot be opened: {error.strerror or error}.") from None
        try:
            self._verify_open(fd, real_path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _verify_open(self, fd: int, real_path: Path) -> None:
        """Re-check, after the open, that the descriptor is inside the root (a parent may have been swapped)."""
        name = self.display(real_path)
        if _HAVE_PROC_FD:
            try:
                where = os.readlink(f"{_PROC_FD}/{fd}")
            except OSError:
                where = None
            if where is not None:
                if not self.contains(where.removesuffix(" (deleted)")):
                    raise PermissionDenied(f"Refused: {name!r} was moved outside the workspace while being opened.")
                return
        opened = os.fstat(fd)
        try:
            current = os.stat(real_path, follow_symlinks=False)
        except OSError:
            raise ToolError(f"{name!r} changed while it was being opened.") from None
        if (opened.st_dev, opened.st_ino) != (current.st_dev, current.st_ino):
            raise PermissionDenied(f"Refused: {name!r} changed while it was being opened.")

    # --- what the agent has read -----------------------------------------------------------------------------

    def note_read(self, real_path: Path) -> None:
        """Remember that the agent has seen this file (read it, or wrote it itself)."""
        with self._lock:
            self._read.add(os.fspath(real_path))

    def was_read(self, real_path: Path) -> bool:
        """Whether the agent has seen this file through this workspace."""
        with self._lock:
            return os.fspath(real_path) in self._read

    def forget_reads(self) -> None:
        """Forget every file read so far, as if a new run started."""
        with self._lock:
            self._read.clear()


def _kind_name(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special file"
