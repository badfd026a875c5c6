"""Every code block of the docs (``docs/*.md``) and the README either runs or is checked as far as it can be.

- A ``python`` block runs. A page's blocks run in order in one fresh interpreter and one namespace, as a reader
  following the page would paste them into one console (a later block may use what an earlier one defined);
  top-level ``await`` is allowed, as in ``python -m asyncio``. Each page runs in an empty temporary directory,
  with no API key in its environment, within a time limit.
- A ``python`` block that needs what CI does not have (an API key, a PostgreSQL server, an MCP server from npm)
  says so on the line before its fence, ``<!-- needs: an OpenAI API key -->`` (an HTML comment, which the site
  does not show), and is only compiled.
- A ``tether ...`` command in a shell or text block names a command that exists, and only options it has.
- A ``toml`` block is a valid ``agent.toml``, every key one tether reads; a ``json`` block parses.
- A ``python`` block imports only from the public faces, never from a module inside the package.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NEEDS = re.compile(r"<!-- needs: (.*) -->")
PUBLIC = {
    "tether",
    "tether.providers",
    "tether.tools",
    "tether.sessions",
    "tether.durable",
    "tether.serve",
    "tether.telemetry",
    "tether.testing",
    "tether.testing.store_conformance",
    "tether.config",
    "tether.skills",
}
FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT

# Runs a page's blocks, given as JSON on stdin, in one namespace; says which block failed and how.
RUNNER = """
import ast, asyncio, inspect, json, sys, traceback
loop = asyncio.new_event_loop()
namespace = {"__name__": "__main__"}
for where, code in json.load(sys.stdin):
    try:
        done = eval(compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
        if inspect.iscoroutine(done):
            loop.run_until_complete(done)
    except BaseException:
        print(f"{where} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    info: str
    code: str
    needs: str | None

    @property
    def language(self) -> str:
        return self.info.split(" ", 1)[0]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]  # the line before the fence
            needs = NEEDS.fullmatch(before)
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(page.name, line, match.group(1).strip(), match.group(2), needs and needs.group(1)))
    return found


def python_pages() -> dict[str, list[Block]]:
    pages: dict[str, list[Block]] = {}
    for block in blocks():
        if block.language == "python":
            pages.setdefault(block.page, []).append(block)
    return pages


def offline_environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TETHER_")}
    return {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / "data")}


def runnable_pages() -> list[str]:
    return sorted(page for page, found in python_pages().items() if any(block.needs is None for block in found))


@pytest.mark.parametrize("page", runnable_pages())
def test_the_python_blocks_of_a_page_run(page: str, tmp_path: Path) -> None:
    runnable = [(block.where, block.code) for block in python_pages()[page] if block.needs is None]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(runnable),
        cwd=tmp_path,
        env=offline_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_fence_names_its_language_alone_which_the_site_renders() -> None:
    for block in blocks():
        assert re.fullmatch(r"[\w-]*", block.info), f"{block.where}: ```{block.info} is not rendered as code"


def test_a_block_that_cannot_run_says_what_it_needs_and_compiles() -> None:
    marked = [block for block in blocks() if block.needs is not None]
    assert marked, "the marker is in use"
    for block in marked:
        assert block.language == "python", f"{block.where}: only a python block is marked"
        assert (block.needs or "").strip(), f"{block.where}: says what it needs"
        compile(block.code, block.where, "exec", flags=FLAGS | ast.PyCF_ONLY_AST)


def test_the_runner_reports_the_block_that_fails(tmp_path: Path) -> None:
    blocks_ = [("page.md:1", "x = 1"), ("page.md:5", "async def f():\n    return x\nassert await f() == 2")]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER], input=json.dumps(blocks_), cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "page.md:5 failed" in done.stderr
    assert "AssertionError" in done.stderr


def imported_modules(code: str) -> set[str]:
    tree = ast.parse(code)
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return {name for name in names if name == "tether" or name.startswith("tether.")}


def test_the_python_blocks_import_only_from_the_public_faces() -> None:
    for block in blocks():
        if block.language == "python":
            internal = imported_modules(block.code) - PUBLIC
            assert not internal, f"{block.where} imports from {sorted(internal)}: use the public faces"


