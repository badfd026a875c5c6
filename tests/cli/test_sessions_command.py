"""`tether sessions` and `tether models` as a user runs them: a real subprocess on a real SQLite store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.messages import (
    SUMMARY_HEADER,
    CompactionInfo,
    Message,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    compaction_marker,
    messages_from_jsonable,
)
from tether.sessions import Session, SQLiteSessionStore
from tether.usage import Usage

MESSAGES = (
    Message.system("Be brief."),
    Message.user("What is in notes.txt?"),
    Message("assistant", (Thinking("I should read it."), ToolCall("c1", "read", {"path": "notes.txt"}))),
    Message("tool", (ToolResult("c1", "read", "1\tpelicans"),)),
    Message.assistant("Pelicans."),
)


def tether(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_") and not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.app", *args],
        cwd=home,
        env={**base, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "c"), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home whose default store holds two sessions, ``old`` then ``birds`` (the most recent)."""

    async def fill() -> None:
        async with SQLiteSessionStore(tmp_path / "data" / "tether" / "sessions.db") as store:
            await store.save(Session.new(id="old", title="An old chat", model="openai:gpt-4o-mini",
                                         messages=(Message.user("hi"), Message.assistant("hello"))))  # fmt: skip
            await store.save(
                Session.new(id="birds", title="What is in notes.txt?", model="anthropic:claude-haiku-4-5",
                            messages=MESSAGES, usage=Usage(input_tokens=10, output_tokens=5, requests=2))
            )  # fmt: skip

    asyncio.run(fill())
    return tmp_path


def test_list_shows_the_sessions_newest_first(home: Path) -> None:
    completed = tether(home, "sessions", "list")
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "MSGS", "MODEL", "TITLE"]
    assert lines[1].startswith("birds ")
    assert lines[1].endswith("What is in notes.txt?")
    assert " 5 " in lines[1]
    assert lines[2].startswith("old ")
    assert lines[2].endswith("An old chat")
    as_json = json.loads(tether(home, "sessions", "list", "--json").stdout)
    assert [s["id"] for s in as_json] == ["birds", "old"]
    assert as_json[0]["message_count"] == 5


def test_list_with_no_sessions_says_so(tmp_path: Path) -> None:
    completed = tether(tmp_path, "sessions", "list")
    assert completed.returncode == 0
    assert "no sessions yet" in completed.stdout


def test_show_prints_the_conversation_for_people(home: Path) -> None:
    completed = tether(home, "sessions", "show", "birds")
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert out.startswith("# What is in notes.txt?\n")
    assert "## You\n\nWhat is in notes.txt?" in out
    assert '**read** `{"path": "notes.txt"}`' in out
    assert "pelicans" in out
    assert "## Assistant\n\nPelicans." in out
    assert "Be brief." not in out, "the system prompt is only in exports"
    assert "I should read it." not in out, "thinking is only in exports"


COMPACTED = (
    Message.system("Be brief."),
    Message.user("Read every log."),
    Message.assistant("Reading."),
    compaction_marker("The user wants every log read; a.log held errors.", CompactionInfo(2, 2, 3284, 1092, {})),
    Message("assistant", (ToolCall("c2", "read", {"path": "b.log"}),)),
    Message("tool", (ToolResult("c2", "read", "[kept whole: ref 1]"),)),
    compaction_marker("Both logs are read.", CompactionInfo(2, 3, 2000, 900, {"c2": "[ref 1]", "c3": "[ref 2]"})),
    Message.assistant("Done."),
    Message("user", (Text("not a marker"),), {"compaction": {"kept": "many"}}),
)


