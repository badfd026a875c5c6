"""The logging sink (``tether/telemetry/logs.py``): real handlers on the real ``logging`` module, scripted runs
and an HTTP provider against a loopback server that answers 429 once; silence by default in a subprocess."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.mock_llm import Call, Fail, MockLLM, Say
from tether import Agent, tool
from tether.errors import AuthFailed
from tether.messages import ToolCall
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES
from tether.providers.scripted import ScriptedProvider, call, fail, reply
from tether.telemetry import Telemetry
from tether.telemetry.logs import EVENTS, FIELDS

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-known-key-5d1c0a77e9b3"
"""An API key the agent knows: it must never appear in a record."""
HOST_SECRET = "host-secret-8c2e41f0aa"
"""A value the host passes in ``Agent(secrets=...)``: the HTTP layer does not know it, the redaction does."""
PASSWORD = "hunter2-correct-horse"
"""A value of a secret-named tool argument: it must never appear in a record."""
RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}


class Collect(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self) -> list[tuple[str, int, str]]:
        """``(logger, level, event)`` of tether's run records, in order."""
        return [(r.name, r.levelno, getattr(r, "event", "")) for r in self.records if hasattr(r, "event")]

    def of(self, event: str) -> list[Any]:
        """The records of ``event`` (typed loosely: their fields come from ``extra``)."""
        return [r for r in self.records if getattr(r, "event", None) == event]


def collecting(level: int) -> Iterator[Collect]:
    logger = logging.getLogger("tether")
    handler, before = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


@pytest.fixture
def records() -> Iterator[Collect]:
    """Every record of tether's loggers, DEBUG and up."""
    yield from collecting(logging.DEBUG)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def login(user: str, password: str) -> str:
    """Log in (always fails, quoting the key it was given)."""
    raise RuntimeError(f"login refused for {user} with key {KEY}")


def http_agent(base_url: str, **options: Any) -> Agent:
    provider = OpenAIChatProvider(
        "mock", profile=PROFILES["openai-compatible"], base_url=base_url, api_key=KEY,
        retry=RetryPolicy(base_delay=0.001),
    )  # fmt: skip
    return Agent(provider, **options)


def test_a_run_with_tool_calls_and_a_tool_error_writes_one_record_per_step(records: Collect) -> None:
    script = [call("add", {"a": 2, "b": 3}), call("login", {"user": "ann", "password": PASSWORD}), reply("5")]
    result = Agent(ScriptedProvider(script), tools=[add, login]).run_sync("What is 2+3?")
    assert result.stop_reason == "complete"

    loop, tools, info, debug = "tether.loop", "tether.tools", logging.INFO, logging.DEBUG
    assert records.events() == [
        (loop, info, "run_started"),
        (loop, debug, "turn"),
        (tools, debug, "tool_call"),
        (loop, debug, "turn"),
        (tools, debug, "tool_call"),
        (loop, debug, "turn"),
        (loop, info, "run_completed"),
    ]
    assert {getattr(r, "run_id", None) for r in records.records} == {result.run_id}
    started, completed = records.of("run_started")[0], records.of("run_completed")[0]
    assert started.getMessage() == f"run {result.run_id[:8]} started: scripted:scripted"
    assert (started.model, started.tool_count) == ("scripted:scripted", 2)
    assert not hasattr(started, "turn")
    assert re.fullmatch(rf"run {result.run_id[:8]} complete after 3 turns in .+, \d+ in / \d+ out tokens",
                        completed.getMessage())  # fmt: skip
    assert (completed.stop_reason, completed.turns, completed.degraded) == ("complete", 3, False)
    assert (completed.input_tokens, completed.output_tokens) == (result.usage.input_tokens, result.usage.output_tokens)

    turns = records.of("turn")
    assert [(r.turn, r.attempt, r.final, r.finish_reason) for r in turns] == [
        (1, 1, False, "tool_calls"), (2, 1, False, "tool_calls"), (3, 1, False, "stop"),
    ]  # fmt: skip
    for record, turn_record in zip(turns, result.turn_records, strict=True):
        assert record.duration_ms == turn_record.duration_ms
        assert record.input_tokens == turn_record.usage.input_tokens
        assert record.getMessage().startswith(f"turn {turn_record.turn}: {turn_record.finish_reason} in ")

    ok, failed = records.of("tool_call")
    assert re.fullmatch(r"tool add ok in \d+(\.\d)? m?s", ok.getMessage())
    assert (ok.turn, ok.tool, ok.is_error, ok.code, ok.arguments) == (1, "add", False, None, {"a": 2, "b": 3})
    assert ok.call_id == result.turn_records[0].tool_calls[0].call_id
    assert re.fullmatch(r"tool login failed \(tool_failed\) in \d+(\.\d)? m?s", failed.getMessage())
    assert (failed.turn, failed.is_error, failed.code, failed.exception) == (2, True, "tool_failed", "RuntimeError")
    assert failed.arguments == {"user": "ann", "password": "***"}
    assert failed.duration_ms == result.turn_records[1].tool_calls[0].duration_ms


