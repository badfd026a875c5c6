"""A prompt sent after a cancelled turn: the stored session merges the two user messages in a row, and the
model must still read them as two texts."""

from __future__ import annotations

import re
from pathlib import Path

from tether.agent import Agent
from tether.events import TextDelta
from tether.providers.openai_chat import encode_message
from tether.providers.scripted import ScriptedProvider, hang, reply
from tether.sessions import SQLiteSessionStore


async def test_a_prompt_after_a_cancelled_chat_turn_stays_apart_from_the_cancelled_one(tmp_path: Path) -> None:
    model = ScriptedProvider([hang("Counting"), reply("Fresh start."), reply("ok")])
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent = Agent(model, store=store)
        stream = agent.stream("count to ten", session="s")
        async for event in stream:  # Ctrl-C in `tether chat` while the answer streams
            if isinstance(event, TextDelta):
                stream.cancel()
        await agent.run("start again", session="s")
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        await Agent(model, store=store).run("and a third", session="s")

    first_user = encode_message(model.requests[2].messages[0])[0]["content"]
    assert re.fullmatch(r"count to ten\s+start again", first_user), first_user
