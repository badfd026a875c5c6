"""The workflow database of ``tether batch`` (and the other commands on durable runs): where it is, and how
it is named on the screen.

Contract: ``--db`` is a ``postgresql://`` URL (one database for many machines), a ``sqlite:///`` URL, or the
path of a SQLite file (relative to the working directory). Without it, the database is the SQLite file
``runs.sqlite`` in tether's state directory (``$XDG_STATE_HOME/tether``, see :mod:`tether.cli.paths`).
Anything else (``mysql://...``) is a ``ConfigInvalid``. A URL's password is never printed: :func:`shown`
masks it, as ``tether config show`` does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tether.cli.paths import state_dir
from tether.errors import ConfigInvalid

DEFAULT_FILE = "runs.sqlite"
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class RunsDatabase:
    """A workflow database: a SQLite file (``path``) or a server's URL (``url``)."""

    path: Path | None = None
    url: str | None = None

    def launch_arguments(self) -> dict[str, object]:
        """The keyword arguments of ``tether.durable.launch`` that open this database."""
        if self.url is not None:
            return {"system_database_url": self.url}
        return {"database": self.path}

    def shown(self) -> str:
        """The database as it may be printed: the file's path, or the URL with its password masked."""
        return str(self.path) if self.url is None else _masked(self.url)


def _masked(url: str) -> str:
    """``url`` with its password masked; the configuration's redactor is loaded only here (it brings the
    configuration's schema, which ``tether runs list`` on a file has no use for)."""
    from tether.config.redact import Redactor

    return Redactor().text(url)


def runs_database(db: str | None, cwd: Path, env: Mapping[str, str]) -> RunsDatabase:
    """The database ``--db`` names (``None``: the default file); see the module docstring."""
    if db is None or db == "":
        return RunsDatabase(path=state_dir(env) / DEFAULT_FILE)
    if db.startswith(_POSTGRES):
        return RunsDatabase(url=db)
    if db.startswith("sqlite:///"):
        db = db.removeprefix("sqlite:///")
    elif _SCHEME.match(db):
        shown = _masked(db)
        raise ConfigInvalid(f"--db {shown}: give a postgresql:// URL, a sqlite:/// URL or a SQLite file's path")
    path = Path(os.path.expanduser(db))
    return RunsDatabase(path=path if path.is_absolute() else cwd / path)
