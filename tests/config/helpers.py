"""Shared helpers for the configuration tests: a project and a home directory in tmp, and loading them."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.config.load import Loaded, load
from tether.errors import ConfigInvalid


@dataclass
class Dirs:
    """A working directory and a home directory (with no XDG_CONFIG_HOME) for one test."""

    project: Path
    home: Path

    @property
    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home)}

    @property
    def agent_toml(self) -> Path:
        return self.project / "agent.toml"

    @property
    def user_toml(self) -> Path:
        return self.home / ".config" / "tether" / "config.toml"

    def write_project(self, text: str) -> Path:
        self.agent_toml.write_text(textwrap.dedent(text))
        return self.agent_toml

    def write_user(self, text: str) -> Path:
        self.user_toml.parent.mkdir(parents=True, exist_ok=True)
        self.user_toml.write_text(textwrap.dedent(text))
        return self.user_toml

    def load(self, env: Mapping[str, str] | None = None, flags: Mapping[str, object] | None = None) -> Loaded:
        return load(self.project, {**self.env, **(env or {})}, flags)

    def issues(self, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """The problems loading reports (it must fail)."""
        with pytest.raises(ConfigInvalid) as caught:
            self.load(env)
        issues: list[dict[str, Any]] = caught.value.details["issues"]
        return issues


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return Dirs(project, home)
