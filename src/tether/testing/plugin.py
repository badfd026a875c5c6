"""tether's pytest plugin, loaded by pytest through the ``pytest11`` entry point (never by ``import tether``).

``tether_scripted`` builds :class:`~tether.providers.scripted.ScriptedProvider`\\ s from steps and, when the
test passed, fails it at teardown if one of them has steps that were never played: a script longer than
the run is a test that no longer tests what it says. Without the entry point (a checkout not installed),
``pytest -p tether.testing.plugin`` or ``pytest_plugins = ["tether.testing.plugin"]`` in the root
``conftest.py`` loads it.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tether.providers.scripted import Responder, ScriptedProvider, Step
    from tether.testing.runs import ScriptFactory

_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Remember whether the test itself passed, so a teardown check does not pile onto a failure."""
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


@pytest.fixture
def tether_scripted(request: pytest.FixtureRequest) -> Iterator[ScriptFactory]:
    """``tether_scripted(reply("hi"), ...)``: a ScriptedProvider; a passing test must play every step."""
    from tether.providers.scripted import ScriptedProvider

    built: list[ScriptedProvider] = []

    def build(*steps: Step | Responder, **options: Any) -> ScriptedProvider:
        provider = ScriptedProvider(steps, **options)
        built.append(provider)
        return provider

    yield build
    if request.node.stash.get(_PASSED, False):
        for provider in built:
            provider.assert_consumed()
