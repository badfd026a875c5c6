"""A known key and a known password go through a whole run; every artefact the run leaves is searched for them.

The key is the provider's API key (``sk-test-KNOWNSECRET-...``). The loopback server quotes it back in a 500
error (retried) and in a final 401; a tool returns it from the environment; another raises an exception
that holds it. The password is what the model passes as a tool's ``password`` argument, in a valid call and
in one whose JSON is cut short.

The real command runs its tools in the project: one reads the key from ``.env``, one fails quoting it (a
command's error output). The artefacts: the real ``tether run`` command's stdout and stderr (``--json``) and
the Markdown of its session (``tether sessions show``); in process, every log record, every event (its
``repr`` and the exception it carries, with its traceback), ``repr(result)``, ``result.detail``,
``str(result.error)``, the CLI's ``--json`` form of the result; and the session files (SQLite), which must
not hold the key. The session keeps the model's arguments as the model sent them, the password included: that
is the conversation to replay, the user's own data. Spans: :func:`test_spans_hold_no_secret`.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import Call, Fail, MockLLM, Responder, Step
from tether import Agent, tool
from tether.cli.runner import result_json
from tether.events import RunEvent, ToolResultReceived
from tether.sessions import SQLiteSessionStore
from tether.telemetry import Telemetry

KEY = "sk-test-KNOWNSECRET-7Hq2WnB3xLp9RtV2"
PASSWORD = "pw-KNOWNPASSWORD-Kd82Lx"
KEY_VARIABLE = "OPENAI_COMPATIBLE_API_KEY"


def script(tool_calls: list[Step]) -> list[Step | Responder]:
    """A 500 quoting the key (retried at once), the given tool turns, then a 401 quoting the key."""
    quoted = {"error": {"message": f"upstream refused the key {KEY}", "type": "server_error"}}
    refused = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}
    return [Fail(500, quoted, {"Retry-After": "0"}), *tool_calls, Fail(401, refused)]


def leaks(texts: dict[str, str], needle: str) -> list[str]:
    return [where for where, text in texts.items() if needle in text]


def stored_files(root: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in root.rglob("*") if path.is_file()}


# --- the real command ------------------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A working directory and a home for the real command (as ``tests/e2e`` makes them)."""
    made = Project(tmp_path, tmp_path / "home")
    for path in (made.cwd, made.home):
        path.mkdir(parents=True)
    return made


def test_the_tether_command_prints_and_stores_no_key_and_prints_no_password(project: Project) -> None:
    (project.cwd / ".env").write_text(f"{KEY_VARIABLE}={KEY}\n")
    (project.cwd / "key.txt").write_text(KEY)
    broken = '{"command": "true", "password": "' + PASSWORD
    turns: list[Step] = [
        Call("read", {"path": ".env"}, more=(("bash", {"command": 'cat "missing-$(cat key.txt)"'}),)),
        Call("bash", {"command": "true", "password": PASSWORD}, more=(("bash", broken),)),
    ]
    with MockLLM(script(turns)) as server:
        project.use(server)
        completed = project.run("run", "Log in", "--yes", "--json", **{KEY_VARIABLE: KEY})
        assert completed.returncode == 4, completed.stderr  # the 401 ends the run as failed
        output = json.loads(completed.stdout)
        shown = project.run("sessions", "show", output["session_id"])

    assert server.authorizations[0] == f"Bearer {KEY}", "the key was used"
    assert len(server.requests) == 4, "the 500 was retried"
    sent_back = [m["content"] for m in server.messages(2) if m["role"] == "tool"]
    assert all("***" in content and KEY not in content for content in sent_back), "the tools' outputs were masked"
    printed = {"stdout": completed.stdout, "stderr": completed.stderr, "sessions show": shown.stdout + shown.stderr}
    assert "bash(command='true', password='***')" in completed.stderr, "the call was shown, its password hidden"
    assert leaks(printed, KEY) == []
    assert leaks(printed, PASSWORD) == []
    files = {path: data for path, data in stored_files(project.root).items() if Path(path).parent != project.cwd}
    assert project.sessions_db.exists()
    assert [path for path, data in files.items() if KEY.encode() in data] == []
    assert any(PASSWORD.encode() in data for data in files.values()), "the session keeps the model's arguments"