async def test_a_429_answered_once_is_a_retry_warning_on_tether_providers(records: Collect) -> None:
    with MockLLM([Fail(429, RATE_LIMITED), Call("add", {"a": 1, "b": 1}), Say("2")]) as server:
        result = await http_agent(server.base_url, tools=[add]).run("1+1?")
    assert result.stop_reason == "complete"

    assert [event for _, _, event in records.events()] == [
        "run_started", "retry", "turn", "tool_call", "turn", "run_completed",
    ]  # fmt: skip
    (retry,) = records.of("retry")
    assert (retry.name, retry.levelno) == ("tether.providers", logging.WARNING)
    assert (retry.run_id, retry.turn, retry.attempt, retry.error_code) == (result.run_id, 1, 1, "rate_limited")
    assert retry.model == "openai-compatible:mock"
    assert 0 <= retry.wait_s <= 0.002
    assert retry.getMessage().startswith("retry 1 of openai-compatible:mock after rate_limited, waiting ")
    first = records.of("turn")[0]
    assert (first.retries, first.model) == (1, "mock")
    assert first.getMessage().endswith(", 1 retry")


def test_a_run_that_fails_is_a_warning_with_its_error_code_before_its_end(records: Collect) -> None:
    error = AuthFailed(f"the key {KEY} was refused (Authorization: Bearer abc.def-123)")
    result = Agent(ScriptedProvider([fail(error)]), secrets=[KEY]).run_sync("hi")
    assert result.stop_reason == "error"

    assert [event for _, _, event in records.events()] == ["run_started", "turn", "error", "run_completed"]
    (failure,) = records.of("error")
    assert (failure.name, failure.levelno) == ("tether.loop", logging.WARNING)
    assert (failure.turn, failure.stop_reason, failure.error_code) == (1, "error", "auth_failed")
    assert "***" in failure.detail
    assert KEY not in failure.detail
    assert "abc.def-123" not in failure.detail
    assert failure.getMessage().startswith(f"run {result.run_id[:8]} stopped on error (auth_failed): ")
    assert records.of("turn")[0].error_code == "auth_failed"
    assert records.of("run_completed")[0].levelno == logging.INFO


async def test_no_record_shows_a_known_key_or_a_secret_argument(records: Collect) -> None:
    script: list[Any] = [
        Call("login", {"user": HOST_SECRET, "password": PASSWORD}),
        Fail(429, {"error": {"message": f"slow down, {KEY} {HOST_SECRET}", "type": "requests"}}),
        Fail(401, {"error": {"message": f"Incorrect API key: {KEY} {HOST_SECRET}", "type": "invalid_request_error"}}),
    ]
    with MockLLM(script) as server:
        result = await http_agent(server.base_url, tools=[login], secrets=[HOST_SECRET]).run("log in")
    assert result.stop_reason == "error"
    (asked,) = [part for message in result.messages for part in message.parts if isinstance(part, ToolCall)]
    assert asked.arguments == {"user": HOST_SECRET, "password": PASSWORD}  # the tool got them: the records must not

    assert {"retry", "tool_call", "error"} <= {event for _, _, event in records.events()}
    for record in records.records:
        shown = record.getMessage() + json.dumps(vars(record), default=repr)
        assert KEY not in shown, shown
        assert HOST_SECRET not in shown, shown
        assert PASSWORD not in shown, shown
    assert records.of("tool_call")[0].arguments == {"user": "***", "password": "***"}


def test_at_info_only_runs_are_recorded_and_no_field_shadows_a_log_record_attribute() -> None:
    for handler in collecting(logging.INFO):
        Agent(ScriptedProvider([call("add", {"a": 1, "b": 2}), reply("3")]), tools=[add]).run_sync("1+2?")
        assert [event for _, _, event in handler.events()] == ["run_started", "run_completed"]

    reserved = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
    ours = {"run_id", "event", "turn"}.union(*FIELDS.values())
    assert not ours & reserved
    assert set(FIELDS) == set(EVENTS)


