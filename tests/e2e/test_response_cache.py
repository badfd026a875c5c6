"""``tether run --cache`` as a user runs it, against a mock model on 127.0.0.1: the same command twice makes one
request, and the second prints the same answer, marked as replayed with no tokens spent; another prompt or
another system prompt goes to the model; ``[cache]`` in agent.toml turns it on without the flag."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import Call, MockLLM, Say
from tests.postgres import URL, require_postgres


def run_json(project: Project, *args: str) -> dict[str, Any]:
    completed = project.run("run", *args, "--json")
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def test_the_same_run_twice_with_cache_makes_one_set_of_requests(project: Project) -> None:
    with MockLLM([Call("read", {"path": "notes.txt"}), Say("The notes say hello.")]) as server:
        project.use(server)
        (project.cwd / "notes.txt").write_text("hello\n")
        live = run_json(project, "What do the notes say?", "--cache")
        replay = run_json(project, "What do the notes say?", "--cache")
        requests = len(server.requests)

    assert requests == 2, "the second run asked the model nothing"
    assert replay["text"] == live["text"] == "The notes say hello."
    assert [m["parts"] for m in replay["messages"]] == [m["parts"] for m in live["messages"]]
    assert [r["cached"] for r in live["turn_records"]] == [False, False]
    assert [r["cached"] for r in replay["turn_records"]] == [True, True]
    assert replay["usage"]["requests"] == 0
    assert replay["usage"]["total_tokens"] == 0
    assert (project.root / "cache" / "tether" / "responses.db").is_file(), "the default file, in XDG_CACHE_HOME"


def test_another_prompt_or_system_prompt_goes_to_the_model(project: Project) -> None:
    path = str(project.root / "answers.db")
    with MockLLM([Say("One."), Say("Two."), Say("Three.")]) as server:
        project.use(server)
        first = run_json(project, "Hello", "--cache-path", path)
        other_prompt = run_json(project, "Hello!", "--cache-path", path)
        other_system = run_json(project, "Hello", "--cache-path", path, "--system", "Be terse.")
        requests = len(server.requests)

    assert (first["text"], other_prompt["text"], other_system["text"]) == ("One.", "Two.", "Three.")
    assert requests == 3


def test_the_cache_section_of_agent_toml_turns_it_on(project: Project) -> None:
    with MockLLM([Say("Configured.")]) as server:
        project.use(server)
        path = project.root / "configured.db"
        with (project.cwd / "agent.toml").open("a") as config:
            config.write(f'\n[cache]\nenabled = true\npath = "{path}"\nttl = 3600\n')
        live = run_json(project, "Hi")
        replay = run_json(project, "Hi")
        plain = project.run("run", "Hi", "--json")  # the cache is on: no request either
        requests = len(server.requests)

    assert (live["text"], replay["text"]) == ("Configured.", "Configured.")
    assert replay["turn_records"][0]["cached"]
    assert json.loads(plain.stdout)["turn_records"][0]["cached"]
    assert requests == 1
    assert path.is_file()


def test_without_cache_every_run_asks_the_model(project: Project) -> None:
    with MockLLM([Say("A."), Say("B.")]) as server:
        project.use(server)
        first = run_json(project, "Hello")
        second = run_json(project, "Hello")

    assert (first["text"], second["text"]) == ("A.", "B.")
    assert not (project.root / "cache" / "tether" / "responses.db").exists()


def test_a_replayed_turn_is_marked_cached_on_a_dim_line(project: Project) -> None:
    """Without ``--json``, a turn answered from the cache is followed by ``[cached]`` on stderr; a live one is not."""
    with MockLLM([Say("Live answer.")]) as server:
        project.use(server)
        live = project.run("run", "Hello", "--cache")
        replay = project.run("run", "Hello", "--cache")

    assert live.returncode == replay.returncode == 0, live.stderr + replay.stderr
    assert live.stdout == replay.stdout == "Live answer.\n"
    assert "[cached]" not in live.stderr
    assert [line for line in replay.stderr.splitlines() if line == "[cached]"] == ["[cached]"], replay.stderr


def test_cache_path_a_postgresql_url_keeps_the_answers_in_that_database(
    project: Project, request: pytest.FixtureRequest
) -> None:
    """``--cache-path postgresql://...``: the second run is answered from the database (a schema of its own
    here, named in the URL's search_path, dropped after)."""
    require_postgres(request.config, "the PostgreSQL response cache")
    import psycopg

    schema = f"test_cache_{secrets.token_hex(6)}"
    with psycopg.connect(URL, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    url = f"{URL}?options=-csearch_path%3D{schema}"
    try:
        with MockLLM([Say("From the database.")]) as server:
            project.use(server)
            live = run_json(project, "Hello", "--cache-path", url)
            replay = run_json(project, "Hello", "--cache-path", url)
            requests = len(server.requests)
        with psycopg.connect(URL, autocommit=True) as db:
            rows = db.execute(f"SELECT COUNT(*) FROM {schema}.tether_responses").fetchone()
    finally:
        with psycopg.connect(URL, autocommit=True) as db:
            db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    assert requests == 1
    assert replay["text"] == live["text"] == "From the database."
    assert [r["cached"] for r in replay["turn_records"]] == [True]
    assert rows == (1,)
