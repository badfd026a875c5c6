"""The chat's logic without a terminal: slash commands, turns, permission prompts and Ctrl-C, on a scripted model."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from tether.agent import Agent
from tether.cli.build import WriteGate
from tether.cli.render import Renderer, make_console
from tether.cli.repl import Chat
from tether.errors import ConfigInvalid
from tether.events import RunEvent, TextDelta
from tether.messages import CompactionInfo, Message, ToolCall, compaction_marker, model_view, transcript_problems
from tether.providers.scripted import ScriptedProvider, Step, call, hang, reply
from tether.sessions import MemorySessionStore, Session
from tether.tools.base import Tool, tool

written: dict[str, str] = {}


@tool(read_only=True)
def peek(path: str) -> str:
    """Read a file.

    Args:
        path: The file.
    """
    return f"contents of {path}"


@tool
def put(path: str, text: str) -> str:
    """Write a file.

    Args:
        path: The file.
        text: What to write.
    """
    written[path] = text
    return f"wrote {path}"


TOOLS: list[Tool] = [peek, put]


class Harness:
    """A chat on scripted models; ``build`` makes an agent per (model, mode) with the next script."""

    def __init__(
        self, *scripts: list[Step], answers: list[bool] | None = None, yes: bool = False, window: int | None = None
    ) -> None:
        self.scripts = list(scripts)
        self.window = window
        """The scripted models' context window (they refuse longer requests; the chat's runs compact)."""
        self.store = MemorySessionStore()
        self.file = io.StringIO()
        self.questions: list[str] = []
        self.answers = list(answers or [])
        self.yes = yes
        self.providers: list[ScriptedProvider] = []
        self.renderer = Renderer(make_console(self.file))
        self.chat = Chat(self.build, self.store, self.renderer, model="scripted:one", mode="full", deny={"gone"},
                         yes=yes)  # fmt: skip

    def build(self, model: str, mode: str) -> Agent:
        if model.startswith("nope:"):
            raise ConfigInvalid(f"unknown provider 'nope' in {model!r}")
        script = self.scripts.pop(0) if self.scripts else []
        provider = ScriptedProvider(script, model=model.partition(":")[2], context_window=self.window)
        self.providers.append(provider)
        gate = WriteGate(TOOLS, yes=self.yes, interactive=True)
        return Agent(provider, tools=TOOLS, mode=mode, can_use_tool=gate, approve=self.approve, store=self.store)

    async def approve(self, call: ToolCall, reason: str) -> bool:
        self.questions.append(f"{call.name}: {reason}")
        return self.answers.pop(0)

    @property
    def output(self) -> str:
        return self.file.getvalue()

    def take(self) -> str:
        text = self.file.getvalue()
        self.file.seek(0)
        self.file.truncate()
        return text

    async def session(self) -> Session:
        return await self.store.load(self.chat.session_id)


async def test_a_prompt_runs_a_turn_in_the_chat_session_and_the_next_one_continues_it() -> None:
    harness = Harness([reply("Hello!"), reply("Again.")])
    assert await harness.chat.handle("hi") is True
    assert await harness.chat.handle("and again") is True
    assert harness.output == "Hello!\nAgain.\n"
    second = harness.providers[0].requests[1]
    assert [m.text for m in second.messages if m.role == "user"] == ["hi", "and again"]
    assert [m.text for m in (await harness.session()).messages] == ["hi", "Hello!", "and again", "Again."]


async def test_a_write_tool_asks_first_and_a_no_is_sent_to_the_model() -> None:
    written.clear()
    script = [call("peek", {"path": "a"}), call("put", {"path": "b", "text": "x"}), reply("I was not allowed.")]
    harness = Harness(script, answers=[False])
    await harness.chat.handle("copy a to b")
    assert harness.questions == ["put: put can change files or run commands"], "only the write tool asks"
    assert written == {}
    result = harness.chat.last
    assert result is not None
    assert result.text == "I was not allowed."
    denied = result.messages[-2].tool_results[0]
    assert denied.code == "permission_denied"
    assert "did not approve" in denied.content


async def test_with_yes_write_tools_run_without_asking() -> None:
    written.clear()
    harness = Harness([call("put", {"path": "b", "text": "x"}), reply("Done.")], yes=True)
    await harness.chat.handle("write b")
    assert harness.questions == []
    assert written == {"b": "x"}


async def test_cancelling_a_turn_keeps_a_valid_transcript_and_the_chat_goes_on() -> None:
    harness = Harness([hang("Counting: one, two,"), reply("Fresh start.")])
    chat = harness.chat

    class CancelOnText(Renderer):
        def __call__(self, event: RunEvent) -> None:
            super().__call__(event)
            if isinstance(event, TextDelta) and event.text.startswith("Counting"):
                assert chat.running
                assert chat.cancel() is True

    chat.renderer = CancelOnText(make_console(harness.file))
    await chat.handle("count")
    assert chat.last is not None
    assert chat.last.stop_reason == "cancelled"
    assert not chat.running
    assert chat.cancel() is False
    assert "[cancelled]" in harness.output
    await chat.handle("start again")
    assert chat.last.text == "Fresh start."
    session = await harness.session()
    assert transcript_problems(session.messages) == []
    assert session.messages[-1].text == "Fresh start."


async def test_help_lists_every_command_and_the_multiline_keys() -> None:
    harness = Harness()
    await harness.chat.handle("/help")
    for command in ("/help", "/model", "/tools", "/mode", "/sessions", "/resume", "/new", "/usage", "/trace", "/exit"):
        assert command in harness.output
    assert "Esc then Enter" in harness.output
    assert "end a line with \\" in harness.output


async def test_model_switches_the_agent_and_a_bad_name_keeps_the_old_one() -> None:
    harness = Harness([reply("from one")], [reply("from two")])
    await harness.chat.handle("/model")
    assert harness.take().strip() == "model: scripted:one"
    await harness.chat.handle("/model nope:x")
    assert "unknown provider 'nope'" in harness.take()
    assert harness.chat.model == "scripted:one"
    await harness.chat.handle("/model scripted:two")
    await harness.chat.handle("hello")
    assert harness.take() == "model: scripted:two\nfrom two\n"
    assert harness.providers[-1].info.name == "two"


async def test_mode_read_only_hides_write_tools_from_the_model() -> None:
    harness = Harness([reply("ok")])
    await harness.chat.handle("/mode read-only")
    await harness.chat.handle("hi")
    assert [t.name for t in harness.providers[0].requests[0].tools] == ["peek"]
    await harness.chat.handle("/mode everything")
    assert "read-only or full" in harness.output
    assert harness.chat.mode == "read-only"


async def test_tools_shows_what_each_tool_may_do_in_the_current_mode() -> None:
    harness = Harness()
    await harness.chat.handle("/tools")
    lines = harness.take().splitlines()
    assert lines[0].startswith("peek  read-only")
    assert lines[1].startswith("put   asks first")
    await harness.chat.handle("/mode read-only")
    harness.take()
    await harness.chat.handle("/tools")
    assert "put   not offered in read-only mode" in harness.take()


async def test_sessions_new_and_resume() -> None:
    harness = Harness([reply("first answer"), reply("second answer"), reply("back in the first")])
    chat = harness.chat
    await chat.handle("first question")
    first_id = chat.session_id
    await chat.handle("/new")
    assert chat.session_id != first_id
    await chat.handle("second question")
    harness.take()
    await chat.handle("/sessions")
    listing = harness.take()
    assert first_id in listing
    assert "* " + chat.session_id in listing
    await chat.handle(f"/resume {first_id}")
    resumed = harness.take()
    assert chat.session_id == first_id
    assert "first question" in resumed
    assert "first answer" in resumed
    await chat.handle("go on")
    users = [m.text for m in harness.providers[0].requests[-1].messages if m.role == "user"]
    assert users == ["first question", "go on"]
    await chat.handle("/resume no-such-session")
    assert "no session 'no-such-session'" in harness.take()
    assert chat.session_id == first_id


async def test_a_turn_that_outgrows_the_window_is_compacted_and_the_chat_says_so_in_one_line() -> None:
    harness = Harness([reply("x" * 400), reply("Summary: the user sent two long notes."), reply("Noted.")], window=600)
    await harness.chat.handle("first note " + "a" * 800)
    harness.take()

    await harness.chat.handle("second note " + "b" * 800)

    lines = harness.take().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"context compacted: [\d,]+ → [\d,]+ tokens \(1 message summarized\)", lines[0]), lines
    assert lines[1] == "Noted."
    assert not harness.providers[0].refused, "no request over the window was sent"
    view = model_view((await harness.session()).messages)
    assert view[0].text.endswith("Summary: the user sent two long notes."), "the next turn starts from the summary"


async def test_resume_shows_a_compaction_summary_as_such() -> None:
    harness = Harness()
    marker = compaction_marker("They sent two notes.", CompactionInfo(0, 2, 700, 200, {}))
    await harness.store.save(Session.new(id="long", messages=(Message.user("hi"), marker)))

    await harness.chat.handle("/resume long")

    shown = harness.take().splitlines()
    assert shown[-2:] == ["  you: hi", "  (compacted) They sent two notes."]


async def test_usage_adds_up_this_chats_turns() -> None:
    harness = Harness([reply("one"), reply("two")])
    await harness.chat.handle("a")
    await harness.chat.handle("b")
    harness.take()
    await harness.chat.handle("/usage")
    out = harness.take()
    assert "this chat:" in out
    assert "2 requests" in out
    assert f"session {harness.chat.session_id}:" in out


@pytest.mark.parametrize("line", ["/exit", "/quit", "/EXIT"])
async def test_exit_ends_the_chat(line: str) -> None:
    assert await Harness().chat.handle(line) is False


async def test_unknown_commands_and_empty_lines() -> None:
    harness = Harness()
    assert await harness.chat.handle("/frobnicate") is True
    assert "unknown command /frobnicate" in harness.output
    assert await harness.chat.handle("   ") is True
    assert harness.providers[0].requests == [], "an empty line is not a prompt"


async def test_a_store_that_fails_is_reported_and_the_chat_goes_on() -> None:
    from tether.errors import SessionInvalid

    harness = Harness([reply("still here")])

    async def broken() -> list[Any]:
        raise SessionInvalid("/x/sessions.db: not a SQLite database")

    harness.store.list = broken  # type: ignore[method-assign]
    assert await harness.chat.handle("/sessions") is True
    assert "error: /x/sessions.db: not a SQLite database" in harness.take()
    await harness.chat.handle("hello")
    assert harness.take() == "still here\n"


SETTINGS = '# Project settings, kept by hand.\n[runtime]\nmodel = "scripted:one"  # the default\n'


async def test_model_and_mode_with_save_write_the_setting_to_the_config_file_keeping_its_comments(
    tmp_path: Path,
) -> None:
    from tether.config.service import ConfigService

    (tmp_path / "agent.toml").write_text(SETTINGS)
    harness = Harness([reply("from two")])
    harness.chat.settings = ConfigService(tmp_path, {"HOME": str(tmp_path)})

    await harness.chat.handle("/model scripted:two --save")
    await harness.chat.handle("/mode --save")
    await harness.chat.handle("/model nope:x --save")

    lines = harness.take().splitlines()
    assert lines[:4] == [
        "model: scripted:two",
        f"saved runtime.model = 'scripted:two' in {tmp_path / 'agent.toml'}",
        "mode: full",
        f"saved tools.mode = 'full' in {tmp_path / 'agent.toml'}",
    ]
    assert len(lines) == 5, "a model that cannot run is not saved"
    assert "still on scripted:two" in lines[4]
    assert (tmp_path / "agent.toml").read_text() == (
        SETTINGS.replace("scripted:one", "scripted:two") + '\n[tools]\nmode = "full"\n'
    )
    assert harness.chat.settings.config().runtime.model == "scripted:two"


async def test_save_without_a_config_file_says_so_and_a_switch_alone_writes_nothing(tmp_path: Path) -> None:
    from tether.config.service import ConfigService

    harness = Harness()
    await harness.chat.handle("/mode read-only --save")
    assert harness.take().splitlines()[-1] == "tools.mode not saved: this chat has no configuration file"

    harness.chat.settings = ConfigService(tmp_path, {"HOME": str(tmp_path)})
    await harness.chat.handle("/mode full")
    await harness.chat.handle("/model scripted:two")
    assert not (tmp_path / "agent.toml").exists()
