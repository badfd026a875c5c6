"""The response cache (``providers/response_cache.py``) over real HTTP: a run against a scripted OpenAI-compatible
server on 127.0.0.1, then the same run again. Each behaviour is tested on both stores, a SQLite file and a table of
the real PostgreSQL server (``response_cache_pg.py``, a table of its own per test, dropped after it). An identical
request is answered from the cache with no request made and the same events; any change of what the model is asked
(temperature, a tool, the system prompt) goes to the server; an entry past its TTL, a failed or cut-short answer, and
a request at a temperature the cache does not take are never replayed; runs and processes writing one file at once
leave it whole."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.e2e.mock_llm import Call, Fail, MockLLM, Responder, Say, Step
from tests.postgres import URL, require_postgres
from tether import Agent, ModelSettings, ResponseCache, tool
from tether.errors import ConfigInvalid, StoreUnavailable, TransportError
from tether.events import RunCompleted, RunEvent, RunStarted, StreamEnd, TextDelta, TurnCompleted
from tether.limits import Limits
from tether.providers import Request
from tether.providers.response_cache import request_key
from tether.providers.scripted import ScriptedProvider, events, fail, reply
from tether.usage import Usage

ZERO = ModelSettings(temperature=0)


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def other(name: str) -> str:
    """Something else."""
    return name


class Store:
    """One of the cache's stores, for one test: ``make`` a cache on it, ``age`` its entries."""

    def __init__(self, kind: str, tmp_path: Path, table: str = "") -> None:
        self.kind, self.path, self.table = kind, tmp_path / "cache.db", table

    def make(self, **options: Any) -> ResponseCache:
        if self.kind == "sqlite":
            return ResponseCache(self.path, **options)
        return ResponseCache(URL, table=self.table, **options)

    def age(self, seconds: float) -> None:
        """Every entry stored ``seconds`` earlier than it was."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.path) as db:
                db.execute("UPDATE responses SET created = created - ?", (seconds,))
            return
        import psycopg

        with psycopg.connect(URL, autocommit=True) as db:
            db.execute(f"UPDATE {self.table} SET created = created - %s", (seconds,))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        yield Store("sqlite", tmp_path)
        return
    require_postgres(request.config, "the PostgreSQL response cache")
    import psycopg

    table = f"test_responses_{secrets.token_hex(6)}"
    yield Store("postgres", tmp_path, table)
    with psycopg.connect(URL, autocommit=True) as db:
        db.execute(f"DROP TABLE IF EXISTS {table}")


def agent(server: MockLLM, cache: ResponseCache, **options: Any) -> Agent:
    options.setdefault("settings", ZERO)
    return Agent("openai-compatible:mock", base_url=server.base_url, api_key="sk-test", cache=cache, **options)


async def events_of(made: Agent, prompt: str) -> list[RunEvent]:
    return [event async for event in made.stream(prompt)]


def comparable(events: list[RunEvent]) -> list[Any]:
    """The events without what differs between any two runs (the run id, timings) and without the usage, which a
    replay reports as zero (checked apart): what a host is shown of the answer."""
    shown: list[Any] = []
    for event in events:
        if type(event) is RunStarted:
            shown.append(msgspec.structs.replace(event, run_id=""))
        elif type(event) is TurnCompleted:
            usage = msgspec.structs.replace(event.usage, input_tokens=0, output_tokens=0)
            shown.append(msgspec.structs.replace(event, usage=usage, cached=False))  # a hit says so (checked apart)
        elif type(event) is RunCompleted:
            result = event.result
            shown.append(("completed", result.text, result.stop_reason, result.messages, result.turns))
        else:
            shown.append(event)
    return shown


def result_of(events: list[RunEvent]) -> Any:
    last = events[-1]
    assert type(last) is RunCompleted
    return last.result


def test_a_second_identical_run_makes_no_request_and_yields_the_same_events(store: Store) -> None:
    cache = store.make()
    script: list[Step | Responder] = [Call("lookup", {"city": "Oslo"}, text="Checking."), Say("It is sunny in Oslo.")]
    with MockLLM(script) as server:
        live = asyncio.run(events_of(agent(server, cache, tools=[lookup]), "Weather in Oslo?"))
        replay = asyncio.run(events_of(agent(server, cache, tools=[lookup]), "Weather in Oslo?"))
        requests = len(server.requests)

    assert requests == 2, "the replay made no request: the two live calls are all the server saw"
    assert comparable(replay) == comparable(live)
    first, second = result_of(live), result_of(replay)
    assert second.text == "It is sunny in Oslo."
    assert [record.cached for record in first.turn_records] == [False, False]
    assert [record.cached for record in second.turn_records] == [True, True]
    assert first.usage.requests == 2
    assert first.usage.input_tokens > 0
    assert second.usage.total_tokens == 0, "a hit spends nothing"
    assert second.usage.requests == 0, "a hit is no request"
    assert all(event.usage.total_tokens == 0 for event in replay if type(event) is TurnCompleted)
    assert cache.entries() == 2
    assert [event.cached for event in live if type(event) is TurnCompleted] == [False, False]
    assert [event.cached for event in replay if type(event) is TurnCompleted] == [True, True], "a hit says so"


@pytest.mark.parametrize(
    ("changed", "options"),
    [
        ("temperature", {"settings": ModelSettings(temperature=0.5)}),
        ("a tool", {"tools": [lookup, other]}),
        ("the system prompt", {"system": "Answer in French."}),
        ("max_tokens", {"settings": ModelSettings(temperature=0, max_tokens=50)}),
    ],
)
def test_a_changed_setting_misses(store: Store, changed: str, options: dict[str, Any]) -> None:
    cache = store.make(any_temperature=True)
    with MockLLM([Say("First."), Say("Second.")]) as server:
        asyncio.run(agent(server, cache, tools=[lookup]).run("Hello?"))
        changed_agent = agent(server, cache, **{"tools": [lookup], **options})
        result = asyncio.run(changed_agent.run("Hello?"))
        requests = len(server.requests)

    assert requests == 2, f"changing {changed} sent the request again"
    assert result.text == "Second."
    assert not result.turn_records[0].cached


def test_an_entry_past_its_ttl_misses_and_is_replaced(store: Store) -> None:
    cache = store.make(ttl=600)
    with MockLLM([Say("Old."), Say("New.")]) as server:
        asyncio.run(agent(server, cache).run("Hi"))
        fresh = asyncio.run(agent(server, cache).run("Hi"))
        store.age(1200)  # the entry was stored 20 minutes ago
        expired = asyncio.run(agent(server, cache).run("Hi"))
        again = asyncio.run(agent(server, cache).run("Hi"))
        requests = len(server.requests)

    assert fresh.text == "Old."
    assert fresh.turn_records[0].cached, "within its TTL the entry is replayed"
    assert expired.text == "New."
    assert not expired.turn_records[0].cached
    assert again.text == "New."
    assert again.turn_records[0].cached, "the live answer replaced the expired one"
    assert requests == 2


def test_a_request_with_the_providers_default_temperature_is_not_cached(store: Store) -> None:
    cache = store.make()
    with MockLLM([Say("One."), Say("Two.")]) as server:
        unset = {"settings": ModelSettings()}
        first = asyncio.run(agent(server, cache, **unset).run("Hi"))
        second = asyncio.run(agent(server, cache, **unset).run("Hi"))
        requests = len(server.requests)

    assert (first.text, second.text, requests) == ("One.", "Two.", 2)
    assert cache.entries() == 0


def test_a_failed_answer_is_not_stored(store: Store) -> None:
    cache = store.make()
    with MockLLM([Fail(400, {"error": {"message": "bad"}}), Say("Fine.")]) as server:
        failed = asyncio.run(agent(server, cache).run("Hi"))
        answered = asyncio.run(agent(server, cache).run("Hi"))

    assert failed.stop_reason == "error"
    assert answered.text == "Fine."
    assert not answered.turn_records[0].cached


def test_an_answer_that_fails_mid_stream_or_ends_in_error_or_empty_is_not_stored(store: Store) -> None:
    cache = store.make()
    dropped = TransportError("connection dropped")
    script = ScriptedProvider([
        fail(dropped, after_text="Half an"),
        events(TextDelta("Broken"), StreamEnd("error", Usage(input_tokens=3))),
        events(StreamEnd("stop", Usage(input_tokens=3))),
        reply("Whole."),
    ])  # fmt: skip
    for _ in range(4):
        asyncio.run(Agent(script, cache=cache, settings=ZERO, limits=Limits(invalid_response_retries=0)).run("Hi"))

    assert len(script.requests) == 4, "nothing was replayed until a whole answer came"
    assert cache.entries() == 1
    replay = asyncio.run(Agent(script, cache=cache, settings=ZERO).run("Hi"))
    assert replay.text == "Whole."


def test_an_answer_cut_short_by_cancellation_is_not_stored(store: Store) -> None:
    cache = store.make()

    async def cancelled(server: MockLLM) -> str:
        handle = agent(server, cache).start("Hi")
        await asyncio.to_thread(server.stalled.wait, 30)
        handle.cancel()
        return (await handle.result()).stop_reason

    with MockLLM([Say("Part of an answer", stall=True), Say("Whole.")]) as server:
        stop = asyncio.run(cancelled(server))
        server.release()
        answered = asyncio.run(agent(server, cache).run("Hi"))

    assert stop == "cancelled"
    assert cache.entries() == 1, "only the whole answer was stored"
    assert answered.text == "Whole."
    assert not answered.turn_records[0].cached


def test_concurrent_runs_in_one_process_share_the_store(store: Store) -> None:
    cache = store.make()

    async def many(server: MockLLM) -> list[str]:
        results = await asyncio.gather(*(agent(server, cache).run(f"Question {n}") for n in range(12)))
        return [result.text for result in results]

    with MockLLM([lambda body: Say("Answer to " + body["messages"][-1]["content"])] * 12) as server:
        live = asyncio.run(many(server))
        replayed = asyncio.run(many(server))
        requests = len(server.requests)

    assert requests == 12
    assert replayed == live == [f"Answer to Question {n}" for n in range(12)]
    assert cache.entries() == 12


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from tether import Agent, ModelSettings, ResponseCache
    from tether.providers.scripted import ScriptedProvider, reply

    async def main(path, worker):
        cache = ResponseCache(path)
        for n in range(40):
            prompt = f"shared {n}" if n % 2 else f"worker {worker} {n}"
            agent = Agent(ScriptedProvider([reply(prompt.upper())]), cache=cache, settings=ModelSettings(temperature=0))
            result = await agent.run(prompt)
            assert result.text == prompt.upper(), result
    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_processes_writing_one_file_at_once_leave_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(worker)], stderr=subprocess.PIPE, text=True)
        for worker in range(4)
    ]
    errors = [writer.communicate(timeout=120)[1] for writer in writers]

    assert [writer.returncode for writer in writers] == [0] * 4, errors
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    cache = ResponseCache(path)
    assert cache.entries() == 4 * 20 + 20, "each worker's own prompts and the shared ones, each once"
    replay = asyncio.run(
        Agent(ScriptedProvider([]), cache=cache, settings=ZERO).run("shared 3")
    )  # an empty script: only the cache can answer
    assert replay.text == "SHARED 3"
    assert replay.turn_records[0].cached


def test_the_key_covers_the_whole_request_and_nothing_of_the_call() -> None:
    provider = ScriptedProvider([reply("x")])
    base = Request(messages=(), system="s", settings=ZERO)
    same = msgspec.structs.replace(base, timeout=5.0, deadline=12.0, on_retry=lambda *_: None)
    assert request_key(provider, same) == request_key(provider, base), "timeouts and hooks are not the request"
    for changed in (
        msgspec.structs.replace(base, system="t"),
        msgspec.structs.replace(base, tool_choice="none"),
        msgspec.structs.replace(base, settings=ModelSettings(temperature=0, extra={"seed": 1})),
        msgspec.structs.replace(base, json_schema={"type": "object"}),
        msgspec.structs.replace(base, parallel_tool_calls=False),
    ):
        assert request_key(provider, changed) != request_key(provider, base), changed


def test_bad_settings_and_a_wrong_cache_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid, match="ttl"):
        ResponseCache(tmp_path / "c.db", ttl=0)
    with pytest.raises(ConfigInvalid, match="ResponseCache"):
        Agent(ScriptedProvider([]), cache=str(tmp_path / "c.db"))  # type: ignore[arg-type]


def test_a_postgres_cache_names_its_table_never_its_url_and_checks_the_name() -> None:
    cache = ResponseCache("postgresql://tether:hunter2@127.0.0.1:1/db", table="answers")
    assert "hunter2" not in repr(cache)
    assert "answers" in repr(cache)
    assert cache.path is None
    with pytest.raises(ConfigInvalid, match="table"):
        ResponseCache("postgresql://127.0.0.1/db", table="answers; DROP TABLE x")


def test_a_postgres_server_out_of_reach_is_store_unavailable() -> None:
    cache = ResponseCache("postgresql://postgres@127.0.0.1:1/test", timeout=1)
    with pytest.raises(StoreUnavailable, match="tether_responses"):
        cache.entries()


def test_many_threads_opening_a_new_cache_file_at_once_all_get_a_connection(tmp_path: Path) -> None:
    """Each thread has its own connection; the first ones made at once must not fail the file's setup."""
    import concurrent.futures

    for attempt in range(20):
        cache = ResponseCache(tmp_path / f"cache-{attempt}.db")
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            counts = list(pool.map(ResponseCache.entries, [cache] * 16))
        assert counts == [0] * 16


OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tether import ResponseCache

    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    for path in sys.argv[3:]:
        ResponseCache(Path(sys.argv[1]) / path).entries()
    """
)


def test_processes_opening_a_new_file_at_the_same_moment_all_set_it_up(tmp_path: Path) -> None:
    """Switching a new file to WAL while another process does the same fails at once ("database is locked"),
    whatever the busy timeout: each process's setup waits its turn instead."""
    go = tmp_path / "go"
    files = [f"cache-{n}.db" for n in range(30)]
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(tmp_path), str(go), *files], stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    time.sleep(1.0)  # every opener started and waiting: they open the files at the same moment
    go.touch()
    errors = [opener.communicate(timeout=120)[1] for opener in openers]

    assert [opener.returncode for opener in openers] == [0] * 6, errors
    for name in files:
        with sqlite3.connect(tmp_path / name) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
