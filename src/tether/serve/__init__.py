"""Agents served to others: over HTTP to AG-UI clients, the AI SDK's ``useChat`` and a page of its own
(``tether serve``), and over MCP (``tether mcp serve``); docs/serving.md.

Nothing here is imported by ``import tether``: each part loads its dependencies (the ``serve`` extra:
``ag-ui-protocol``, ``starlette``, ``uvicorn``; the ``mcp`` extra for MCP) when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_face

_EXPORTS: dict[str, str] = {
    "create_app": "tether.serve.app",
    "check_bind": "tether.serve.security",
    "MCPAgentServer": "tether.serve.mcp_server",
    "serve_mcp_stdio": "tether.serve.mcp_transports",
    "serve_mcp_http": "tether.serve.mcp_transports",
    "mcp_http_app": "tether.serve.mcp_transports",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tether.serve.app import create_app as create_app
    from tether.serve.mcp_server import MCPAgentServer as MCPAgentServer
    from tether.serve.mcp_transports import mcp_http_app as mcp_http_app
    from tether.serve.mcp_transports import serve_mcp_http as serve_mcp_http
    from tether.serve.mcp_transports import serve_mcp_stdio as serve_mcp_stdio
    from tether.serve.security import check_bind as check_bind
