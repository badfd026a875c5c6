"""Fixtures of the tool tests."""

from __future__ import annotations

import os

import pytest

from tests.tools.sandboxing import PROBLEM

_announced: list[str] = []


@pytest.fixture
def bwrap_here(request: pytest.FixtureRequest) -> None:
    """Skip (fail under ``CI=true``) when bubblewrap cannot sandbox on this machine, printing why once."""
    if PROBLEM is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must test the bash sandbox, but {PROBLEM}", pytrace=False)
    reason = f"no bash sandbox on this machine: {PROBLEM}"
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and not _announced:
        _announced.append(reason)
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nskipping the sandbox tests: {reason}", yellow=True)
    pytest.skip(reason)
