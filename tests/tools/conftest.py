"""Fixtures of the tool tests."""

from __future__ import annotations

import pytest

from tests.tools.sandboxing import require_bwrap


@pytest.fixture
def bwrap_here(request: pytest.FixtureRequest) -> None:
    """Skip (fail under ``CI=true``) when bubblewrap cannot sandbox on this machine."""
    require_bwrap(request.config)
