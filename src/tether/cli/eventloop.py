"""The event loop the CLI's long-running commands (``tether run``, ``tether chat``) run on.

uvloop when it is installed (``pip install tether[speed]``; not on Windows, which it does not support), asyncio's
own loop otherwise or with ``TETHER_LOOP=asyncio``. uvloop is imported here, when such a command starts, never
by ``tether --help`` or ``import tether``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def loop_name(env: Mapping[str, str] | None = None) -> str:
    """``"uvloop"`` or ``"asyncio"``: the loop :func:`run` will use."""
    chosen = (os.environ if env is None else env).get("TETHER_LOOP", "").lower()
    if chosen == "asyncio" or sys.platform == "win32":
        return "asyncio"
    try:
        import uvloop  # noqa: F401 - installed?
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T], env: Mapping[str, str] | None = None) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_name` names."""
    if loop_name(env) == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
