"""Tools: what the model may call (docs/tools.md).

This face hands on what a user of tools needs, loaded on first use: ``Tool`` and ``@tool`` with ``Done`` and
``RunContext`` (what a tool taking ``ctx: RunContext[Deps]`` first is handed, ``tether.run_context``), the
permission decisions (``Allow``, ``Deny``, ``Ask``, ``Mode``), and MCP servers as tools (``MCPServerConfig``,
``MCPTools``).

* ``base.py``: ``Tool``, ``@tool``, ``Done``; ``schema.py`` and ``docstrings.py``: schemas from signatures and
  docstrings, and argument validation; ``registry.py``: a run's tools by name; ``threads.py``: sync tools' threads;
* ``permissions.py``: which tools are offered and asked about; ``output_cache.py``: long outputs kept whole;
* ``workspace.py``, ``files.py``, ``shell.py``, ``sandbox.py``: the command line's workspace-confined tools;
* ``mcp.py``, ``mcp_connection.py``, ``mcp_guard.py``, ``mcp_spec.py``: MCP servers as tools (official SDK);
* ``python_runtime/``: capabilities over a live Python namespace (the assistant's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_face

_EXPORTS: dict[str, str] = {
    "Tool": "tether.tools.base",
    "tool": "tether.tools.base",
    "Done": "tether.tools.base",
    "RunContext": "tether.run_context",
    "Allow": "tether.tools.permissions",
    "Deny": "tether.tools.permissions",
    "Ask": "tether.tools.permissions",
    "Mode": "tether.tools.permissions",
    "MCPServerConfig": "tether.tools.mcp_spec",
    "MCPTools": "tether.tools.mcp",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tether.run_context import RunContext as RunContext
    from tether.tools.base import Done as Done
    from tether.tools.base import Tool as Tool
    from tether.tools.base import tool as tool
    from tether.tools.mcp import MCPTools as MCPTools
    from tether.tools.mcp_spec import MCPServerConfig as MCPServerConfig
    from tether.tools.permissions import Allow as Allow
    from tether.tools.permissions import Ask as Ask
    from tether.tools.permissions import Deny as Deny
    from tether.tools.permissions import Mode as Mode
