"""tether as a user gets it: the built wheel, installed alone in a fresh virtual environment.

The wheel ships ``py.typed`` (a user's ``mypy --strict`` reads tether's types), ``python -m tether`` is the
command, the version has one source, and the pytest plugin loads through its entry point. The fresh venv has
no pip and no copy of tether but the wheel's; a ``.pth`` line lends it the dependencies of this one.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import tether

ROOT = Path(__file__).resolve().parent.parent

USER_CODE = '''
from tether import Agent, Limits, RunResult, StopReason, tool
from tether.providers.scripted import ScriptedProvider, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def answer() -> tuple[str, StopReason, int]:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    result: RunResult = Agent(model, tools=[add], limits=Limits(max_turns=3)).run_sync("2+3?")
    return result.text, result.stop_reason, result.usage.input_tokens
'''

USER_TYPE_ERROR = """
from tether import Agent

result = Agent("scripted:echo").run_sync("hi")
wrong = result.text + 1
"""

USER_TYPED = """
from dataclasses import dataclass
from pydantic import BaseModel
from tether import Agent, RunContext, tool

class Invoice(BaseModel):
    total: float

@dataclass
class Shop:
    name: str

@tool
def where(ctx: RunContext[Shop]) -> str:
    '''Where we are.'''
    return ctx.deps.name

def system(ctx: RunContext[Shop]) -> str:
    return ctx.deps.name.upper()

agent = Agent("scripted:x", tools=[where], deps_type=Shop, system=system)
reveal_type(agent)
agent.run_sync("hi", deps=Shop("corner"))

def wrong(ctx: RunContext[Shop]) -> str:
    return str(ctx.deps.address)

agent.run_sync("hi", deps=3)
plain = Agent("scripted:x")
reveal_type(plain)
typed = Agent("scripted:x", output_type=Invoice)
reveal_type(typed.run_sync("x").output)
total: float = typed.run_sync("x").output.total
reveal_type(plain.run_sync("x").output)
wrong_total: str = typed.run_sync("x").output.total
"""
"""A user's file with ``Agent[Deps, Output]``, ``RunContext[Deps]`` and ``RunResult[Output]``: what a type checker
must know (revealed types), and the three mistakes it must catch."""

USER_TESTS = """
from collections.abc import Callable

import pytest

from tether import Agent
from tether.providers.scripted import reply
from tether.sessions import MemorySessionStore, SessionStore
from tether.testing import ScriptFactory
from tether.testing.store_conformance import SessionStoreConformance


def test_a_scripted_run(tether_scripted: ScriptFactory) -> None:
    assert Agent(tether_scripted(reply("5"))).run_sync("2+3?").text == "5"


class TestMemoryStore(SessionStoreConformance):
    @pytest.fixture
    def open_store(self) -> Callable[[], SessionStore]:
        store = MemorySessionStore()
        return lambda: store
"""


@dataclass(frozen=True)
class Venv:
    path: Path
    python: Path
    env: dict[str, str]

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=180, check=False
        )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from this checkout (offline with hatchling at hand; else pip fetches it to build)."""
    out = tmp_path_factory.mktemp("dist")
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(out), str(ROOT)]
    subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    (built,) = out.glob("tether-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the wheel installed, and this venv's site-packages appended to its path."""
    path = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MYPY", "PYTEST"))}
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*install, str(wheel)], capture_output=True, text=True, timeout=300, check=True, env=env)
    lent = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, timeout=60, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "zz_lent_dependencies.pth").write_text("".join(f"{entry}\n" for entry in lent))
    return Venv(path, python, env)


def test_the_wheel_ships_py_typed_main_and_the_plugin_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        declared = archive.read(entry_points).decode()
    assert {"tether/py.typed", "tether/__main__.py", "tether/testing/plugin.py"} <= names
    assert "[pytest11]\ntether = tether.testing.plugin" in declared
    assert wheel.name == f"tether-{tether.__version__}-py3-none-any.whl"


