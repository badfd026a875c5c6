"""FileSessionStore: one JSON file per session in a directory.

Layout: ``<dir>/<id>.json`` holds a session; ``<dir>/<id>.json.bak`` the version its last save replaced.
Files named ``.<id>.json.….tmp`` exist only while a save runs (or after a crash in one); ``list`` ignores
them and the next save of that session does not need them. ``<dir>/<id>.outputs/<ref>`` holds one of the
session's cached tool outputs (``OutputStore``), as UTF-8 text: written to a temporary file, synced, then
linked into place, so it is whole or absent, and never rewritten once there. ``<dir>/<id>.exchanges/<n>.json``
holds one of the session's exchanges (``ExchangeStore``), numbered from ``00000000`` in the order saved and
published the same way.

A save replaces ``<id>.json`` through :func:`tether.atomic.replace_file` with a backup, and outputs are
published by :func:`tether.atomic.create_file`: ``<id>.json`` is always a whole file, the old or the new one,
whatever point a crash hits, and the version it replaced is ``<id>.json.bak``. Saves of one session at once
(threads, processes) need no lock for that: the last rename wins, the file is one of the saved versions whole,
the backup one of the versions they replaced, and no temporary file stays.

A corrupt, truncated or malformed file raises ``SessionInvalid`` naming the file and the problem, and says
when a backup exists. Falling back to the backup is opt-in (``use_backup=True``), since it silently loses
the last save: ``load`` then returns the previous version and logs a warning on ``tether.sessions``.

A session file that is a symbolic link, a directory, a FIFO or anything but a regular file is refused as
``SessionInvalid``, like a corrupt one, and so are files of sessions whose messages cannot be read back.

``delete`` removes the session's outputs and exchanges, then any temporary file a crashed save of it left behind, its
backup and the session file, so no copy of the conversation outlives it in the directory.

Files and the directory (when the store creates it) are readable and writable by their owner only,
whatever the umask: a conversation can hold secrets. Every save
rewrites the whole file and ``list`` reads every file: fine for hundreds of sessions of ordinary length;
the SQLite store appends instead and lists from one table.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from tether._logging import get_logger
from tether.atomic import BACKUP_SUFFIX, create_file, fsync_directory, replace_file, temporary_files
from tether.errors import SessionInvalid
from tether.exchanges import Exchange
from tether.sessions import codec
from tether.sessions.base import (
    MAX_OUTPUT_BYTES,
    Session,
    SessionNotFound,
    SessionSummary,
    check_output_ref,
    check_session_id,
    newest_first,
    storable,
    storable_exchanges,
    storable_output,
    stored_exchange,
    stored_output,
    validate_session,
)
from tether.sessions.private import PRIVATE_FILE, make_private_directory, read_regular

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

    def outputs_of(self, session_id: str) -> Path:
        """The directory of a session's cached tool outputs (``SessionInvalid`` for an unsafe id)."""
        return self.directory / f"{check_session_id(session_id)}.outputs"

    async def save_output(self, session_id: str, ref: str, content: str) -> None:
        folder = self.outputs_of(session_id)
        await asyncio.to_thread(self._save_output, folder, session_id, check_output_ref(ref), content)

    async def load_output(self, session_id: str, ref: str) -> str | None:
        folder = self.outputs_of(session_id)
        return await asyncio.to_thread(self._load_output, folder, check_output_ref(ref))

    def exchanges_of(self, session_id: str) -> Path:
        """The directory of a session's exchanges (``SessionInvalid`` for an unsafe id)."""
        return self.directory / f"{check_session_id(session_id)}.exchanges"

    async def save_exchanges(self, session_id: str, exchanges: Sequence[Exchange]) -> None:
        data = storable_exchanges(session_id, exchanges)
        await asyncio.to_thread(self._save_exchanges, self.exchanges_of(session_id), data)

    async def load_exchanges(self, session_id: str) -> builtins.list[Exchange]:
        return await asyncio.to_thread(self._load_exchanges, self.exchanges_of(session_id))

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
        replace_file(path, data, mode=PRIVATE_FILE, backup=True)

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

    def _save_output(self, folder: Path, session_id: str, ref: str, content: str) -> None:
        data = storable_output(session_id, ref, content)
        path = folder / ref
        if _checked_folder(folder) and os.path.lexists(path):
            return  # written once: the same ref is the same text
        make_private_directory(folder)
        create_file(path, data, mode=PRIVATE_FILE)  # never replaces: a ref already there stays as it is

    def _load_output(self, folder: Path, ref: str) -> str | None:
        if not _checked_folder(folder):
            return None
        path = folder / ref
        try:
            data = read_regular(path, str(path), max_bytes=MAX_OUTPUT_BYTES)
        except FileNotFoundError:
            return None
        return stored_output(ref, data, str(path))

    def _save_exchanges(self, folder: Path, data: builtins.list[bytes]) -> None:
        """Each exchange published as the next number (a number another writer took first is skipped)."""
        if not data:
            return
        if not _checked_folder(folder):
            make_private_directory(folder)
        number = len(_exchange_files(folder))
        for item in data:
            while not create_file(folder / f"{number:08d}.json", item, mode=PRIVATE_FILE):
                number += 1
            number += 1

    def _load_exchanges(self, folder: Path) -> builtins.list[Exchange]:
        if not _checked_folder(folder):
            return []
        return [stored_exchange(read_regular(path, str(path)), str(path)) for path in _exchange_files(folder)]

    def _delete(self, path: Path) -> None:
        # Outputs, exchanges, leftovers and the backup first: a crash in between leaves a session without its
        # copies, never a copy alone.
        stem = path.name.removesuffix(".json")
        for folder in (path.with_name(stem + ".outputs"), path.with_name(stem + ".exchanges")):
            if os.path.islink(folder) or os.path.isfile(folder):
                folder.unlink()
            elif folder.is_dir():
                shutil.rmtree(folder)
        for leftover in temporary_files(path):
            leftover.unlink(missing_ok=True)
        backup_of(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        if self.directory.is_dir():
            fsync_directory(self.directory)


def _checked_folder(folder: Path) -> bool:
    """Whether a session's outputs directory exists; ``SessionInvalid`` when its name is taken by a link or
    anything but a directory (outputs are never read or written through a link)."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(mode):
        raise SessionInvalid(f"{folder}: not a directory (a link or a file); the session's outputs cannot be kept")
    return True


def _exchange_files(folder: Path) -> builtins.list[Path]:
    """A session's exchange files in the order saved (temporary files of a write under way left out)."""
    names = sorted(name for name in os.listdir(folder) if name.endswith(".json") and not name.startswith("."))
    return [folder / name for name in names]


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _read(path: Path, session_id: str) -> Session:
    source = str(path)
    session = codec.session_from_jsonable(codec.loads(read_regular(path, source), source), source, session_id)
    messages = validate_session(session.messages, source)
    return session if messages is session.messages else dataclasses.replace(session, messages=messages)
