"""The lock every change of a configuration file is made under: one writer at a time, threads and processes alike.

Why an ``flock`` on the file's directory, and not a library such as ``filelock``:

* A lock on the configuration file itself would not work: every write replaces the file (a new inode,
  :mod:`tether.atomic`), so two writers could each hold a lock on a different version of the same name.
* A lock file next to it (what ``filelock`` locks) would stay in the directory forever: removing a lock file
  that another process may have just opened is a race, so ``filelock``'s Unix lock leaves it, and a project's
  root (often under version control) would gain a ``.agent.toml.lock``. It would also be a new dependency.
* The directory stays the same inode while files in it are replaced, and locking it creates nothing. ``flock``
  locks belong to an open file description, so two threads of one process opening the directory exclude each
  other as two processes do; the kernel drops the lock when its holder exits or dies, so a crashed writer
  never blocks the next one.

The cost: changes of two configuration files in one directory wait for each other (they take milliseconds).
Where ``fcntl`` does not exist (Windows), or the file system cannot lock (some network mounts answer ``ENOLCK``),
the lock is one lock per process: updates are safe between threads there, not between processes.

A writer that cannot get the lock within ``timeout`` seconds (another one stopped while holding it) gets
``config_invalid`` naming the file, and the file is left as it is.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tether.config.issues import Issue, fail

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_TIMEOUT = 30.0
"""Seconds a change waits for the lock before giving up."""
_FIRST_WAIT, _LONGEST_WAIT = 0.001, 0.05
"""Seconds between attempts to take a held lock: doubling from the first to the longest."""
_PROCESS_LOCK = threading.Lock()
"""The lock where ``fcntl`` is missing."""
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EBADF, errno.EOPNOTSUPP, errno.EINVAL})
"""What ``flock`` answers where the file system cannot lock (some network file systems)."""
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


@contextmanager
def update_lock(path: str | os.PathLike[str], *, timeout: float = LOCK_TIMEOUT, create: bool = True) -> Iterator[None]:
    """Hold the update lock of the configuration file ``path`` (a link is followed, as writes follow it) for
    the block. Its directory is created when missing (the file is about to be written there); unless not
    ``create``: then a missing directory means a missing file, which the block reports, and it runs unlocked."""
    directory = Path(os.path.realpath(path)).parent
    if fcntl is None:  # pragma: no cover - Windows
        with _process_lock(path, timeout):
            yield
        return
    fd = _open_directory(directory, path, create)
    if fd is None:
        yield  # no directory, so no file to change: the block finds it missing and says so
        return
    try:
        if _acquire(fd, path, timeout):
            yield
        else:
            with _process_lock(path, timeout):
                yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def _process_lock(path: str | os.PathLike[str], timeout: float) -> Iterator[None]:
    """The lock between the threads of this process, where the file system gives none between processes."""
    if not _PROCESS_LOCK.acquire(timeout=timeout):
        raise _held(path, timeout)
    try:
        yield
    finally:
        _PROCESS_LOCK.release()


def _open_directory(directory: Path, path: str | os.PathLike[str], create: bool) -> int | None:
    """A descriptor of ``directory`` (made first when ``create``); ``None`` when it is missing and not made."""
    try:
        if create:
            directory.mkdir(parents=True, exist_ok=True)
        return os.open(directory, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        if not create:
            return None
        raise _unwritable(path, directory, os.strerror(errno.ENOENT)) from None
    except OSError as error:
        where = error.filename if isinstance(error.filename, str) else str(directory)
        raise _unwritable(path, Path(where), error.strerror or str(error)) from None


def _unwritable(path: str | os.PathLike[str], where: Path, reason: str) -> Exception:
    return fail([Issue("", f"cannot be written ({reason}: {where}); it is unchanged", str(path))])


def _acquire(fd: int, path: str | os.PathLike[str], timeout: float) -> bool:
    """Take the exclusive lock on ``fd``, trying again with growing waits until ``timeout``; ``False`` when the
    file system has no such locks (``ENOLCK``, or ``EBADF`` from an NFS mount emulating them)."""
    assert fcntl is not None
    deadline = time.monotonic() + timeout
    wait = _FIRST_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise _held(path, timeout) from None
            time.sleep(wait)
            wait = min(wait * 2, _LONGEST_WAIT)
        except OSError as error:
            if error.errno not in _NO_LOCKS:
                raise
            return False


def _held(path: str | os.PathLike[str], timeout: float) -> Exception:
    problem = f"cannot be changed: another change in its directory held the lock for {timeout:g} s; it is unchanged"
    return fail([Issue("", problem, str(path))])
