"""`tether --help` answers at once: it and `tether run --help` import no HTTP, pydantic or terminal library;
every command has its help, and `--version` prints the version."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tether import __version__

HEAVY = ("aiohttp", "pydantic", "pydantic_core", "rich", "prompt_toolkit", "tomlkit", "jsonschema", "orjson", "uvloop")

CHECK = """
import sys
from tether.cli.app import main
try:
    main(sys.argv[1:], prog_name="tether")
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(" ".join(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[0].split(","))) or "-"), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["run", "--help"], ["chat", "--help"], ["py", "--help"], ["sessions", "--help"],
     ["config", "--help"], ["config", "migrate", "--help"]],
)  # fmt: skip
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", CHECK.replace("sys.argv[0]", repr(",".join(HEAVY))), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stderr.strip() == "-", f"tether {' '.join(args)} imported {completed.stderr.strip()}"
    assert "Usage: tether" in completed.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--help"], ["PROMPT", "--model", "--session", "--continue", "--json", "--yes", "--mode", "--max-turns",
                             "130", "--config", "TETHER_CONFIG", "cli.stream", "--trace", "--verbose", "-vv",
                             "OTEL_EXPORTER_OTLP_ENDPOINT", "--no-compact", "--context-window", "[compaction]"]),
        (["chat", "--help"], ["--model", "--session", "--continue", "/help", "Esc then Enter", "--config",
                              "--verbose", "--no-compact", "--context-window"]),
        (["py", "--help"], ["SCRIPT", "?QUESTION", "%ask", "/ask", "Ctrl-C", "Ctrl-D", "python -i", "--model",
                            "--config", "--verbose"]),
        (["config", "--help"], ["--config", "TETHER_CONFIG", "show", "set", "init", "path", "migrate"]),
        (["config", "migrate", "--help"], ["PATH", "older layout", ".bak"]),
        (["sessions", "--help"], ["list", "show", "delete", "export"]),
        (["sessions", "export", "--help"], ["--format", "json", "markdown"]),
        (["models", "--help"], ["prices"]),
        (["--help"], ["run", "chat", "py", "sessions", "models", "config", "probe"]),
    ],
)  # fmt: skip
def test_every_command_has_help(args: list[str], words: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "tether.cli.app", *args], capture_output=True, text=True, timeout=60, check=True
    )
    for word in words:
        assert word in completed.stdout


def test_version() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "tether.cli.app", "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout == f"tether {__version__}\n"


@pytest.mark.parametrize("group", [[], ["runs"], ["sessions"], ["config"]])
def test_every_command_summary_is_shown_whole_at_80_columns(group: list[str]) -> None:
    """click cuts a summary that does not fit beside its command's name with ``...``; each is shown whole,
    wrapped, as the first sentence of the command's help."""
    import os

    import click

    from tether.cli.app import main

    completed = subprocess.run(
        [sys.executable, "-m", "tether", *group, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    listing = completed.stdout.split("Commands:", 1)[1]
    command: click.Command = main
    for name in group:
        found = command.commands[name] if isinstance(command, click.Group) else None
        assert found is not None
        command = found
    assert isinstance(command, click.Group)
    assert "..." not in listing, listing
    flat = " ".join(listing.split())
    for name, sub in command.commands.items():
        first = " ".join((sub.help or "").split("\n\n")[0].split())
        sentence = first.split(". ")[0].rstrip(".") + "."
        assert f"{name} {sentence}" in flat, (name, sentence, listing)