def test_the_wheel_ships_the_served_page(wheel: Path) -> None:
    """``tether serve``'s page is static files beside the code (``serve/page/``), not Python: the wheel must carry
    them, or an installed server answers ``/`` with nothing."""
    page = ROOT / "src" / "tether" / "serve" / "page"
    files = {f"tether/serve/page/{path.name}" for path in page.iterdir() if path.is_file()}
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name: archive.read(name) for name in files & set(archive.namelist())}
    assert {"tether/serve/page/index.html", "tether/serve/page/app.js", "tether/serve/page/style.css"} <= files
    assert shipped == {name: (page / name.rsplit("/", 1)[1]).read_bytes() for name in files}


def test_the_venv_imports_the_installed_wheel_and_its_metadata_has_the_one_version(venv: Venv) -> None:
    code = "import importlib.metadata as m, tether; print(tether.__file__, m.version('tether'), tether.__version__)"
    completed = venv.run("-c", code, cwd=venv.path)

    file, metadata_version, version = completed.stdout.split()
    assert Path(file).is_relative_to(venv.path), completed.stderr
    assert metadata_version == version == tether.__version__


def test_python_m_tether_is_the_command(venv: Venv) -> None:
    helped = venv.run("-m", "tether", "--help", cwd=venv.path)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("Usage: python -m tether [OPTIONS] COMMAND [ARGS]...")
    assert "Run LLM agents from the command line." in helped.stdout

    versioned = venv.run("-m", "tether", "--version", cwd=venv.path)
    assert versioned.stdout == f"tether {tether.__version__}\n"

    misused = venv.run("-m", "tether", "--no-such-option", cwd=venv.path)
    assert misused.returncode == 2
    assert "No such option '--no-such-option'" in misused.stderr


def test_a_users_mypy_strict_reads_tethers_types(venv: Venv, tmp_path: Path) -> None:
    (tmp_path / "uses_tether.py").write_text(USER_CODE)
    (tmp_path / "type_error.py").write_text(USER_TYPE_ERROR)
    cache = tmp_path / ".mypy_cache"
    checked = venv.run(
        "-m", "mypy", "--strict", "--cache-dir", str(cache), "uses_tether.py", "type_error.py", cwd=tmp_path
    )

    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert errors == ['type_error.py:5: error: Unsupported operand types for + ("str" and "int")  [operator]'], (
        checked.stdout + checked.stderr
    )
    assert checked.returncode == 1


def test_a_users_mypy_strict_knows_the_deps_and_the_output_types(venv: Venv, tmp_path: Path) -> None:
    (tmp_path / "user_code.py").write_text(USER_TYPED)
    checked = venv.run(
        "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), "user_code.py", cwd=tmp_path
    )
    lines = checked.stdout.splitlines()
    revealed = [line.split('Revealed type is "')[1].rstrip('"') for line in lines if "Revealed type" in line]
    assert revealed == [
        "tether.agent.Agent[user_code.Shop, str]", "tether.agent.Agent[None, str]", "user_code.Invoice", "str",
    ], lines  # fmt: skip
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 3, lines
    assert '"Shop" has no attribute "address"' in errors[0]
    assert 'Argument "deps" to "run_sync" of "Agent" has incompatible type "int"; expected "Shop"' in errors[1]
    assert 'Incompatible types in assignment (expression has type "float", variable has type "str")' in errors[2]


def test_a_users_pytest_gets_the_plugin_and_runs_the_conformance_suite(venv: Venv, tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings = error\nasyncio_default_fixture_loop_scope = function\n"
    )
    tested = venv.run("-m", "pytest", "-rA", "-p", "no:cacheprovider", cwd=tmp_path)

    assert tested.returncode == 0, tested.stdout + tested.stderr
    passed = [line for line in tested.stdout.splitlines() if line.startswith("PASSED test_user.py::")]
    assert "PASSED test_user.py::test_a_scripted_run" in passed
    assert len([line for line in passed if "::TestMemoryStore::test_" in line]) >= 40
    assert re.fullmatch(r"=+ \d+ passed in .*", tested.stdout.strip().splitlines()[-1])
