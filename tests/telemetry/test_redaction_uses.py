"""Where the redaction applies: reprs, the executor's messages about arguments, a run's detail and error,
and what the CLI prints of calls, results and ``--json``."""

from __future__ import annotations

import io
import json

from tether import Agent, tool
from tether.cli.render import Renderer, describe_call, make_console
from tether.cli.runner import result_json
from tether.cli.transcript import to_markdown
from tether.errors import AuthFailed
from tether.events import RunCompleted, ToolCallStarted, ToolResultReceived
from tether.messages import Message, ToolCall, ToolResult
from tether.providers.scripted import ScriptedProvider, call, fail, reply
from tether.redaction import MASK, Redaction
from tether.secrets import Masker
from tether.sessions import Session
from tether.telemetry import Telemetry

PASSWORD = "hunter2-Zq8Lw"
KEY = "sk-test-KNOWNSECRET-4fJ2pQ9x"


@tool
def login(user: str, password: str) -> str:
    """Log in."""
    return f"logged in as {user}"


@tool
def pin(code: int, token: str) -> str:
    """Check a code."""
    return "ok"


def test_a_tool_calls_repr_hides_secret_arguments_and_so_do_the_reprs_around_it() -> None:
    raw = json.dumps({"user": "ann", "password": PASSWORD})
    tool_call = ToolCall("c1", "login", {"user": "ann", "password": PASSWORD}, raw)

    shown = repr(tool_call)

    assert shown.startswith("ToolCall(id='c1', name='login', arguments={'user': 'ann', 'password': '***'}")
    assert PASSWORD not in shown
    assert PASSWORD not in repr(Message("assistant", (tool_call,)))
    assert PASSWORD not in repr(ToolCallStarted(tool_call, 1))
    assert tool_call.arguments == {"user": "ann", "password": PASSWORD}, "the call itself keeps them"
    assert tool_call == ToolCall("c1", "login", {"user": "ann", "password": PASSWORD}, raw)


async def test_a_run_result_repr_hides_the_calls_secret_arguments() -> None:
    agent = Agent(ScriptedProvider([call("login", {"user": "ann", "password": PASSWORD}), reply("in")]), tools=[login])

    result = await agent.run("log in")

    assert PASSWORD not in repr(result)
    assert result.messages[1].tool_calls[0].arguments == {"user": "ann", "password": PASSWORD}


async def test_broken_arguments_are_quoted_back_redacted() -> None:
    broken = '{"user": "ann", "password": "' + PASSWORD + '"'
    agent = Agent(ScriptedProvider([call("login", broken), reply("sorry")]), tools=[login])

    result = await agent.run("log in")

    answer = result.messages[2].tool_results[0]
    assert answer.code == "invalid_arguments"
    assert '"password": "***' in answer.content, "the model still sees which member it wrote"
    assert PASSWORD not in answer.content


async def test_a_validation_error_does_not_quote_a_secret_arguments_value() -> None:
    agent = Agent(ScriptedProvider([call("pin", {"code": "x", "token": ["a-long-token"]}), reply("no")]), tools=[pin])

    result = await agent.run("check")

    answer = result.messages[2].tool_results[0]
    assert answer.code == "invalid_arguments"
    assert "code" in answer.content
    assert "token" in answer.content
    assert "a-long-token" not in answer.content


async def test_a_provider_error_quoting_the_key_is_masked_in_the_results_detail_and_error() -> None:
    error = AuthFailed(f"invalid key {KEY}")
    agent = Agent(ScriptedProvider([fail(error)]), secrets=[KEY])

    result = await agent.run("hi")

    assert str(result.stop_reason) == "error"
    assert KEY not in result.detail
    assert KEY not in str(result.error)
    assert KEY not in repr(result)
    assert MASK in result.detail


def test_the_cli_shows_a_calls_secret_arguments_as_masks() -> None:
    tool_call = ToolCall("c1", "login", {"user": "ann", "password": PASSWORD})

    assert describe_call(tool_call) == "login(user='ann', password='***')"
    broken = ToolCall("c2", "login", None, '{"password": "' + PASSWORD)
    assert PASSWORD not in describe_call(broken)


def test_the_renderer_uses_the_agents_redaction_for_calls_results_and_notes() -> None:
    err = io.StringIO()
    renderer = Renderer(make_console(io.StringIO()), make_console(err))
    renderer.redaction = Redaction(Masker([KEY]), secret_arguments=("pin",))
    tool_call = ToolCall("c1", "unlock", {"pin": "83920", "door": "front"})

    renderer(ToolCallStarted(tool_call, 1))
    renderer(ToolResultReceived(ToolResult("c1", "unlock", "wrong pin 83920 for front", True, "tool_failed"), 1))
    renderer.note(f"error: the key {KEY} was refused")

    shown = err.getvalue()
    assert "unlock(pin='***', door='front')" in shown
    assert "83920" not in shown, "a result quoting a secret argument of its call"
    assert KEY not in shown
    assert "front" in shown


async def test_run_json_shows_messages_through_the_agents_redaction() -> None:
    agent = Agent(
        ScriptedProvider([call("login", {"user": "ann", "password": PASSWORD}), reply("in")]),
        tools=[login],
        telemetry=Telemetry(secret_arguments=("password",)),
    )
    result = await agent.run("log in")

    shown = result_json(result, redaction=agent.redaction)

    text = json.dumps(shown)
    assert PASSWORD not in text
    calls = [p for m in shown["messages"] for p in m["parts"] if p["kind"] == "tool_call"]
    assert calls[0]["arguments"] == {"user": "ann", "password": "***"}


def test_a_sessions_markdown_hides_secret_arguments() -> None:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    messages = (
        Message.user("log in"),
        Message("assistant", (ToolCall("c1", "login", {"user": "ann", "password": PASSWORD}),)),
        Message("tool", (ToolResult("c1", "login", "ok"),)),
    )
    session = Session(id="s1", messages=messages, created_at=now, updated_at=now)

    shown = to_markdown(session, full=True)

    assert '"password": "***"' in shown
    assert PASSWORD not in shown


def test_a_completed_runs_detail_goes_through_the_redaction() -> None:
    from tether.events import RunResult
    from tether.limits import StopReason
    from tether.usage import Usage

    err = io.StringIO()
    renderer = Renderer(make_console(io.StringIO()), make_console(err))
    renderer.redaction = Redaction(Masker([KEY]))
    result = RunResult(
        text="", stop_reason=StopReason.ERROR, messages=(), usage=Usage(), degraded=True, detail=f"bad key {KEY}"
    )

    renderer(RunCompleted(result))

    assert KEY not in err.getvalue()
