"""`config set` changes one key and nothing else, validates before writing, and writes atomically with a backup;
`config init` writes a commented file that loads."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.config.helpers import Dirs
from tether.config.edit import backup_path, init_file, set_value
from tether.config.load import read_file
from tether.config.schema import BashConfig, Config, LimitsConfig, SessionConfig, ToolsConfig
from tether.config.template import default_file
from tether.errors import ConfigInvalid

COMMENTED = """\
# Project settings for tether.
#   (kept by hand; do not reformat)

[runtime]
model   =   "openai:gpt-4o"     # the default model

# Guards -----------------------------------------------------------------
[runtime.limits]
max_turns = 20          # plenty
run_timeout = 600.0     # ten minutes

[tools]
deny = [ "shell",  'write_file' ]   # odd spacing on purpose

# Where conversations are kept
[session]
store = 'files'
"""


def files_in(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_set_changes_only_the_value_and_keeps_every_other_byte(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    set_value(path, "runtime.limits.max_turns", "5")
    set_value(path, "runtime.model", "ollama:qwen3")

    expected = COMMENTED.replace("max_turns = 20 ", "max_turns = 5  ".rstrip() + " ", 1).replace(
        '"openai:gpt-4o"', '"ollama:qwen3"', 1
    )
    assert path.read_text() == expected


def test_set_adds_a_new_key_after_the_last_key_of_its_section_not_under_the_next_headers_comment(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    set_value(path, "tools.mode", "read-only")

    deny = "deny = [ \"shell\",  'write_file' ]   # odd spacing on purpose\n"
    assert path.read_text() == COMMENTED.replace(deny, deny + 'mode = "read-only"\n', 1)


def test_set_adds_a_new_key_after_the_comments_that_end_its_section(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    text = '[tools]\nmode = "full"\n# deny = ["shell"]\n\n[session]\nstore = "files"\n'
    path.write_text(text)

    set_value(path, "tools.deny", '["fetch"]')

    assert path.read_text() == text.replace('# deny = ["shell"]\n', '# deny = ["shell"]\ndeny = ["fetch"]\n')


def test_set_adds_a_missing_section_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    set_value(path, "providers.ollama.base_url", "http://box:11434/v1")

    text = path.read_text()
    assert text.startswith(COMMENTED)
    assert tomllib.loads(text)["providers"] == {"ollama": {"base_url": "http://box:11434/v1"}}


def test_set_keeps_windows_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_bytes(b'[runtime]\r\nmodel = "openai:gpt-4o"  # m\r\n\r\n[tools]\r\nmode = "full"\r\n')

    set_value(path, "runtime.model", "ollama:qwen3")
    set_value(path, "tools.deny", '["shell"]')

    assert path.read_bytes() == (
        b'[runtime]\r\nmodel = "ollama:qwen3"  # m\r\n\r\n[tools]\r\nmode = "full"\r\ndeny = ["shell"]\r\n'
    )


def test_set_reads_the_value_as_toml_when_it_is_one_else_as_a_string(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"

    set_value(path, "runtime.limits.max_turns", "7")
    set_value(path, "tools.deny", '["shell", "fetch"]')
    set_value(path, "runtime.model", "ollama:qwen3:8b")
    set_value(path, "runtime.limits.run_timeout", "off")

    assert tomllib.loads(path.read_text()) == {
        "runtime": {"limits": {"max_turns": 7, "run_timeout": "off"}, "model": "ollama:qwen3:8b"},
        "tools": {"deny": ["shell", "fetch"]},
    }


def test_set_creates_a_missing_file_without_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"

    set_value(path, "session.store", "memory")

    assert path.read_text() == '[session]\nstore = "memory"\n'
    assert files_in(tmp_path) == ["agent.toml"]


def test_set_reaches_into_an_array_of_tables_by_index(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[[mcp.servers]]\nid = "a"\ncommand = "npx"  # node\n\n[[mcp.servers]]\nid = "b"\ncommand = "x"\n')

    set_value(path, "mcp.servers.1.command", "uvx")

    assert (
        path.read_text()
        == '[[mcp.servers]]\nid = "a"\ncommand = "npx"  # node\n\n[[mcp.servers]]\nid = "b"\ncommand = "uvx"\n'
    )


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("runtime.limits.max_turns", "0", "line 9: runtime.limits.max_turns: must be a whole number >= 1"),
        ("tools.mode", "rw", "line 14: tools.mode: must be one of 'read-only', 'full'"),
        ("runtime.modle", "openai:gpt-4o", "line 6: runtime.modle: unknown key 'modle'; did you mean 'model'?"),
        ("runtime.model", "gpt-4o", "line 5: runtime.model: must be 'provider:model'"),
        ("session.stores", "memory", "did you mean 'store'?"),
    ],
)
def test_set_refuses_an_invalid_result_and_leaves_the_file_untouched(
    tmp_path: Path, key: str, value: str, words: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    with pytest.raises(ConfigInvalid) as caught:
        set_value(path, key, value)

    assert words in str(caught.value)
    assert path.read_text() == COMMENTED
    assert files_in(tmp_path) == ["agent.toml"]  # no staging file either


def test_set_refuses_to_edit_a_file_that_is_not_toml_and_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[runtime]\nmodel = "openai:gpt-4o\n')

    with pytest.raises(ConfigInvalid, match="line 2"):
        set_value(path, "tools.mode", "full")

    assert path.read_text() == '[runtime]\nmodel = "openai:gpt-4o\n'


def test_set_refuses_to_put_a_key_under_a_value(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    with pytest.raises(ConfigInvalid, match=r"runtime\.model is a value"):
        set_value(path, "runtime.model.name", "x")


def test_set_validates_the_project_file_with_the_user_file_beneath_it(dirs: Dirs) -> None:
    dirs.write_user('[providers.gpu]\nprofile = "vllm"\nbase_url = "http://gpu:8000/v1"\n')
    user = read_file(dirs.user_toml)
    assert user is not None

    with pytest.raises(ConfigInvalid, match="unknown provider 'gpu'"):
        set_value(dirs.agent_toml, "runtime.model", "gpu:qwen3")
    set_value(dirs.agent_toml, "runtime.model", "gpu:qwen3", below=[user])

    assert dirs.load().config.runtime.model == "gpu:qwen3"


def test_set_leaves_no_backup_and_no_temporary_file_in_the_workspace(tmp_path: Path) -> None:
    """The directory of ``agent.toml`` is the agent's workspace: a copy of the file there would be listed and
    read by the agent. ``set`` changes one key, atomically, and leaves the file alone in it."""
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    set_value(path, "session.store", "memory")
    set_value(path, "session.store", "sqlite")

    assert files_in(tmp_path) == ["agent.toml"]
    assert not backup_path(path).exists()


@pytest.mark.parametrize(
    ("before", "sets", "after"),
    [
        (
            '[runtime]\nmodel = "ollama:x"\n\n[tools]\nmode = "full"\n',
            [("runtime.limits.max_turns", "5")],
            '[runtime]\nmodel = "ollama:x"\n\n[runtime.limits]\nmax_turns = 5\n\n[tools]\nmode = "full"\n',
        ),
        (
            '[runtime]\nmodel = "ollama:x"\n',
            [("tools.mode", "full"), ("runtime.limits.max_turns", "5"), ("runtime.limits.max_tool_calls", "7")],
            '[runtime]\nmodel = "ollama:x"\n\n[runtime.limits]\nmax_turns = 5\nmax_tool_calls = 7\n\n'
            '[tools]\nmode = "full"\n',
        ),
        (
            '[runtime]\r\nmodel = "ollama:x"\r\n\r\n[tools]\r\nmode = "full"\r\n',
            [("runtime.limits.max_turns", "5")],
            '[runtime]\r\nmodel = "ollama:x"\r\n\r\n[runtime.limits]\r\nmax_turns = 5\r\n\r\n'
            '[tools]\r\nmode = "full"\r\n',
        ),
        (
            "",
            [("runtime.model", "ollama:b"), ("tools.mode", "full")],
            '[runtime]\nmodel = "ollama:b"\n\n[tools]\nmode = "full"\n',
        ),
    ],
)
def test_a_new_table_stands_apart_from_the_next_header_by_a_blank_line(
    tmp_path: Path, before: str, sets: list[tuple[str, str]], after: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_bytes(before.encode())

    for key, value in sets:
        set_value(path, key, value)

    assert path.read_bytes().decode() == after


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)
    real_replace = os.replace

    def replace_fails_for_the_file_itself(source: str, target: str | Path, **kwargs: Any) -> None:
        if Path(target).name == "agent.toml":
            raise OSError(28, "No space left on device")
        real_replace(source, target, **kwargs)

    monkeypatch.setattr(os, "replace", replace_fails_for_the_file_itself)

    with pytest.raises(ConfigInvalid, match=r"cannot be written \(No space left on device"):
        set_value(path, "session.store", "memory")

    assert path.read_text() == COMMENTED
    assert files_in(tmp_path) == ["agent.toml"]  # no staging file either


def test_a_write_keeps_the_file_mode_and_replaces_the_target_of_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "shared.toml"
    real.write_text(COMMENTED)
    real.chmod(0o600)
    link = tmp_path / "agent.toml"
    link.symlink_to(real)

    set_value(link, "session.store", "memory")

    assert link.is_symlink()
    assert 'store = "memory"' in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.toml", "shared.toml"]


def test_init_writes_a_commented_file_that_loads_to_the_defaults(dirs: Dirs) -> None:
    init_file(dirs.agent_toml)

    text = dirs.agent_toml.read_text()
    assert dirs.load().config == Config()
    live = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert all(re.fullmatch(r"\[[a-z.]+\]", line) for line in live), live
    assert sum(line.startswith("#") for line in text.splitlines()) > 60


def test_init_documents_every_setting_with_its_default() -> None:
    text = default_file()

    for model in (LimitsConfig, ToolsConfig, BashConfig, SessionConfig):
        for name, field in model.model_fields.items():
            if isinstance(field.default_factory, type) and issubclass(field.default_factory, BaseModel):
                assert f"\n[tools.{name}]\n" in text, name  # a section of its own
                continue
            assert f"\n# {name} = " in text, name
            assert " ".join(str(field.description).replace("``", "").split()[:3]) in text
    assert "# max_turns = 20\n" in text
    assert '# run_timeout = "off"\n' in text
    for key in ("base_url", "api_key_env", "profile", "headers", "id", "transport", "command", "args", "env", "url"):
        assert f"\n# {key} = " in text, key


def test_set_after_init_puts_the_key_in_its_own_section(dirs: Dirs) -> None:
    init_file(dirs.agent_toml)

    set_value(dirs.agent_toml, "runtime.limits.max_turns", "5")

    lines = dirs.agent_toml.read_text().splitlines()
    position = lines.index("max_turns = 5")
    assert lines.index("[runtime.limits]") < position < lines.index("[providers]")
    assert dirs.load().config.runtime.limits.max_turns == 5


def test_init_refuses_to_overwrite_and_force_keeps_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(COMMENTED)

    with pytest.raises(FileExistsError):
        init_file(path)
    assert path.read_text() == COMMENTED

    init_file(path, force=True)
    assert path.read_text() == default_file()
    assert backup_path(path).read_text() == COMMENTED


def test_init_creates_the_user_config_directory(tmp_path: Path) -> None:
    path = tmp_path / "xdg" / "tether" / "config.toml"

    init_file(path)

    assert tomllib.loads(path.read_text()) == {
        "runtime": {"limits": {}},
        "agent": {},
        "compaction": {},
        "providers": {},
        "tools": {"bash": {}},
        "mcp": {},
        "session": {},
        "cli": {},
    }