def test_telemetry_without_logs_writes_nothing(records: Collect) -> None:
    Agent(ScriptedProvider([reply("hi")]), telemetry=Telemetry(logs=False)).run_sync("hi")
    Agent(ScriptedProvider([reply("hi")]), telemetry=False).run_sync("hi")
    assert records.events() == []


def test_at_warning_only_retries_and_run_errors_are_recorded() -> None:
    for handler in collecting(logging.WARNING):
        script = [call("add", {"a": 1, "b": 2}), fail(AuthFailed("refused"))]
        Agent(ScriptedProvider(script), tools=[add]).run_sync("1+2?")
        assert handler.events() == [("tether.loop", logging.WARNING, "error")]
        assert handler.of("error")[0].turn == 2


# --- configuration, read in a fresh interpreter -------------------------------------------------------------


def python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with this checkout's ``src`` and tests importable; no pytest handlers."""
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def test_levels_decide_the_observer() -> None:
    code = """
        import logging, sys
        from tether.telemetry.logs import log_observer
        from tether.redaction import Redaction

        def flags():
            observer = log_observer(Redaction())
            if observer is None:
                return None
            return [observer._runs, observer._turns, observer._tools, observer._retries, observer._errors]

        print(flags())                                   # nothing configured
        logging.getLogger("myapp").addHandler(logging.StreamHandler(sys.stdout))
        print(flags())                                   # a handler, but not on tether's way to the root
        logging.basicConfig()                            # a root handler, root at WARNING
        print(flags())
        logging.getLogger("tether").setLevel(logging.INFO)
        print(flags())
        logging.getLogger("tether.tools").setLevel(logging.DEBUG)
        print(flags())
        logging.getLogger("tether").setLevel(logging.ERROR)
        logging.getLogger("tether.tools").setLevel(logging.NOTSET)
        print(flags())                                   # nothing tether emits is enabled
    """
    completed = python(code)
    assert completed.stderr == ""
    assert completed.stdout.splitlines() == [
        "None",
        "None",
        "[False, False, False, True, True]",
        "[True, False, False, True, True]",
        "[True, False, True, True, True]",
        "None",
    ]


def test_import_tether_does_not_import_logging_and_tether_loggers_are_silent_by_default() -> None:
    code = """
        import sys, tether
        print("logging" in sys.modules)
        from tether.sessions.base import logger
        logger.warning("a warning from tether")
        import logging
        logging.getLogger("other").warning("a warning from another library")
    """
    completed = python(code)
    assert completed.stdout == "False\n"
    assert completed.stderr == "a warning from another library\n"  # the last-resort handler is there


def test_every_tether_logger_comes_from_tether_logging() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "src" / "tether").rglob("*.py")
        if "logging.getLogger(" in path.read_text() and path.name != "_logging.py"
    ]
    assert offenders == []


def test_a_run_with_a_retry_and_a_tool_error_prints_nothing_unless_logging_is_configured() -> None:
    code = """
        import sys
        from tests.e2e.mock_llm import Call, Fail, MockLLM, Say
        from tests.telemetry.test_logs import RATE_LIMITED, add, http_agent, login
        if sys.argv[-1] == "configured":
            import logging
            logging.basicConfig(format="%(levelname)s %(name)s %(event)s %(message)s")
        script = [Fail(429, RATE_LIMITED), Call("login", {"user": "ann", "password": "x"}), Say("no luck")]
        with MockLLM(script) as server:
            result = http_agent(server.base_url, tools=[add, login]).run_sync("log in")
        print(result.stop_reason, result.turn_records[0].retries, result.turn_records[0].tool_calls[0].code)
    """
    for mode, expected in [("plain", ""), ("configured", "WARNING tether.providers retry retry 1 of ")]:
        completed = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), mode], capture_output=True, text=True, timeout=60,
            env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"}, check=False,
        )  # fmt: skip
        assert completed.stdout == "complete 1 tool_failed\n", completed.stderr
        if expected:
            assert completed.stderr.startswith(expected), completed.stderr
            assert completed.stderr.count("\n") == 1  # turns and tool calls are DEBUG: not shown at WARNING
        else:
            assert completed.stderr == ""
