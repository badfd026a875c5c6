"""The deployment kit (``deploy/``) and the page that describes it (docs/durable.md, "Running in production").

The compose file parses (PyYAML), starts PostgreSQL and two workers, and its workers' commands are the ones the
page shows, with options ``tether worker`` has; the image installs the durable extra; the agent file loads.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from tests.test_docs import check_command

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
WORKERS = ("worker-1", "worker-2")


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def section() -> str:
    """The page's "Running in production" section."""
    page = (ROOT / "docs" / "durable.md").read_text()
    start = page.index("## Running in production")
    return page[start : page.index("\n## ", start + 1)]


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_compose_file_starts_postgresql_and_two_workers_with_ids_of_their_own() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", *WORKERS}
    assert services["postgres"]["image"].startswith("postgres:")
    commands = [services[name]["command"] for name in WORKERS]
    for name, command in zip(WORKERS, commands, strict=True):
        assert command[:2] == ["tether", "worker"]
        check_command(command[1:])  # every option is one tether worker has
        assert option(command, "--worker-id") == name
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert services[name]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        health = services[name]["healthcheck"]["test"]
        assert health[:3] == ["CMD", "tether", "doctor"]
        check_command(health[2:])
    assert len({option(command, "--db") for command in commands}) == 1  # one database
    assert {option(command, "--queue") for command in commands} == {"jobs"}
    assert option(commands[0], "--db").startswith("postgresql://")


def test_the_page_names_the_compose_files_services_and_shows_its_workers_commands() -> None:
    text = section()
    assert "deploy/compose.yaml" in text
    for name in ("postgres", *WORKERS):
        assert f"`{name}`" in text
    shown = [line for line in text.splitlines() if line.startswith("tether worker ")]
    services = compose()["services"]
    assert shown == [shlex.join(services[name]["command"]) for name in WORKERS]


def test_the_image_installs_the_durable_extra_and_the_workers_agent_file_loads(tmp_path: Path) -> None:
    from tether.config import load_config

    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert 'pip install --no-cache-dir ".[durable]"' in dockerfile
    assert "./agent.toml:/srv/agent.toml:ro" in compose()["services"]["worker-1"]["volumes"]
    (tmp_path / "agent.toml").write_text((DEPLOY / "agent.toml").read_text())
    config = load_config(tmp_path, {"HOME": str(tmp_path)})
    assert config.runtime.model == "openai:gpt-4o-mini"
