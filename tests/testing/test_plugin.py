"""The pytest plugin, run as users run it: a real pytest on a test file of theirs, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tether

SOURCE = str(Path(tether.__file__).resolve().parents[1])

USER_TESTS = '''
from tether import Agent, tool
from tether.providers.scripted import call, reply
from tether.testing import ScriptFactory


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_played_to_the_end(tether_scripted: ScriptFactory) -> None:
    model = tether_scripted(call("add", {"a": 2, "b": 3}), reply("5"))
    assert Agent(model, tools=[add]).run_sync("2+3?").text == "5"


def test_left_a_step(tether_scripted: ScriptFactory) -> None:
    model = tether_scripted(reply("5"), reply("never asked for"))
    assert Agent(model).run_sync("2+3?").text == "5"


def test_failed_and_left_a_step(tether_scripted: ScriptFactory) -> None:
    model = tether_scripted(reply("5"), reply("never asked for"))
    assert Agent(model).run_sync("2+3?").text == "6"


def test_two_providers_one_left_a_step(tether_scripted: ScriptFactory) -> None:
    first, second = tether_scripted(reply("a")), tether_scripted(reply("b"), reply("c"))
    assert Agent(first).run_sync("x").text == "a"
    assert Agent(second).run_sync("y").text == "b"
'''


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest on the user's file with the plugin loaded by name (plugin auto-loading off: the checkout may not
    be installed, and its entry point must not load it a second time)."""
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    env = {**os.environ, "PYTHONPATH": SOURCE, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "tether.testing.plugin", "-rA", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def outcomes(output: str) -> dict[str, str]:
    """``PASSED test_user.py::test_x`` lines of the short summary, as {test name: outcome}."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word in {"PASSED", "FAILED", "ERROR"} and "::" in rest:
            name = rest.split("::")[1].split(" ")[0]
            found[name] = f"{found[name]}+{word}" if name in found else word
    return found


def test_tether_scripted_fails_a_passing_test_whose_script_was_not_played_to_the_end(tmp_path: Path) -> None:
    completed = run_pytest(tmp_path)

    assert outcomes(completed.stdout) == {
        "test_played_to_the_end": "PASSED",
        "test_left_a_step": "PASSED+ERROR",  # the test passed; its teardown fails it
        "test_failed_and_left_a_step": "FAILED",  # the failure alone, no teardown error on top
        "test_two_providers_one_left_a_step": "PASSED+ERROR",
    }, completed.stdout
    assert "1 step(s) never played: step(text='never asked for')" in completed.stdout
    assert "1 step(s) never played: step(text='c')" in completed.stdout
    assert completed.returncode == 1


def test_importing_tether_testing_imports_neither_pytest_nor_a_provider() -> None:
    code = "import sys, tether.testing; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pytest' "
    code += "or m.startswith('tether.providers') or m.startswith('tether.agent')))"
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SOURCE},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout.strip() == "[]"
