"""A model server that is not there: the run says why once, in the system's words, and how to check the
server (``tether probe``), in a pseudo-terminal as a user sees it."""

from __future__ import annotations

import socket

import pexpect

from tests.e2e.conftest import Project, screen
from tether.cli import exits


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_refused_connection_is_told_once_with_the_probe_to_run(project: Project) -> None:
    port = free_port()
    (project.cwd / "agent.toml").write_text(
        '[runtime]\nmodel = "openai-compatible:m"\nretries = 0\n\n'
        f'[providers.openai-compatible]\nbase_url = "http://127.0.0.1:{port}/v1"\n'
    )

    child = project.spawn("run", "hello")
    child.expect(rf"tether probe 127\.0\.0\.1:{port}")
    child.expect(pexpect.EOF)
    child.close()

    shown = screen(child)
    assert child.exitstatus == exits.ERROR, shown
    assert shown.count(f"cannot connect to 127.0.0.1:{port}") == 1, shown
    assert "Connection refused" in shown
    assert "answer not used" not in shown
    assert "ssl:default" not in shown
