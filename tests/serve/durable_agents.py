"""A durable agent that tests serve (``tether serve --agent tests.serve.durable_agents:durable --db FILE``)."""

from __future__ import annotations

from tether import Agent
from tether.durable import DurableAgent
from tether.providers import ScriptedProvider, reply

durable = DurableAgent(Agent(ScriptedProvider([reply("durably done")] * 20)), name="served")
