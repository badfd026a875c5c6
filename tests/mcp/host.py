"""A host for the orphan test: holds our MCP server open and gets it stuck, then waits to be killed.

``python host.py LOG``: prints the server's ``{"pid": ..., "ppid": ...}`` once the server is stuck in a
call (its event loop blocked: it no longer even notices its stdin closing), then waits forever.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tether.tools.mcp import MCPServerConfig, MCPTools

SERVER = Path(__file__).resolve().with_name("server.py")


async def main(log: str) -> None:
    config = MCPServerConfig("py", command=sys.executable, args=[str(SERVER), "stdio"], env={"MCP_TEST_LOG": log})
    async with MCPTools([config]) as mcp:
        pids, stuck = mcp.get("pids"), mcp.get("stuck")
        assert pids is not None
        assert stuck is not None
        print(json.dumps(json.loads(await pids({}))), flush=True)
        await stuck({})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
