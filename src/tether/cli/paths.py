"""Where the command line keeps its files, following the XDG base directory spec.

Sessions live in the data directory (``$XDG_DATA_HOME/tether``, else ``~/.local/share/tether``); the input
histories of ``tether chat`` and ``tether py`` in the state directory (``$XDG_STATE_HOME/tether``, else
``~/.local/state/tether``); the response cache (``--cache``) in the cache directory (``$XDG_CACHE_HOME/tether``,
else ``~/.cache/tether``). A variable that is empty or not an absolute path is ignored, as the spec says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def _base(env: Mapping[str, str], variable: str, fallback: str) -> Path:
    value = env.get(variable, "")
    if value and os.path.isabs(value):
        return Path(value) / "tether"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / fallback / "tether"


def data_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/tether``, else ``~/.local/share/tether``."""
    return _base(env, "XDG_DATA_HOME", ".local/share")


def state_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/tether``, else ``~/.local/state/tether``."""
    return _base(env, "XDG_STATE_HOME", ".local/state")


def default_session_path(store: str, env: Mapping[str, str]) -> Path:
    """The default place of a session store: ``sessions.db`` (sqlite) or ``sessions/`` (files)."""
    return data_dir(env) / ("sessions.db" if store == "sqlite" else "sessions")


def history_path(env: Mapping[str, str]) -> Path:
    """The chat's input history file."""
    return state_dir(env) / "chat_history"


def py_history_path(env: Mapping[str, str]) -> Path:
    """``tether py``'s input history file (apart from the chat's: Python lines and questions)."""
    return state_dir(env) / "py_history"


def cache_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/tether``, else ``~/.cache/tether``: what can be made again (the response cache)."""
    return _base(env, "XDG_CACHE_HOME", ".cache")