def tether_commands() -> list[tuple[str, list[str]]]:
    """``(where, words after "tether")`` of each command line of the shell and text blocks; a synopsis's
    alternatives (``tether sessions list | show ID``) each on their own."""
    commands = []
    for block in blocks():
        if block.language not in {"sh", "text", "console", ""}:
            continue
        for offset, line in enumerate(block.code.splitlines(), start=1):
            line = line.strip().removeprefix("$ ")
            if not line.startswith("tether ") or "·" in line:  # "tether py · Python 3.12 ..." is a banner
                continue
            segments = re.split(r"\s+\|\s+", line.split("  #", 1)[0].split(" # ", 1)[0])
            first = shlex.split(segments[0])[1:]
            where = f"{block.page}:{block.line + offset}"
            commands.append((where, first))
            path = [word for word in first if not word.startswith("-")][:1]
            commands += [(where, [*path, *shlex.split(alternative)]) for alternative in segments[1:]]
    return commands


def check_command(words: list[str]) -> None:
    """Fails unless ``tether WORDS`` names a command, and every option on it is one of that command's."""
    from tether.cli.app import main

    command: click.Command = main
    context = click.Context(main, info_name="tether")
    index = 0
    while isinstance(command, click.Group) and index < len(words) and not words[index].startswith("-"):
        found = command.get_command(context, words[index])
        assert found is not None, f"no command {' '.join(words[: index + 1])!r}"
        command, context, index = found, click.Context(found, info_name=words[index], parent=context), index + 1
    known = {"--help", "-h"} | {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for word in words[index:]:
        if word in {"<", ">", "|"}:
            break
        option = word.strip("[]").split("=", 1)[0]
        if option.startswith("--"):
            assert option in known, f"{command.name} has no option {option}"
        elif option.startswith("-") and option != "-":  # short options may be joined: -vv
            for letter in option[1:]:
                assert f"-{letter}" in known, f"{command.name} has no option -{letter}"


def test_the_tether_commands_of_the_docs_exist_with_their_options() -> None:
    commands = tether_commands()
    assert len(commands) > 20
    for where, words in commands:
        try:
            check_command(words)
        except AssertionError as error:
            raise AssertionError(f"{where}: tether {' '.join(words)}: {error}") from None


@pytest.mark.parametrize(
    ("words", "wrong"),
    [(["sessions", "lsit"], "no command"), (["run", "--yess"], "no option"), (["run", "-vx"], "no option -x")],
)
def test_a_wrong_command_or_option_is_caught(words: list[str], wrong: str) -> None:
    with pytest.raises(AssertionError, match=wrong):
        check_command(words)


def test_the_toml_blocks_are_valid_agent_toml_files(tmp_path: Path) -> None:
    from tether.config import load_config
    from tether.errors import TetherError

    toml_blocks = [block for block in blocks() if block.language == "toml"]
    assert toml_blocks
    for block in toml_blocks:
        (tmp_path / "agent.toml").write_text(block.code)
        try:
            load_config(tmp_path, {"HOME": str(tmp_path)})
        except TetherError as error:
            raise AssertionError(f"{block.where}: {error}") from None


def test_the_json_blocks_parse() -> None:
    for block in blocks():
        if block.language == "json":
            json.loads(block.code)


README = ROOT / "README.md"


def readme_agent_block() -> str:
    """The README's "An agent in twenty lines" example, as it is written there."""
    text = README.read_text()
    section = text[text.index("## An agent in twenty lines") :]
    match = RUNNABLE_README.search(section)
    assert match is not None, "the README's twenty-line example is a ```python block"
    return match.group(1)


RUNNABLE_README = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_readmes_twenty_line_agent_runs_and_both_its_runs_complete(tmp_path: Path) -> None:
    """The example run verbatim, then its two results checked: the follow-up is answered by the script too
    (a script that ran out would end it with ``error``)."""
    checks = (
        "\nassert result.stop_reason == 'complete', (result.stop_reason, result.detail)"
        "\nassert follow_up.stop_reason == 'complete', (follow_up.stop_reason, follow_up.detail)"
        "\nmodel.assert_consumed()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", readme_agent_block() + checks],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert printed[0].startswith("5 complete Usage(")
    assert printed[1] == "20 complete"