def test_show_marks_each_compaction_and_still_shows_what_it_summarized(tmp_path: Path) -> None:
    async def fill() -> None:
        async with SQLiteSessionStore(tmp_path / "data" / "tether" / "sessions.db") as store:
            await store.save(Session.new(id="long", title="Logs", model="openai:gpt-4o-mini", messages=COMPACTED))

    asyncio.run(fill())
    completed = tether(tmp_path, "sessions", "show", "long")

    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert out.count("## Compacted\n") == 2
    assert (
        "## Assistant\n\nReading.\n\n## Compacted\n\n*The history was compacted to fit the model's context window "
        "(3,284 → 1,092 tokens): from here on the model saw this summary in place of 2 messages above it.*\n\n"
        "The user wants every log read; a.log held errors.\n\n## Assistant"
    ) in out
    assert "in place of 3 messages above it; 2 tool outputs below it shown by reference.*" in out
    assert SUMMARY_HEADER.strip() not in out, "the header is for the model; the section says it for people"
    assert "## You\n\nnot a marker" in out, "a malformed record is an ordinary message"


def test_export_json_round_trips_the_messages(home: Path) -> None:
    completed = tether(home, "sessions", "export", "birds", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)
    assert data["id"] == "birds"
    assert data["model"] == "anthropic:claude-haiku-4-5"
    assert data["usage"]["input_tokens"] == 10
    assert tuple(messages_from_jsonable(data["messages"])) == MESSAGES


def test_export_markdown_keeps_everything(home: Path) -> None:
    completed = tether(home, "sessions", "export", "birds", "--format", "markdown")
    assert completed.returncode == 0
    assert "## System\n\nBe brief." in completed.stdout
    assert "> I should read it." in completed.stdout


def test_delete_removes_one_session_and_an_unknown_id_exits_1(home: Path) -> None:
    deleted = tether(home, "sessions", "delete", "old")
    assert deleted.returncode == 0
    assert deleted.stdout == "deleted old\n"
    assert [s["id"] for s in json.loads(tether(home, "sessions", "list", "--json").stdout)] == ["birds"]
    again = tether(home, "sessions", "delete", "old")
    assert again.returncode == 1
    assert "no session 'old'" in again.stderr
    missing = tether(home, "sessions", "show", "nope")
    assert missing.returncode == 1
    assert "tether sessions list" in missing.stderr


def test_an_invalid_id_exits_1_and_a_bad_format_2(home: Path) -> None:
    assert tether(home, "sessions", "show", "../etc").returncode == 1
    assert tether(home, "sessions", "export", "birds", "--format", "pdf").returncode == 2


def test_the_session_configuration_chooses_the_store(home: Path) -> None:
    (home / "agent.toml").write_text('[session]\nstore = "files"\npath = "kept"\n')
    assert "no sessions yet" in tether(home, "sessions", "list").stdout
    (home / "agent.toml").write_text('[session]\nstore = "sqlite"\npath = "data/tether/sessions.db"\n')
    assert "birds" in tether(home, "sessions", "list").stdout


def test_models_lists_prices_and_provider_variables() -> None:
    completed = tether(Path.cwd(), "models", OPENAI_API_KEY="sk-not-shown")
    assert completed.returncode == 0
    out = completed.stdout
    assert "openai:gpt-4o-mini" in out
    assert "$0.15 in, $0.60 out" in out
    assert "anthropic:claude-haiku-4-5" in out
    assert "gemini:gemini-2.5-flash" in out
    assert "ANTHROPIC_API_KEY" in out
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in out
    assert "OPENAI_API_KEY (set)" in out
    assert "sk-not-shown" not in out
    assert "tether uses: openai:gpt-4o-mini" in out


def test_markdown_names_the_agent_of_each_answer_in_a_run_of_agents() -> None:
    from tether.cli.transcript import to_markdown
    from tether.messages import spoken_by

    session = Session.new(id="team").updated(
        messages=(
            Message.user("Charged twice?"),
            spoken_by(Message.assistant("Passing you on."), "triage"),
            spoken_by(Message.assistant("Refunded."), "billing"),
            Message.user("Thanks"),
            Message.assistant("You are welcome."),
        )
    )
    out = to_markdown(session, full=False)
    assert "## Assistant (triage)\n\nPassing you on." in out
    assert "## Assistant (billing)\n\nRefunded." in out
    assert "## Assistant\n\nYou are welcome." in out, "an answer of no named agent, as before"
