"""Teams of agents: agents that work together in one run, or check each other's work (docs/agents.md "Many
agents").

``agent_tool.py`` is an agent run as another agent's tool (``agent.as_tool()``): the calling run's side of it
(the budget it shares, the events it relays, the steps of a durable run) is ``loop/nesting.py``.
``handoffs.py``, ``guardrails.py`` and ``relay.py`` are handoffs and guardrails: one run over several agents.
"""

from __future__ import annotations

from tether.team.agent_tool import AgentTool, agent_tool

__all__ = ["AgentTool", "agent_tool"]
