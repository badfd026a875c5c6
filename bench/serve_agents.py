"""The agent ``serve_load.py`` serves (``tether serve --agent bench.serve_agents:agent``): a scripted model that
answers a prompt in eight streamed pieces, or, for a prompt that starts with ``hold``, sends one piece and
waits until the run is cancelled (a stream held open)."""

from __future__ import annotations

from tether import Agent
from tether.providers import ScriptedProvider
from tether.providers.base import Request
from tether.providers.scripted import Step, hang, reply
from tether.sessions import MemorySessionStore

ANSWER = "The answer comes in eight streamed pieces, one after another, as a model would send it."


def answer(request: Request) -> Step:
    prompt = request.messages[-1].text
    if prompt.startswith("hold"):
        return hang("holding ")
    return reply(ANSWER, chunk_size=len(ANSWER) // 8 + 1)


agent = Agent(ScriptedProvider([answer] * 100_000), store=MemorySessionStore(), name="load")
