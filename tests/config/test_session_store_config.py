"""``[session]`` for the PostgreSQL store: ``store = "postgres"`` with its ``url``, checked when loaded, and
the URL's password never shown by ``config show`` or in an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tether.cli.build import open_store
from tether.config.show import render_json, render_toml
from tether.errors import ConfigInvalid
from tether.sessions import PostgresSessionStore

URL = "postgresql://agent:hunter2-secret@db.internal:5432/agents"


def test_the_postgres_store_takes_its_url_and_the_cli_makes_the_store(dirs: Dirs, tmp_path: Path) -> None:
    dirs.write_project(f'[session]\nstore = "postgres"\nurl = "{URL}"\n')
    settings = dirs.load().config.session
    assert (settings.store, settings.url, settings.db_schema) == ("postgres", URL, "tether")

    dirs.write_project(f'[session]\nstore = "postgres"\nurl = "{URL}"\ndb_schema = "team_agents"\n')
    store = open_store(dirs.load().config.session, tmp_path, {})
    assert isinstance(store, PostgresSessionStore)
    assert (store.url, store.schema) == (URL, "team_agents")


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ('store = "postgres"\n', "session.url", "is required for store 'postgres'"),
        ('store = "postgres"\nurl = "mysql://agent:hunter2@db/agents"\n', "session.url", "must be a postgresql:// URL"),
        (f'store = "sqlite"\nurl = "{URL}"\n', "session.url", "is only for store 'postgres'"),
        (f'store = "postgres"\nurl = "{URL}"\npath = "s.db"\n', "session.path", "is not for store 'postgres'"),
        ('store = "postgress"\n', "session.store", "did you mean 'postgres'"),
        ('store = "files"\ndb_schema = "agents"\n', "session.db_schema", "is only for store 'postgres'"),
        (f'store = "postgres"\nurl = "{URL}"\ndb_schema = "My-Agents"\n', "session.db_schema", "lowercase letters"),
    ],
)
def test_a_postgres_session_table_that_cannot_work_is_an_error_naming_the_key(
    dirs: Dirs, text: str, key: str, problem: str
) -> None:
    dirs.write_project(f"[session]\n{text}")

    [issue] = dirs.issues()

    assert issue["key"] == key
    assert problem in issue["message"]
    assert "hunter2" not in json.dumps(issue)


def test_config_show_hides_the_urls_password(dirs: Dirs) -> None:
    dirs.write_project(f'[session]\nstore = "postgres"\nurl = "{URL}"\n')
    loaded = dirs.load()

    for text in (render_toml(loaded, {}), render_json(loaded, {})):
        assert "hunter2" not in text
        assert "postgresql://agent:***@db.internal:5432/agents" in text


def test_without_the_postgres_extra_the_cli_says_what_to_install(
    dirs: Dirs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a))
    dirs.write_project(f'[session]\nstore = "postgres"\nurl = "{URL}"\n')

    with pytest.raises(ConfigInvalid, match=r"pip install 'tether\[postgres\]'"):
        open_store(dirs.load().config.session, tmp_path, {})
