"""The configuration of one working directory as a service: read once, re-read when a file changes, changed safely.

A process that lives long (a chat, a Python session, a program embedding tether) asks for its configuration
many times; reading, parsing and validating the files every time costs milliseconds each, and would still not
tell it when they change. :class:`ConfigService` does both:

* **Cached reads.** Each file (the user's ``config.toml``, the project's ``agent.toml`` or the ``--config``
  file) is read and parsed once, and again only when its signature changes: device, inode, size, modification
  and change times (``os.stat``). Writers that replace the file (tether, most editors) give it a new inode; one
  that rewrites it in place changes its times. The validated configuration is kept for the same files, the
  same ``TETHER_*`` variables and the same flags. The file is looked at (``stat``) before it is read, so a change
  racing with a read is seen by the next one. What a signature cannot see: an in-place rewrite of the same
  length within the file system's timestamp granularity (a few milliseconds) of the read, until the next change.
* **Safe updates.** :meth:`ConfigService.set` (``tether config set``, the chat's ``--save``) goes through
  :func:`tether.config.edit.set_value`: under the update lock (:mod:`tether.config.lock`) it re-reads the file,
  edits it with tomlkit (comments and layout kept), validates the result and replaces the file atomically (no
  copy left beside it), so concurrent updates by threads or processes each keep the others' keys and leave no temporary
  file.

A service is safe to share between threads. Its cache is its own: two services of one directory each read the
files once. Reading never imports tomlkit; only a change does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from tether.config.load import ENV_PREFIX, Layer, Loaded, ProjectFile, loaded_from, project_file, read_file, user_path
from tether.config.schema import Config

Signature = tuple[int, int, int, int, int]
"""A file's device, inode, size, modification and change times (ns): what changes when the file does."""

_FileKey = tuple[Path, Signature | None]
_LoadedKey = tuple[_FileKey, _FileKey, str | None, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


def signature(path: Path) -> Signature | None:
    """``path``'s signature (a link is followed, as reading follows it); ``None`` when there is no such file."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class ConfigService:
    """The configuration of ``cwd`` under ``env`` (``os.environ``), the project's file being ``config_file``
    (``--config``) when given: see the module docstring."""

    def __init__(
        self,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.cwd = Path.cwd() if cwd is None else Path(cwd)
        self.env = os.environ if env is None else env
        self.config_file = config_file
        self._guard = threading.Lock()
        self._files: dict[Path, tuple[Signature | None, Layer | None]] = {}
        self._loaded: tuple[_LoadedKey, Loaded] | None = None

    @property
    def project(self) -> ProjectFile:
        """The project's file: ``config_file``, else ``TETHER_CONFIG``, else ``./agent.toml``."""
        return project_file(self.cwd, self.env, self.config_file)

    @property
    def user_file(self) -> Path:
        """The user's file (``$XDG_CONFIG_HOME/tether/config.toml``, else under ``~/.config``)."""
        return user_path(self.env)

    def load(self, flags: Mapping[str, object] | None = None) -> Loaded:
        """The validated configuration with its layers, ``flags`` on top (as :func:`tether.config.load`), read
        from the files only when they changed; ``ConfigInvalid`` naming key and place."""
        project = self.project
        user_layer, user_key = self._file(self.user_file, None)
        project_layer, project_key = self._file(project.path, project.given_by)
        key: _LoadedKey = (user_key, project_key, project.given_by, _variables(self.env), _flags_key(flags))
        with self._guard:
            if self._loaded is not None and self._loaded[0] == key:
                return self._loaded[1]
        loaded = loaded_from([user_layer, project_layer], self.cwd, self.env, flags)
        with self._guard:
            self._loaded = (key, loaded)
        return loaded

    def config(self, flags: Mapping[str, object] | None = None) -> Config:
        """The effective configuration (:meth:`load`'s)."""
        return self.load(flags).config

    def set(self, key: str, value: str, *, user: bool = False) -> Path:
        """Set dotted ``key`` to ``value`` (a TOML value when it reads as one, else a string) in the project's
        file, or the user's with ``user``, and return that file's path. The project's file is validated with
        the user's below it; an invalid result raises ``ConfigInvalid`` and changes nothing."""
        from tether.config.edit import set_value  # tomlkit: only for a change

        path = self.user_file if user else self.project.path
        below = [] if user else self._below()
        try:
            set_value(path, key, value, below=below, env=self.env)
        finally:
            self.forget(path)
        return path

    def init(self, *, user: bool = False, force: bool = False) -> Path:
        """Write the commented default file as the project's file (the user's with ``user``); ``FileExistsError``
        when one is there, unless ``force`` (the old one is then kept as ``<name>.bak``)."""
        from tether.config.edit import init_file

        path = self.user_file if user else self.project.path
        try:
            init_file(path, force=force)
        finally:
            self.forget(path)
        return path

    def forget(self, path: Path | None = None) -> None:
        """Drop what is cached of ``path`` (of every file when ``None``): the next read reads it again."""
        with self._guard:
            if path is None:
                self._files.clear()
            else:
                self._files.pop(path, None)
            self._loaded = None

    def _below(self) -> list[Layer]:
        layer, _ = self._file(self.user_file, None)
        return [] if layer is None else [layer]

    def _file(self, path: Path, given_by: str | None) -> tuple[Layer | None, _FileKey]:
        """The layer of the file at ``path`` and the key it is cached under, read only when it changed."""
        seen = signature(path)
        with self._guard:
            cached = self._files.get(path)
        if cached is not None and cached[0] == seen:
            return cached[1], (path, seen)
        layer = read_file(path, given_by=given_by)  # raises for a named file that is missing or broken
        with self._guard:
            self._files[path] = (seen, layer)
        return layer, (path, seen)


def _variables(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``TETHER_*`` variables: a change of one is a change of the configuration."""
    return tuple(sorted((name, value) for name, value in env.items() if name.startswith(ENV_PREFIX)))


def _flags_key(flags: Mapping[str, object] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key, repr(value)) for key, value in (flags or {}).items() if value is not None))
