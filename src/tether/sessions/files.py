"""FileSessionStore: one JSON file per session in a directory.

Layout: ``<dir>/<id>.json`` holds a session; ``<dir>/<id>.json.bak`` the version its last save replaced.
Files named ``.<id>.json.….tmp`` exist only while a save runs (or after a crash in one); ``list`` ignores
them and the next save of that session does not need them.

A save writes the whole session to a temp file in the same directory and fsyncs it, hard-links the current
file to the backup name (copies it where the file system has no hard links), then ``os.replace``\\s the temp
file over ``<id>.json`` and fsyncs the directory. ``<id>.json`` is therefore always a whole file, the old or
the new one, whatever point a crash hits; a failed save removes its temp file and leaves the old one.

A corrupt, truncated or malformed file raises ``SessionInvalid`` naming the file and the problem, and says
when a backup exists. Falling back to the backup is opt-in (``use_backup=True``), since it silently loses
the last save: ``load`` then returns the previous version and logs a warning on ``tether.sessions``.

A session file that is a symbolic link, a directory, a FIFO or anything but a regular file is refused as
``SessionInvalid``, like a corrupt one, and so are files of sessions whose messages cannot be read back.

``delete`` removes the session file, its backup and any temporary file a crashed save of it left behind, so
no copy of the conversation outlives it in the directory.

Files and the directory (when the store creates it) are readable and writable by their owner only,
whatever the umask: a conversation can hold secrets. Every save
rewrites the whole file and ``list`` reads every file: fine for hundreds of sessions of ordinary length;
the SQLite store appends instead and lists from one table.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import errno
import os
import re
import secrets
import tempfile
from pathlib import Path

from tether._logging import get_logger
from tether.errors import SessionInvalid
from tether.sessions import codec
from tether.sessions.base import (
    Session,
    SessionNotFound,
    SessionSummary,
    check_session_id,
    newest_first,
    storable,
    validate_session,
)
from tether.sessions.private import make_private_directory, read_regular

logger = get_logger("tether.sessions")


class FileSessionStore:
    """A :class:`~tether.sessions.base.SessionStore` keeping one JSON file per session in ``directory``.

    The directory is created on the first save. ``use_backup``: when a session file cannot be read, load
    the previous version from ``<id>.json.bak`` instead of raising.
    """

    def __init__(self, directory: str | os.PathLike[str], *, use_backup: bool = False) -> None:
        self.directory = Path(directory)
        self.use_backup = use_backup

    def path_of(self, session_id: str) -> Path:
        """The file of a session (``SessionInvalid`` for an id that is not safe as a file name)."""
        return self.directory / f"{check_session_id(session_id)}.json"

    async def load(self, session_id: str) -> Session:
        path = self.path_of(session_id)
        return await asyncio.to_thread(self._load, session_id, path)

    async def save(self, session: Session) -> None:
        path = self.path_of(session.id)
        await asyncio.to_thread(self._save, session, path)

    async def list(self) -> builtins.list[SessionSummary]:
        return await asyncio.to_thread(self._list)

    async def delete(self, session_id: str) -> None:
        path = self.path_of(session_id)
        await asyncio.to_thread(self._delete, path)

    # --- in the worker thread ---------------------------------------------------------------------------

    def _load(self, session_id: str, path: Path) -> Session:
        try:
            return _read(path, session_id)
        except FileNotFoundError:
            raise SessionNotFound(
                f"no session {session_id!r} in {self.directory}", details={"session_id": session_id}
            ) from None
        except SessionInvalid as error:
            backup = backup_of(path)
            if not self.use_backup:
                if not backup.exists():
                    raise
                raise SessionInvalid(
                    f"{error.message}; the previous version is in {backup} "
                    "(FileSessionStore(..., use_backup=True) loads it)"
                ) from error
            try:
                session = _read(backup, session_id)
            except (OSError, SessionInvalid) as backup_error:
                raise SessionInvalid(f"{error.message}; and the backup cannot be used: {backup_error}") from error
            logger.warning("%s; loaded the previous version from %s instead", error.message, backup)
            return session

    def _save(self, session: Session, path: Path) -> None:
        session = storable(session)
        data = codec.session_to_text(session, f"session {session.id!r}")
        make_private_directory(self.directory)
        write_atomic(path, data)

    def _list(self) -> builtins.list[SessionSummary]:
        try:
            entries = builtins.list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        summaries: builtins.list[SessionSummary] = []
        for entry in entries:
            if not entry.name.endswith(".json") or entry.name.startswith("."):
                continue
            session_id = entry.name.removesuffix(".json")
            try:
                check_session_id(session_id)
                raw = codec.loads(read_regular(Path(entry.path), entry.path), entry.path)
                summaries.append(codec.summary_from_jsonable(raw, entry.path, session_id))
            except FileNotFoundError:
                continue  # deleted while we listed
            except (OSError, SessionInvalid) as error:
                logger.warning("session left out of the list: %s", error)
        return newest_first(summaries)

    def _delete(self, path: Path) -> None:
        # The backup and leftovers first: a crash in between leaves a session without its copies, never a
        # copy alone.
        for leftover in temporary_files_of(path):
            leftover.unlink(missing_ok=True)
        backup_of(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        if self.directory.is_dir():
            fsync_directory(self.directory)


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def temporary_files_of(path: Path) -> builtins.list[Path]:
    """The temporary files saves of ``path`` made and a crash left behind: ``.<name>.XXXXXXXX.tmp`` (a new
    version being written) and ``.<name>.bak.XXXXXXXX.tmp`` (a backup being made), of this name only."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"(?:[a-z0-9_]{8}|bak\.[0-9a-f]{8})\.tmp")
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return []
    return [path.with_name(name) for name in names if pattern.fullmatch(name)]


def _read(path: Path, session_id: str) -> Session:
    source = str(path)
    session = codec.session_from_jsonable(codec.loads(read_regular(path, source), source), source, session_id)
    messages = validate_session(session.messages, source)
    return session if messages is session.messages else dataclasses.replace(session, messages=messages)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably, keeping the old file as ``<name>.bak``."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        _keep_backup(path)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_directory(path.parent)


def _keep_backup(path: Path) -> None:
    """Make ``<name>.bak`` the current version of ``path`` (if there is one), atomically."""
    staging = path.with_name(f".{path.name}.bak.{secrets.token_hex(4)}.tmp")
    try:
        try:
            os.link(path, staging)
        except FileNotFoundError:
            return  # the first save: nothing to keep
        except OSError:
            _copy_synced(path, staging)  # a file system without hard links
        os.replace(staging, backup_of(path))
    except FileNotFoundError:
        return  # deleted meanwhile
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise


def _copy_synced(source: Path, target: Path) -> None:
    with open(source, "rb") as reader:
        data = reader.read()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as writer:
        writer.write(data)
        writer.flush()
        os.fsync(writer.fileno())


def fsync_directory(directory: Path) -> None:
    """Make renames in ``directory`` durable (where the platform can; Windows cannot open directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)
