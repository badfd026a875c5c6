"""Exchanges kept in a session (``tether.exchanges``): each provider call's request body and raw answer, masked,
over real HTTP on 127.0.0.1 (recorded OpenAI traffic, ``tests/wire/replay.py``), in every store (memory, files,
SQLite, PostgreSQL), read back with ``load_exchanges``; off by default."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from tests.postgres import PgSchema
from tests.sessions.conftest import opener
from tests.wire import replay as wire
from tests.wire.replay import Replayer, ReplayServer
from tether import Agent, tool
from tether.errors import ConfigInvalid, SessionInvalid
from tether.exchanges import Exchange
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import ScriptedProvider, reply
from tether.sessions import ExchangeStore, MemorySessionStore, SessionStore, SQLiteSessionStore

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

WHOLE = "openai_chat/test_openai_instructions.yaml"
"""One whole (not streamed) answer."""
STREAMED = "openai_chat/test_run_stream_sync_streams_real_model.yaml"
"""Two streamed answers (the first is used)."""
SECRET = "sk-live-4f9c2b7d1e8a6f3c"
"""A key the host declares (``secrets=``), pasted into a prompt."""
KINDS = ("memory", "files", "sqlite", "postgres")


@pytest.fixture(params=KINDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], SessionStore]:
    pg: PgSchema | None = request.getfixturevalue("postgres") if request.param == "postgres" else None
    return opener(request.param, tmp_path, pg)


def openai(server: ReplayServer, *, stream: bool) -> OpenAIChatProvider:
    model = server.cassette.interactions[0].request_body["model"]
    return OpenAIChatProvider(
        model, base_url=server.base_url, api_key="test-key", stream=stream, retry=RetryPolicy(max_retries=0)
    )


async def closed(store: SessionStore) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()


async def test_each_call_is_kept_masked_in_the_session_and_read_back_by_every_store(
    replay: Replayer, open_store: Callable[[], SessionStore]
) -> None:
    server = await replay.serve(WHOLE)
    store = open_store()
    agent = Agent(openai(server, stream=False), store=store, secrets=[SECRET], record_exchanges=True)
    result = await agent.run(f"What is the capital of France? My key is {SECRET}.", session="s1")
    await closed(store)

    reopened = open_store()  # read back through a new store object, from what was written
    try:
        assert isinstance(reopened, ExchangeStore)
        (exchange,) = await reopened.load_exchanges("s1")
    finally:
        await closed(reopened)
    sent = server.requests[0].body
    assert SECRET in json.dumps(sent), "the model got the prompt as written: only what is kept is masked"
    assert SECRET not in exchange.request
    assert "My key is ***." in exchange.request
    assert json.loads(exchange.request)["messages"] == json.loads(json.dumps(sent["messages"]).replace(SECRET, "***"))
    assert exchange.response == (json.dumps(server.cassette.interactions[0].response_json()),)
    assert not exchange.streamed
    assert (exchange.run_id, exchange.turn, exchange.attempt) == (result.run_id, 1, 1)
    assert exchange.model == f"openai:{sent['model']}"
    assert isinstance(exchange.started_at, datetime)
    assert exchange.started_at.utcoffset() is not None


async def test_streamed_answers_are_kept_as_their_events_json_one_exchange_per_call(
    replay: Replayer, tmp_path: Path
) -> None:
    server = await replay.serve(STREAMED)

    @tool
    def get_capital(country: str) -> str:
        """The capital of a country."""
        return "London"

    async with SQLiteSessionStore(tmp_path / "s.sqlite") as store:
        agent = Agent(openai(server, stream=True), tools=[get_capital], store=store, record_exchanges=True)
        result = await agent.run("What is the capital of the UK? Use the tool, then answer.", session="s1")
        kept = await store.load_exchanges("s1")

    assert result.text.startswith("The capital of the UK is London")
    assert [(e.turn, e.attempt, e.streamed) for e in kept] == [(1, 1, True), (2, 1, True)]
    for exchange, interaction, sent in zip(kept, server.cassette.interactions, server.bodies, strict=True):
        assert list(exchange.response) == [data for data in interaction.events_data() if data != "[DONE]"]
        assert json.loads(exchange.request) == sent
    assert json.loads(kept[1].request)["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_ZR5UUuTt3pf61kjwAJIYdVMj", "content": "London",
    }  # fmt: skip


async def test_exchanges_are_appended_run_after_run_and_deleted_with_their_session(
    replay: Replayer, open_store: Callable[[], SessionStore]
) -> None:
    first, second = await replay.serve(WHOLE), await replay.serve(WHOLE)
    store = open_store()
    try:
        assert isinstance(store, ExchangeStore)
        runs = [
            await Agent(openai(server, stream=False), store=store, record_exchanges=True).run("Hi.", session="s1")
            for server in (first, second)
        ]
        kept = await store.load_exchanges("s1")
        assert [exchange.run_id for exchange in kept] == [run.run_id for run in runs]
        assert await store.load_exchanges("other") == []

        await store.delete("s1")

        assert await store.load_exchanges("s1") == []
    finally:
        await closed(store)


async def test_off_by_default_nothing_is_kept_and_no_request_carries_a_recorder(
    replay: Replayer, tmp_path: Path
) -> None:
    server = await replay.serve(WHOLE)
    async with SQLiteSessionStore(tmp_path / "s.sqlite") as store:
        await Agent(openai(server, stream=False), store=store).run("Hi.", session="s1")
        assert await store.load_exchanges("s1") == []
    scripted = ScriptedProvider([reply("hello")])
    await Agent(scripted, store=MemorySessionStore(), record_exchanges=False).run("Hi.", session="s2")
    assert scripted.requests[0].record is None


async def test_a_provider_without_a_wire_keeps_nothing() -> None:
    store = MemorySessionStore()
    scripted = ScriptedProvider([reply("hello")])
    await Agent(scripted, store=store, record_exchanges=True).run("Hi.", session="s1")
    assert scripted.requests[0].record is not None, "the request carries a recorder a provider may use"
    assert await store.load_exchanges("s1") == []


class Plain:
    """A session store of its own that keeps no exchanges."""

    def __init__(self) -> None:
        self.inner = MemorySessionStore()
        self.load, self.save, self.list, self.delete = (
            self.inner.load, self.inner.save, self.inner.list, self.inner.delete,
        )  # fmt: skip


def test_a_store_that_cannot_keep_exchanges_is_refused_before_the_run_starts() -> None:
    agent = Agent(ScriptedProvider([reply("hello")]), store=Plain(), record_exchanges=True)
    with pytest.raises(ConfigInvalid, match="record_exchanges needs a session store that keeps exchanges"):
        agent.stream("Hi.", session="s1")


@contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(path)) as connection, connection:
        yield connection


async def test_a_sqlite_database_of_schema_2_gets_the_exchanges_table_and_keeps_its_sessions(
    replay: Replayer, tmp_path: Path
) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await Agent(ScriptedProvider([reply("hello")]), store=store).run("Hi.", session="old")
    with database(path) as db:  # as schema 2 left it
        db.execute("DROP TABLE exchanges")
        db.execute("PRAGMA user_version = 2")

    server = await replay.serve(WHOLE)
    async with SQLiteSessionStore(path) as store:
        assert (await store.load("old")).messages[-1].text == "hello"
        await Agent(openai(server, stream=False), store=store, record_exchanges=True).run("Hi.", session="new")
        assert len(await store.load_exchanges("new")) == 1
    with database(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (3,)


async def test_a_corrupt_exchange_row_is_session_invalid_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    async with SQLiteSessionStore(path) as store:
        await store.save_exchanges("s1", [exchange_of("a")])
    with database(path) as db:
        db.execute("INSERT INTO exchanges VALUES ('s1', 1, '{\"run_id\": 3}')")
    async with SQLiteSessionStore(path) as store:
        with pytest.raises(SessionInvalid, match=r"session 's1', exchanges row 1: not an exchange"):
            await store.load_exchanges("s1")


async def test_the_files_store_keeps_each_exchange_in_a_file_of_its_own_in_order(tmp_path: Path) -> None:
    from tether.sessions import FileSessionStore

    store = FileSessionStore(tmp_path / "sessions")
    await store.save_exchanges("s1", [exchange_of("a"), exchange_of("b")])
    await store.save_exchanges("s1", [exchange_of("c")])

    folder = store.exchanges_of("s1")
    assert sorted(p.name for p in folder.iterdir()) == ["00000000.json", "00000001.json", "00000002.json"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in folder.iterdir())
    assert [e.run_id for e in await store.load_exchanges("s1")] == ["a", "b", "c"]
    (folder / "00000001.json").write_text("{")
    with pytest.raises(SessionInvalid, match=r"00000001\.json: not an exchange"):
        await store.load_exchanges("s1")
    await store.delete("s1")
    assert not folder.exists()


def exchange_of(run_id: str) -> Exchange:
    return Exchange(run_id, 1, 1, "openai:m", datetime.fromisoformat("2026-01-02T03:04:05+00:00"), "{}", ("{}",), False)
