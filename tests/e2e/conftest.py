"""The installed ``tether`` command, run as a user would: in a pseudo-terminal (pexpect) or as a subprocess,
in a temporary project with HOME and the XDG directories in temporary places, against a local mock model."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

from tests.e2e.mock_llm import MockLLM

TETHER = str(Path(sys.executable).with_name("tether"))
TIMEOUT = 30


@dataclass
class Project:
    """A working directory and a user's home around it."""

    root: Path
    home: Path

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sessions_db(self) -> Path:
        return self.data / "tether" / "sessions.db"

    def env(self, **extra: str) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TETHER_", "PYTEST_")) and not k.endswith(("_API_KEY", "_TOKEN"))
        }
        return {
            **base,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.data),
            "XDG_STATE_HOME": str(self.root / "state"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "TERM": "xterm",
            "NO_COLOR": "1",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "COLUMNS": "200",
            "TETHER_LOCAL_SERVERS": "off",  # no model server of the machine's is picked up (tests/conftest.py)
            **extra,
        }

    def use(self, server: MockLLM, **limits: int) -> None:
        """Point ``./agent.toml`` at the mock server."""
        lines = ["[runtime]", 'model = "openai-compatible:mock"', "", "[runtime.limits]", "request_timeout = 30"]
        lines += [f"{key} = {value}" for key, value in limits.items()]
        lines += ["", "[providers.openai-compatible]", f'base_url = "{server.base_url}"', ""]
        (self.cwd / "agent.toml").write_text("\n".join(lines))

    def spawn(self, *args: str, **env: str) -> pexpect.spawn[str]:
        """``tether ARGS`` in a pseudo-terminal; what it prints is kept in ``child.logfile_read``."""
        child = pexpect.spawn(
            TETHER,
            list(args),
            cwd=str(self.cwd),
            env=self.env(**env),
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(50, 200),
        )
        child.logfile_read = io.StringIO()
        return child

    def run(self, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        """``tether ARGS`` as a subprocess with no terminal (stdin from ``stdin``, else /dev/null)."""
        return subprocess.run(
            [TETHER, *args],
            cwd=self.cwd,
            env=self.env(**env),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT * 2,
            check=False,
        )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = Project(tmp_path, tmp_path / "home")
    for path in (made.cwd, made.home):
        path.mkdir(parents=True)
    return made


def screen(child: pexpect.spawn[str]) -> str:
    """Everything the child printed so far (for assertion messages)."""
    log = child.logfile_read
    return log.getvalue() if isinstance(log, io.StringIO) else ""


@pytest.fixture
def children() -> Iterator[list[pexpect.spawn[str]]]:
    """Spawned children, killed at the end if a test left them running."""
    spawned: list[pexpect.spawn[str]] = []
    yield spawned
    for child in spawned:
        if child.isalive():
            child.terminate(force=True)
