"""Agents served to others: over MCP (``tether mcp serve``), each part loaded when first asked for (docs/serving.md).

Nothing here is loaded by ``import tether``; the MCP server needs the ``mcp`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_face

_EXPORTS: dict[str, str] = {
    "MCPAgentServer": "tether.serve.mcp_server",
    "serve_mcp_stdio": "tether.serve.mcp_transports",
    "serve_mcp_http": "tether.serve.mcp_transports",
    "mcp_http_app": "tether.serve.mcp_transports",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tether.serve.mcp_server import MCPAgentServer as MCPAgentServer
    from tether.serve.mcp_transports import mcp_http_app as mcp_http_app
    from tether.serve.mcp_transports import serve_mcp_http as serve_mcp_http
    from tether.serve.mcp_transports import serve_mcp_stdio as serve_mcp_stdio
