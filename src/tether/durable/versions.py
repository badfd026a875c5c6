"""The deploy version: one digest of what every durable agent of a process is, so that a change is a new version.

Why: the engine gives each run the version of the process that started or enqueued it, and a worker takes from
a queue only the runs of its own version, and recovers only those (a run replays its steps against its agent's
code: another agent would diverge). The engine's own version hashed the source of its workflow functions, which
for tether is one function whatever the agent: it changed with the number of agents and with nothing else, so
a changed agent kept the old version and a client with one more agent enqueued runs no worker would take.

Contract. :func:`agent_identity` is what a :class:`~tether.durable.DurableAgent` is, as plain JSON: its name,
its model (provider and model id), each tool's name, description, parameters' schema and source (an MCP
server's tools left out: they are the server's, and a process that only enqueues, such as ``tether runs
submit``, does not connect them), its instructions (the system prompt's text, or a system function's name and
source), its output type's schemas.
:func:`deploy_version` is the digest of every agent's identity with tether's version, the stored format's and
the engine's: ``tether-`` and 16 hexadecimal digits. Two processes made of the same agents have the same
version; anything in the list above that differs makes another. Nothing of the environment goes in but what the
agent is given: a system prompt that names the time or the files of the moment makes a version per process
(keep such text out of the prompt, or in a system function, whose name and code stand for it).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.agent import Agent


def _source(function: Any) -> str:
    """The code of ``function`` (what its behaviour is), or its qualified name where the code cannot be read."""
    target = inspect.unwrap(function) if callable(function) else function
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"


def agent_identity(name: str, agent: Agent[Any, Any]) -> dict[str, Any]:
    """What the durable agent ``name`` is, as JSON (see the module docstring)."""
    spec = agent._spec
    tools = []
    for tool_name in sorted(agent.tools.names):
        tool = agent.tools.get(tool_name)
        assert tool is not None
        if tool.server is not None:
            continue  # an MCP server's tool: the server's, not the agent's code (a submitter does not connect it)
        tools.append(
            {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "source": _source(tool.function),
                "idempotent": tool.idempotent,
            }
        )
    output = None
    if spec.output is not None:
        output = [{"name": c.name, "description": c.description, "schema": c.schema} for c in spec.output.choices]
    system = spec.system if spec.system_function is None else {"function": _source(spec.system_function)}
    return {
        "name": name,
        "agent": agent.name,
        "model": spec.provider.info.model_string,
        "tools": tools,
        "instructions": system,
        "output": output,
    }


def deploy_version(identities: Iterable[dict[str, Any]], *, app_name: str, engine: str) -> str:
    """The version of a process made of agents of these ``identities`` (see the module docstring), on the
    engine's version ``engine``."""
    from tether._version import __version__
    from tether.durable.formats import FORMAT

    whole = {
        "agents": sorted(identities, key=lambda identity: str(identity["name"])),
        "app": app_name,
        "tether": __version__,
        "format": FORMAT,
        "engine": engine,
    }
    text = json.dumps(whole, sort_keys=True, separators=(",", ":"), default=repr)
    return "tether-" + hashlib.sha256(text.encode()).hexdigest()[:16]