# --- an agent in process ----------------------------------------------------------------------------------------


@tool
def reveal() -> str:
    """Print the provider's key variable (as a careless tool would)."""
    import os

    return f"{KEY_VARIABLE}={os.environ[KEY_VARIABLE]}"


@tool
def explode() -> str:
    """Fail with the key in the message."""
    raise RuntimeError(f"could not connect with key {KEY}")


@tool
def login(user: str, password: str) -> str:
    """Log in."""
    return f"logged in as {user}"


class Records(logging.Handler):
    """Every log record, formatted with every attribute it carries (``extra`` fields included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        formatted = logging.Formatter("%(name)s %(levelname)s %(message)s").format(record)
        self.texts.append(f"{formatted} {record.__dict__!r}")


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def agent_turns() -> list[Step]:
    broken = '{"user": "ann", "password": "' + PASSWORD
    return [
        Call("reveal", {}, more=(("explode", {}),)),
        Call("login", {"user": "ann", "password": PASSWORD}, more=(("login", broken),)),
    ]


def event_texts(events: list[RunEvent]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for index, event in enumerate(events):
        texts[f"event {index} {type(event).__name__}"] = repr(event)
        if isinstance(event, ToolResultReceived) and event.exception is not None:
            exc = event.exception
            texts[f"event {index} exception"] = "".join(traceback.format_exception(exc)) + repr(exc.args)
    return texts


async def test_an_agents_run_leaves_no_key_and_no_password_in_logs_events_results_or_errors(
    tmp_path: Path, records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    events: list[RunEvent] = []
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    with MockLLM(script(agent_turns())) as server:
        agent = Agent(
            "openai-compatible:mock",
            base_url=server.base_url,
            api_key=KEY,
            tools=[reveal, explode, login],
            store=store,
            on_event=events.append,
        )
        result = await agent.run("Log in", session="grep")

    assert len(server.requests) == 4, "the 500 was retried"
    assert str(result.stop_reason) == "error"
    assert result.error is not None
    exceptions = [e.exception for e in events if isinstance(e, ToolResultReceived) and e.exception is not None]
    assert exceptions, "the tool's exception was kept with its result"
    artefacts = {
        **{f"log {i}": text for i, text in enumerate(records.texts)},
        **event_texts(events),
        "repr(result)": repr(result),
        "result.detail": result.detail,
        "str(result.error)": str(result.error),
        "repr(result.error)": repr(result.error),
        "error traceback": "".join(traceback.format_exception(result.error)),
        "run --json": json.dumps(result_json(result, redaction=agent.redaction)),
    }
    assert "***" in result.detail, "the error was there, masked"
    assert leaks(artefacts, KEY) == []
    assert leaks(artefacts, PASSWORD) == []
    files = stored_files(tmp_path)
    assert [path for path, data in files.items() if KEY.encode() in data] == []
    assert any(PASSWORD.encode() in data for data in files.values()), "the session keeps the model's arguments"


# --- spans ------------------------------------------------------------------------------------------------------


def span_texts(spans: list[Any]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for span in spans:
        texts[f"span {span.name}"] = f"{span.name} {dict(span.attributes or {})!r} {span.status.description!r}"
        for event in span.events:
            texts[f"span {span.name} event {event.name}"] = f"{event.name} {dict(event.attributes or {})!r}"
        for link in span.links:
            texts[f"span {span.name} link"] = repr(dict(link.attributes or {}))
    return texts


async def test_spans_hold_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """With content capture on, every span attribute, event and status of a run is searched."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setenv(KEY_VARIABLE, KEY)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with MockLLM(script(agent_turns())) as server:
        agent = Agent(
            "openai-compatible:mock",
            base_url=server.base_url,
            api_key=KEY,
            tools=[reveal, explode, login],
            telemetry=Telemetry(tracer_provider=provider, capture_content=True),
        )
        await agent.run("Log in")
    provider.shutdown()

    spans = list(exporter.get_finished_spans())
    assert spans, "the run made spans (tether.telemetry.otel)"
    texts = span_texts(spans)
    assert leaks(texts, KEY) == []
    assert leaks(texts, PASSWORD) == []
