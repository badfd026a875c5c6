"""Teams of agents: an agent run as another agent's tool (``agent.as_tool()``, docs/agents.md "Many agents").

``agent_tool.py`` is the tool; the calling run's side (the budget it shares, the events it relays, the steps
of a durable run) is ``loop/nesting.py``.
"""

from __future__ import annotations

from tether.team.agent_tool import AgentTool, agent_tool

__all__ = ["AgentTool", "agent_tool"]
