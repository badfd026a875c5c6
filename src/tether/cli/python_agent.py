"""``--agent MODULE:ATTR``: an agent defined in Python, named by its module and attribute.

The module is imported with the working directory first on ``sys.path`` (as ``python -m`` would), and the
attribute (dotted for one inside an object: ``team.agents.lead``) read from it. Whatever stops that, and a value
that is not what the command runs, is a ``ConfigInvalid`` naming the spec: the command says it in one line and
exits as for any other configuration problem, never with a traceback.

``tether worker`` and ``tether runs submit`` take an ``Agent`` or a ``DurableAgent`` (:func:`python_agent`);
``tether run`` and ``tether chat`` run an ``Agent`` in this process (:func:`plain_agent`): a ``DurableAgent``
is refused there rather than run without the durability it was made for.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.agent import Agent
from tether.errors import ConfigInvalid, TetherError

if TYPE_CHECKING:
    from tether.durable import DurableAgent

DURABLE_ENGINE = "tether.durable.dbos_engine"
"""The module of ``DurableAgent``: a value can be one only when the user's module has loaded it."""


def python_agent(spec: str, cwd: Path) -> Agent[Any, Any] | DurableAgent:
    """The ``Agent`` or ``DurableAgent`` that ``spec`` (``module:attr``) names; ``ConfigInvalid`` otherwise."""
    value = _imported(spec, cwd)
    if isinstance(value, Agent) or _is_durable(value):
        return value  # type: ignore[return-value]  # _is_durable checked it
    raise ConfigInvalid(f"--agent {spec!r} is a {type(value).__name__}, not a tether Agent or DurableAgent")


def plain_agent(spec: str, cwd: Path) -> Agent[Any, Any]:
    """The ``Agent`` that ``spec`` names, for a run in this process; ``ConfigInvalid`` for anything else (a
    ``DurableAgent`` included), or for an agent whose runs need ``deps``, which a command cannot give."""
    value = python_agent(spec, cwd)
    if not isinstance(value, Agent):
        raise ConfigInvalid(
            f"--agent {spec!r} is a DurableAgent: tether run and tether chat run an Agent in this process, not "
            "durably; name the Agent it wraps, or give it to tether runs submit and tether worker"
        )
    if value.deps_type is not None:
        raise ConfigInvalid(
            f"--agent {spec!r} needs deps of type {getattr(value.deps_type, '__name__', value.deps_type)} for "
            "each run (deps_type=), which the command line cannot give"
        )
    return value


def _imported(spec: str, cwd: Path) -> object:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigInvalid(f"--agent {spec!r}: give it as module:attribute, e.g. myagents:support")
    if str(cwd) not in sys.path:
        sys.path.insert(0, str(cwd))
    try:
        value: object = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigInvalid(f"--agent {spec!r}: cannot import {module_name!r}: {error}") from None
    except Exception as error:  # noqa: BLE001 - the user's module: whatever stops its import is the answer
        reason = error.message if isinstance(error, TetherError) else f"{type(error).__name__}: {error}"
        raise ConfigInvalid(f"--agent {spec!r}: importing {module_name!r} failed: {reason}") from None
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigInvalid(f"--agent {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    return value


def _is_durable(value: object) -> bool:
    engine = sys.modules.get(DURABLE_ENGINE)
    return engine is not None and isinstance(value, engine.DurableAgent)
