"""`tether run` and `tether chat` run on uvloop when it is installed (the dev extra installs it), and on asyncio's
own loop with ``TETHER_LOOP=asyncio``."""

from __future__ import annotations

import asyncio
import sys

import pytest

from tether.cli import eventloop


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not support Windows")
def test_uvloop_runs_the_commands_when_installed() -> None:
    assert eventloop.loop_name({}) == "uvloop"
    assert eventloop.run(loop_module(), {}).startswith("uvloop")


def test_tether_loop_asyncio_keeps_asyncio_s_loop() -> None:
    assert eventloop.loop_name({"TETHER_LOOP": "asyncio"}) == "asyncio"
    assert eventloop.run(loop_module(), {"TETHER_LOOP": "asyncio"}).startswith("asyncio")


def test_without_uvloop_the_loop_is_asyncio_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # an import of it raises ImportError, as when not installed
    assert eventloop.loop_name({}) == "asyncio"
    assert eventloop.run(loop_module(), {}).startswith("asyncio")
