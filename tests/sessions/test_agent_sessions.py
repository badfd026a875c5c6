"""Runs that keep a session: saved after every turn, continued later, surviving a killed process."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import assert_valid
from tether import Agent, tool
from tether.errors import ConfigInvalid
from tether.events import RunEvent, TurnStarted
from tether.messages import Message
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions import MemorySessionStore, Session, SQLiteSessionStore
from tether.usage import Usage

ROOT = Path(__file__).resolve().parents[2]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_session_is_saved_and_continued_by_the_next_run(tmp_path: Path) -> None:
    async with SQLiteSessionStore(tmp_path / "sessions.db") as store:
        model = ScriptedProvider(
            [
                call("add", {"a": 2, "b": 3}, usage=Usage(input_tokens=10)),
                reply("5", usage=Usage(output_tokens=2)),
                reply("20"),
            ]
        )
        agent = Agent(model, tools=[add], store=store)
        first = await agent.run("What is 2+3?", session="s1")
        saved = await store.load("s1")
        assert saved.messages == first.messages
        assert saved.title == "What is 2+3?"
        assert saved.model == "scripted:scripted"
        second = await agent.run("And times 4?", session="s1")
        assert model.requests[2].messages[: len(first.messages)] == first.messages
        assert second.text == "20"
        again = await store.load("s1")
        assert again.messages == second.messages
        assert again.usage.input_tokens == 10 + second.usage.input_tokens
        assert_valid(second)


async def test_the_session_is_saved_after_every_turn_not_only_at_the_end() -> None:
    store = MemorySessionStore()
    seen_at_turn_two: list[Session] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, TurnStarted) and event.turn == 2:
            seen_at_turn_two.append(store._sessions["s"])  # what is stored mid-run

    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2")])
    await Agent(model, tools=[add], store=store).run("1+1?", session="s", on_event=on_event)
    (mid_run,) = seen_at_turn_two
    assert [m.role for m in mid_run.messages] == ["user", "assistant", "tool"]


async def test_a_save_that_fails_stops_the_run_with_the_error() -> None:
    class BrokenStore(MemorySessionStore):
        async def save(self, session: Session) -> None:
            raise OSError("disk full")

    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2")])
    result = await Agent(model, tools=[add], store=BrokenStore()).run("1+1?", session="s")
    assert result.stop_reason == "error"
    assert "could not save the session" in result.detail
    assert isinstance(result.error, OSError)


class FailingStore(MemorySessionStore):
    """A store whose first ``failures`` saves fail (``None``: every save)."""

    def __init__(self, failures: int | None = None) -> None:
        super().__init__()
        self.failures = failures
        self.attempts = 0

    async def save(self, session: Session) -> None:
        self.attempts += 1
        if self.failures is None or self.attempts <= self.failures:
            raise OSError("disk full")
        await super().save(session)


async def test_with_save_errors_continue_the_run_answers_degraded_when_its_last_save_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2")])
    store = FailingStore()
    agent = Agent(model, tools=[add], store=store, save_errors="continue")
    with caplog.at_level(logging.WARNING, logger="tether.sessions"):
        result = await agent.run("1+1?", session="s")
    assert (result.stop_reason, result.text, result.output) == ("complete", "2", "2")
    assert result.degraded
    assert result.detail == "the model answered; could not save the session: OSError: disk full"
    assert isinstance(result.error, OSError)
    assert len(model.requests) == 2, "the failed save after the tool turn did not stop the run"
    assert store.attempts == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "tether.sessions"]
    assert warnings == ["could not save the session: OSError: disk full; the run goes on (save_errors='continue')"] * 2
    assert_valid(result)


async def test_with_save_errors_continue_a_later_save_that_succeeds_leaves_the_session_whole() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2")])
    store = FailingStore(failures=1)
    result = await Agent(model, tools=[add], store=store, save_errors="continue").run("1+1?", session="s")
    assert (result.stop_reason, result.degraded, result.error) == ("complete", False, None)
    assert (await store.load("s")).messages == result.messages


def test_save_errors_takes_only_its_two_words() -> None:
    with pytest.raises(ConfigInvalid, match="save_errors must be 'stop' or 'continue', not 'ignore'"):
        Agent(ScriptedProvider([]), save_errors="ignore")  # type: ignore[arg-type]


def test_a_session_needs_a_store_and_excludes_an_explicit_history() -> None:
    with pytest.raises(ConfigInvalid, match="store"):
        Agent(ScriptedProvider([])).stream("hi", session="s")
    with pytest.raises(ConfigInvalid, match="not both"):
        Agent(ScriptedProvider([]), store=MemorySessionStore()).stream("hi", session="s", history=[Message.user("x")])


HOST = textwrap.dedent(
    """
    import asyncio, sys
    from tether import Agent, tool
    from tether.events import TurnStarted
    from tether.providers.scripted import ScriptedProvider, call, hang
    from tether.sessions import SQLiteSessionStore

    @tool
    def add(a: int, b: int) -> int:
        '''Add two integers.'''
        return a + b

    def on_event(event):
        if isinstance(event, TurnStarted) and event.turn == 2:
            print("turn 2 started", flush=True)  # turn 1 is saved by now

    async def main():
        async with SQLiteSessionStore(sys.argv[1]) as store:
            model = ScriptedProvider([call("add", {"a": 2, "b": 3}), hang("thinking about it")])
            await Agent(model, tools=[add], store=store).run("What is 2+3?", session="crash", on_event=on_event)

    asyncio.run(main())
    """
)


async def test_a_run_killed_mid_turn_is_resumed_from_its_last_saved_turn(tmp_path: Path) -> None:
    database = tmp_path / "sessions.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOST, str(database), stdout=asyncio.subprocess.PIPE, env=env
    )
    try:
        assert host.stdout is not None
        assert (await host.stdout.readline()).strip() == b"turn 2 started"
    finally:
        host.send_signal(signal.SIGKILL)
        await host.wait()
    async with SQLiteSessionStore(database) as store:
        saved = await store.load("crash")
        assert [m.role for m in saved.messages] == ["user", "assistant", "tool"]
        assert saved.messages[2].tool_results[0].content == "5"
        model = ScriptedProvider([reply("2 + 3 = 5")])
        resumed = await Agent(model, tools=[add], store=store).run("So?", session="crash")
    assert resumed.text == "2 + 3 = 5"
    assert model.requests[0].messages[:3] == saved.messages
    assert_valid(resumed)
