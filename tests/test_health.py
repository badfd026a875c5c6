"""Agent.health(): the provider over real HTTP on loopback (up, down, refusing the key, silent), real SQLite
stores (writable, and in a directory mounted read-only), and what a report promises (bounded, never raising,
masked, nothing left behind)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.model_api import closed_port, model_api
from tests.postgres import PgSchema
from tests.read_only import run_with_read_only
from tether import Agent, HealthReport
from tether.errors import ConfigInvalid
from tether.health import settle
from tether.providers import ScriptedProvider
from tether.sessions import SQLiteSessionStore

KEY = "sk-health-check-0123456789abcdef"


async def test_a_reachable_provider_is_ok_and_only_its_models_list_is_asked_for_with_the_key() -> None:
    with model_api("models") as api:
        report = await Agent("openai:small-model", base_url=api.url, api_key=KEY).health(timeout=10)

    check = report.get("provider")
    assert check is not None
    assert check.status == "ok", check
    assert check.code is None
    assert check.detail == f"GET {api.url}/models answered with 2 models; small-model among them"
    assert api.requests == [("GET", "/v1/models", f"Bearer {KEY}")]  # no POST: no token spent
    assert report.ok


async def test_a_provider_that_refuses_the_key_fails_auth_failed_with_a_hint_and_the_key_masked() -> None:
    with model_api("refuse") as api:
        report = await Agent("openai:small-model", base_url=api.url, api_key=KEY).health(timeout=10)

    check = report.get("provider")
    assert check is not None
    assert check.status == "failed"
    assert check.code == "auth_failed"
    assert "HTTP 401" in check.detail or "401" in check.detail, check.detail
    assert KEY not in check.detail
    assert "***" in check.detail
    assert "API key" in check.hint
    assert not report.ok
    assert report.failed == (check,)


async def test_a_provider_that_is_down_fails_transport_and_the_report_still_comes_back() -> None:
    with closed_port() as url:
        report = await Agent("openai:small-model", base_url=url, api_key=KEY).health(timeout=10)

    check = report.get("provider")
    assert check is not None
    assert check.status == "failed"
    assert check.code == "transport"
    assert "is the server running" in check.hint


async def test_a_provider_that_never_answers_fails_timeout_within_the_checks_bound() -> None:
    with model_api("hang") as api:
        report = await Agent("openai:small-model", base_url=api.url, api_key=KEY).health(timeout=0.5)

    check = report.get("provider")
    assert check is not None
    assert check.status == "failed"
    assert check.code == "timeout"


async def test_a_provider_running_in_process_is_skipped_and_no_store_is_skipped() -> None:
    report = await Agent(ScriptedProvider([])).health()

    assert [(c.name, c.status) for c in report.checks] == [("provider", "skipped"), ("store", "skipped")]
    assert report.ok  # skipped is not failed


async def test_a_writable_sqlite_store_is_ok_and_keeps_no_probe_session(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    store = SQLiteSessionStore(path)
    try:
        report = await Agent(ScriptedProvider([]), store=store).health()
        listed = await store.list()
    finally:
        await store.aclose()

    check = report.get("store")
    assert check is not None
    assert check.status == "ok", check
    assert check.detail == "a probe session written, read back and deleted (SQLiteSessionStore)"
    assert listed == []
    with sqlite3.connect(path) as db:
        rows = [db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("sessions", "messages")]
    assert rows == [0, 0]


async def test_a_postgresql_store_is_ok_and_keeps_no_probe_session(postgres: PgSchema) -> None:
    from tether.sessions import PostgresSessionStore

    async with PostgresSessionStore(postgres.url, schema=postgres.schema) as store:
        report = await Agent(ScriptedProvider([]), store=store).health(timeout=30)
        listed = await store.list()

    check = report.get("store")
    assert check is not None
    assert check.status == "ok", check
    assert listed == []


async def test_a_store_check_cut_short_by_its_timeout_still_deletes_its_probe_once_the_write_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite"
    store = SQLiteSessionStore(path, timeout=30)
    await store.list()  # the database made
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        report = await Agent(ScriptedProvider([]), store=store).health(timeout=0.5)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await settle()
    try:
        listed = await store.list()
    finally:
        await store.aclose()

    check = report.get("store")
    assert check is not None
    assert check.code == "timeout"
    assert "locked" in check.hint
    assert listed == []


READ_ONLY_HEALTH = """
import json, sys
from tether import Agent
from tether.providers import ScriptedProvider
from tether.sessions import SQLiteSessionStore
report = Agent(ScriptedProvider([]), store=SQLiteSessionStore(sys.argv[1])).health_sync(timeout=10)
print(json.dumps(report.to_dict()))
"""


def test_a_store_in_a_read_only_directory_fails_store_unavailable_without_raising(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    directory.mkdir()

    done = run_with_read_only(directory, [sys.executable, "-c", READ_ONLY_HEALTH, str(directory / "s.sqlite")])

    assert done.returncode == 0, done.stderr
    store = next(check for check in json.loads(done.stdout)["checks"] if check["name"] == "store")
    assert store["status"] == "failed"
    assert store["code"] == "store_unavailable"
    assert "Read-only file system" in store["detail"]
    assert "permissions" in store["hint"]
    assert list(directory.iterdir()) == []


def test_health_sync_runs_outside_async_code_and_refuses_inside() -> None:
    agent = Agent(ScriptedProvider([]))

    assert isinstance(agent.health_sync(), HealthReport)

    async def inside() -> None:
        agent.health_sync()

    with pytest.raises(RuntimeError, match=r"await agent\.health"):
        asyncio.run(inside())


async def test_a_timeout_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ConfigInvalid, match="timeout must be > 0"):
        await Agent(ScriptedProvider([])).health(timeout=0)


def test_the_report_as_json_names_every_field_of_every_check() -> None:
    report = Agent(ScriptedProvider([])).health_sync()

    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is True
    assert set(data["checks"][0]) == {"name", "status", "duration_ms", "detail", "code", "hint"}


def test_health_is_importable_without_a_provider_being_loaded() -> None:
    code = "import sys, tether.health; print(any(m.startswith('tether.providers.openai') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
