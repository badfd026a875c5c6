"""Files a user or a repository names are read safely: only regular files, only so much of each, and a FIFO or a
device never hangs or floods the process (configuration, AGENTS.md, ``--system @FILE``, ``--schema``, attachments,
batch prompts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.bounded import NotRegular, TooLarge, read_bounded
from tether.cli.build import agents_md
from tether.config import load
from tether.errors import ConfigInvalid
from tether.messages import Attachment


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_a_regular_file_is_read_whole_or_refused_past_the_limit(tmp_path: Path) -> None:
    file = tmp_path / "a.txt"
    file.write_bytes(b"x" * 100)
    assert read_bounded(file, 100) == b"x" * 100
    with pytest.raises(TooLarge, match="larger than 99 bytes"):
        read_bounded(file, 99)
    assert read_bounded(file, 10, head=True) == b"x" * 10


def test_a_device_a_fifo_or_a_directory_is_refused_without_reading(tmp_path: Path, fifo: Path) -> None:
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    for path in (zero, fifo, tmp_path):
        with pytest.raises(NotRegular):
            read_bounded(path, 1024)  # a FIFO without a writer: returns at once


def test_a_sparse_file_of_any_size_costs_a_bounded_read(tmp_path: Path) -> None:
    huge = tmp_path / "AGENTS.md"
    with huge.open("wb") as file:
        file.write(b"Run the tests.\n")
        file.truncate(16 * 1024**3)  # 16 GiB, sparse
    text = agents_md(tmp_path, limit=1000)
    assert text is not None
    assert "[AGENTS.md is cut here: it is longer than 1,000 characters.]" in text


def test_configuration_that_is_not_a_regular_bounded_file_is_refused(tmp_path: Path, fifo: Path) -> None:
    (tmp_path / "agent.toml").symlink_to("/dev/zero")
    with pytest.raises(ConfigInvalid, match="not a regular file"):
        load(tmp_path, {})
    (tmp_path / "agent.toml").unlink()
    (tmp_path / "agent.toml").write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(ConfigInvalid, match="larger than 1,048,576 bytes"):
        load(tmp_path, {})
    with pytest.raises(ConfigInvalid, match="not a regular file"):
        load(tmp_path, {}, config_file=fifo)


def test_an_agents_md_or_an_attachment_that_is_a_device_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").symlink_to("/dev/zero")
    assert agents_md(tmp_path) is None
    with pytest.raises(ConfigInvalid, match="not a regular file"):
        Attachment.from_path(tmp_path / "AGENTS.md")


@pytest.mark.parametrize("flag", ["--system", "--schema", "-a", "--config"])
def test_the_command_refuses_a_fifo_or_a_device_named_by_a_flag(tmp_path: Path, fifo: Path, flag: str) -> None:
    value = f"@{fifo}" if flag == "--system" else str(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_") and not k.endswith("_API_KEY")}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run(
        [sys.executable, "-m", "tether.cli.app", "run", "--model", "scripted:echo", flag, value, "hi"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode in (1, 2), done.stderr
    assert "not a regular file" in done.stderr
