"""A run that pauses for decisions, and its resumption: here, and in another process (``loop/pausing.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typing_extensions import TypedDict

from tests.helpers import assert_valid
from tests.loop import paused_agent
from tests.loop.paused_agent import TURN, agent
from tether import (
    Agent,
    Approve,
    DecisionInvalid,
    ExternalResult,
    GuardrailResult,
    Limits,
    PausedRun,
    Reject,
    RunEvent,
    RunStarted,
    StopReason,
    ToolCall,
    tool,
)
from tether.errors import ConfigInvalid, FormatUnsupported, StateInvalid
from tether.events import ToolCallStarted
from tether.messages import Message, messages_from_jsonable
from tether.paused import Decision, arguments_digest
from tether.providers.scripted import ScriptedProvider, call, hang, parallel, reply
from tether.tools import Ask

ROOT = Path(__file__).resolve().parents[2]


class City(TypedDict):
    name: str


ANSWER = "Deleted old.txt; the page is Example Domain; 2+3=5."


@pytest.fixture(autouse=True)
def _ran() -> None:
    paused_agent.RAN.clear()


def resumed_elsewhere(state: PausedRun, decisions: dict[str, Any]) -> dict[str, Any]:
    """What a new Python process made of resuming ``state`` with ``decisions`` (``tests/loop/paused_agent.py``)."""
    given = json.dumps({"state": state.to_json(), "decisions": msgspec.to_builtins(decisions)})
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.loop.paused_agent"],
        input=given, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


async def test_a_run_paused_on_an_approval_and_an_external_call_is_resumed_in_another_process() -> None:
    pausing = agent([TURN])
    paused = await pausing.run("Clean up, read the page, add 2 and 3.")
    assert paused.stop_reason is StopReason.PAUSED
    assert not paused.degraded
    assert [(p.id, p.tool, p.kind) for p in paused.pending] == [
        ("c1", "delete", "approval"),
        ("c2", "page_title", "external"),
    ]
    assert paused.pending[0].digest == arguments_digest({"path": "old.txt"})
    assert paused_agent.RAN == ["add 2 3"]  # the ordinary call of the turn ran; the others wait
    assert paused.state is not None
    assert [r.call_id for r in paused.state.results] == ["c3"]
    assert_valid(paused)

    elsewhere = resumed_elsewhere(
        paused.state, {"c1": Approve(paused.pending[0].digest), "c2": ExternalResult("Example Domain")}
    )
    assert elsewhere["stop_reason"] == "complete"
    assert elsewhere["run_id"] == paused.run_id
    assert elsewhere["ran"] == ["delete old.txt"]  # the approved call ran there, once; nothing ran again
    assert elsewhere["requests"] == 1  # no earlier model call was made again

    inline = await agent([TURN, reply(ANSWER)], inline=True).run("Clean up, read the page, add 2 and 3.")
    assert inline.stop_reason is StopReason.COMPLETE
    assert messages_from_jsonable(elsewhere["messages"]) == list(inline.messages)


async def test_a_rejected_call_s_reason_reaches_the_model_in_its_next_request() -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    resumer = agent([reply("I will not delete it.")])
    result = await resumer.resume(
        paused.state, {"c1": Reject("keep old.txt, it is the only copy"), "c2": ExternalResult("Example Domain")}
    )
    assert result.stop_reason is StopReason.COMPLETE
    assert paused_agent.RAN == ["add 2 3"]  # the rejected call never ran
    model = resumer.provider
    assert isinstance(model, ScriptedProvider)
    sent = model.requests[-1].messages[-1]
    rejected = {r.call_id: r for r in sent.tool_results}["c1"]
    assert rejected.is_error
    assert rejected.code == "permission_denied"
    assert "keep old.txt, it is the only copy" in rejected.content
    assert [r.call_id for r in sent.tool_results] == ["c1", "c2", "c3"]  # in the model's order
    assert_valid(result)


async def test_a_failed_external_result_is_an_error_result_the_model_reads() -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    resumer = agent([reply("The page did not open.")])
    result = await resumer.resume(
        paused.state, {"c1": Approve(), "c2": ExternalResult({"error": "timed out"}, is_error=True)}
    )
    external = result.messages[-2].tool_results[1]
    assert external.is_error
    assert external.code == "tool_failed"
    assert json.loads(external.content) == {"error": "timed out"}


async def test_past_the_approval_timeout_every_pending_call_is_rejected_for_want_of_an_answer() -> None:
    paused = await agent([TURN], limits=Limits(approval_timeout=60)).run("go")
    assert paused.state is not None
    assert paused.state.approval_timeout == 60
    long_ago = msgspec.structs.replace(paused.state, paused_at=paused.state.paused_at - 3600)
    resumer = agent([reply("No one answered.")])
    result = await resumer.resume(long_ago, {"c1": Approve(), "c2": ExternalResult("late")})
    assert result.stop_reason is StopReason.COMPLETE
    assert paused_agent.RAN == ["add 2 3"]  # the approval came too late: the call did not run
    results = {r.call_id: r for r in result.messages[-2].tool_results}
    for call_id in ("c1", "c2"):
        assert results[call_id].is_error
        assert "no one approved this call in time" in results[call_id].content
    assert not results["c3"].is_error


async def test_within_the_approval_timeout_the_decisions_are_taken() -> None:
    paused = await agent([TURN], limits=Limits(approval_timeout=3600)).run("go")
    assert paused.state is not None
    result = await agent([reply(ANSWER)]).resume(paused.state, {"c1": Approve(), "c2": ExternalResult("Example")})
    assert paused_agent.RAN == ["add 2 3", "delete old.txt"]
    assert not result.messages[-2].tool_results[0].is_error


@pytest.mark.parametrize(
    ("decisions", "faulty"),
    [
        ({"c1": Approve()}, ["c2"]),  # one call left undecided
        ({"c1": Approve(), "c2": ExternalResult("x"), "c9": Approve()}, ["c9"]),  # an id no call has
        ({"c1": Approve("0" * 64), "c2": ExternalResult("x")}, ["c1"]),  # the digest of other arguments
        ({"c1": ExternalResult("x"), "c2": ExternalResult("x")}, ["c1"]),  # a result for an approval
        ({"c1": Approve(), "c2": Approve()}, ["c2"]),  # an approval for an external call
        ({"c1": Approve(), "c2": ExternalResult("x", digest="f" * 64)}, ["c2"]),
    ],
)
async def test_decisions_that_do_not_fit_are_refused_and_nothing_runs(
    decisions: dict[str, Any], faulty: list[str]
) -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    resumer = agent([reply(ANSWER)])
    with pytest.raises(DecisionInvalid) as refused:
        await resumer.resume(paused.state, decisions)
    assert refused.value.code == "decision_invalid"
    assert refused.value.details["calls"] == faulty
    assert paused_agent.RAN == ["add 2 3"]
    model = resumer.provider
    assert isinstance(model, ScriptedProvider)
    assert model.requests == []
    again = await resumer.resume(paused.state, {"c1": Approve(), "c2": ExternalResult("x")})  # nothing was claimed
    assert again.stop_reason is StopReason.COMPLETE


async def test_an_approval_never_runs_twice_a_pause_is_resumed_once() -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    decisions: dict[str, Decision] = {"c1": Approve(), "c2": ExternalResult("Example Domain")}
    first = await agent([reply(ANSWER)]).resume(paused.state.to_json(), decisions)
    assert first.stop_reason is StopReason.COMPLETE
    with pytest.raises(DecisionInvalid, match="already resumed"):
        await agent([reply(ANSWER)]).resume(paused.state.to_json(), decisions)
    assert paused_agent.RAN == ["add 2 3", "delete old.txt"]


async def test_a_newer_state_is_refused_by_name_and_a_first_version_one_is_read() -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    data = json.loads(paused.state.to_json())
    assert data["version"] == 1
    with pytest.raises(FormatUnsupported, match="format version 2") as newer:
        PausedRun.from_json(json.dumps({**data, "version": 2}))
    assert newer.value.code == "format_unsupported"
    first = {key: value for key, value in data.items() if key != "version"}  # as version 1 writes it, or less
    assert PausedRun.from_json(json.dumps(first)) == paused.state
    assert PausedRun.from_json(paused.state.to_json().encode()) == paused.state
    with pytest.raises(StateInvalid):
        PausedRun.from_json("{not json")
    with pytest.raises(StateInvalid):
        PausedRun.from_json(json.dumps({**data, "pending": "nothing"}))
    with pytest.raises(StateInvalid):
        PausedRun.from_json("[1, 2]")


async def test_a_state_of_the_first_format_written_by_hand_is_resumed() -> None:
    """The format is kept: a state as version 1 writes it, field by field, is read and resumed."""
    call_part = {"kind": "tool_call", "id": "k1", "name": "delete", "arguments": {"path": "a"}, "raw_arguments": None}
    text = json.dumps(
        {
            "version": 1,
            "run_id": "0123456789abcdef0123456789abcdef",
            "messages": [
                {"role": "user", "parts": [{"kind": "text", "text": "delete a"}]},
                {"role": "assistant", "parts": [call_part]},
            ],
            "pending": [
                {
                    "id": "k1", "tool": "delete", "arguments": {"path": "a"}, "reason": "needs approval",
                    "kind": "approval", "digest": arguments_digest({"path": "a"}),
                }
            ],
            "turns": 1,
            "tool_calls": 1,
            "paused_at": 1_700_000_000.0,
        }
    )  # fmt: skip
    result = await agent([reply("Deleted a.")]).resume(text, {"k1": Approve()})
    assert result.stop_reason is StopReason.COMPLETE
    assert result.run_id == "0123456789abcdef0123456789abcdef"
    assert paused_agent.RAN == ["delete a"]
    assert result.turns == 2  # the guard went on from the stored count


async def test_the_events_of_a_pause_and_of_its_resumption() -> None:
    seen: list[RunEvent] = []
    paused = await agent([TURN]).run("go", on_event=seen.append)
    names = [type(event).__name__ for event in seen]
    assert names == [
        "RunStarted",
        "TurnStarted",
        "TurnCompleted",
        "ToolCallStarted",
        "ToolResultReceived",
        "RunCompleted",
    ]
    assert paused.state is not None
    resumed: list[RunEvent] = []
    stream = agent([reply(ANSWER)]).resume_stream(paused.state, {"c1": Reject("no"), "c2": ExternalResult("x")})
    async for event in stream:
        resumed.append(event)
    names = [type(event).__name__ for event in resumed]
    assert names == [
        "RunStarted", "ToolCallStarted", "ToolResultReceived", "ToolCallStarted", "ToolResultReceived",
        "TurnStarted", "TextDelta", "TurnCompleted", "RunCompleted",
    ]  # fmt: skip
    started = [e.call.id for e in resumed if isinstance(e, ToolCallStarted)]
    assert started == ["c1", "c2"]  # the decided calls only, in the model's order
    assert isinstance(resumed[0], RunStarted)
    assert resumed[0].run_id == paused.run_id


def test_resume_sync_goes_on_outside_async_code() -> None:
    paused = agent([TURN]).run_sync("go")
    assert paused.state is not None
    result = agent([reply(ANSWER)]).resume_sync(paused.state, {"c1": Approve(), "c2": ExternalResult("x")})
    assert result.text == ANSWER


async def test_a_resumed_run_may_pause_again_and_its_counts_go_on() -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    second_turn = call("delete", {"path": "new.txt"}, id="c4")
    again = await agent([second_turn]).resume(paused.state, {"c1": Approve(), "c2": ExternalResult("x")})
    assert again.stop_reason is StopReason.PAUSED
    assert [p.id for p in again.pending] == ["c4"]
    assert again.run_id == paused.run_id
    assert again.state is not None
    assert (again.state.turns, again.state.tool_calls) == (2, 4)
    final = await agent([reply("done")]).resume(again.state.to_json(), {"c4": Approve()})
    assert final.turns == 3
    assert paused_agent.RAN == ["add 2 3", "delete old.txt", "delete new.txt"]
    assert_valid(final)


async def test_limits_go_on_from_the_paused_counts() -> None:
    paused = await agent([TURN], limits=Limits(max_tool_calls=4)).run("go")
    assert paused.state is not None
    more = parallel(call("add", {"a": 1, "b": 1}, id="c5"), call("add", {"a": 2, "b": 2}, id="c6"))
    result = await agent([more, reply("stopped")], limits=Limits(max_tool_calls=4)).resume(
        paused.state, {"c1": Approve(), "c2": ExternalResult("x")}
    )
    assert result.stop_reason is StopReason.MAX_TOOL_CALLS  # 3 before the pause, 1 more allowed after it
    assert paused_agent.RAN == ["add 2 3", "delete old.txt", "add 1 1"]


async def test_the_run_deadline_is_re_armed_with_what_the_pause_left() -> None:
    @tool(approval=True)
    async def slow(key: str) -> str:
        """A tool that takes its time."""
        await asyncio.sleep(30)
        return key

    model = ScriptedProvider([call("slow", {"key": "a"}, id="s1")])
    paused = await Agent(model, tools=[slow], limits=Limits(run_timeout=600)).run("go")
    assert paused.state is not None
    assert paused.state.run_timeout_left is not None
    little_left = msgspec.structs.replace(paused.state, run_timeout_left=0.05)
    resumer = Agent(ScriptedProvider([reply("never")]), tools=[slow], limits=Limits(run_timeout=600))
    result = await resumer.resume(little_left, {"s1": Approve()})
    assert result.stop_reason is StopReason.TIMEOUT
    assert result.messages[-1].tool_results[0].code == "cancelled"
    assert_valid(result)


async def test_ask_with_an_approver_is_asked_inline_and_an_approval_tool_too() -> None:
    asked: list[tuple[str, str]] = []

    def approve(call: ToolCall, reason: str) -> bool:
        asked.append((call.name, reason))
        return True

    model = ScriptedProvider([TURN, reply(ANSWER)])
    inline = Agent(model, tools=[paused_agent.delete, paused_agent.add], approve=approve)
    result = await inline.run("go")
    assert asked == [("delete", "the tool 'delete' needs approval for every call")]
    assert result.stop_reason is StopReason.COMPLETE  # the external call is unknown to this agent: an error result


async def test_a_hook_s_ask_without_an_approver_defers_and_its_deny_still_denies() -> None:
    model = ScriptedProvider([parallel(call("add", {"a": 1, "b": 2}, id="a1"), call("add", {"a": 3, "b": 4}, id="a2"))])

    def hook(call: ToolCall) -> Any:
        from tether.tools import Deny

        return Ask("check the sum") if call.id == "a1" else Deny("not this one")

    result = await Agent(model, tools=[paused_agent.add], can_use_tool=hook).run("go")
    assert result.stop_reason is StopReason.PAUSED
    assert [(p.id, p.reason) for p in result.pending] == [("a1", "check the sum")]
    assert result.state is not None
    assert result.state.results[0].code == "permission_denied"
    assert paused_agent.RAN == []


async def test_a_turn_with_two_calls_of_one_id_is_an_unusable_answer_asked_again() -> None:
    twice = parallel(call("add", {"a": 1, "b": 2}, id="same"), call("add", {"a": 3, "b": 4}, id="same"))
    model = ScriptedProvider([twice, call("add", {"a": 1, "b": 2}, id="one"), reply("3")])
    result = await Agent(model, tools=[paused_agent.add]).run("go")
    assert result.stop_reason is StopReason.COMPLETE
    assert paused_agent.RAN == ["add 1 2"]  # nothing of the refused turn ran
    assert "started twice" in str(model.requests[1].messages[-1].text)


async def test_a_deferred_call_inside_an_agent_run_as_a_tool_is_a_clear_error_result() -> None:
    inner = Agent(ScriptedProvider([call("delete", {"path": "x"}, id="i1")]), tools=[paused_agent.delete])
    outer_model = ScriptedProvider([call("helper", {"input": "clean"}, id="o1"), reply("it could not")])
    outer = Agent(outer_model, tools=[inner.as_tool(name="helper")])
    result = await outer.run("go")
    assert result.stop_reason is StopReason.COMPLETE
    answer = result.messages[2].tool_results[0]
    assert answer.is_error
    assert "wait for a decision from outside" in answer.content
    assert "delete" in answer.content
    assert paused_agent.RAN == []


async def test_a_cancelled_resumed_run_answers_its_open_calls_and_is_not_paused() -> None:
    paused = await agent([TURN]).run("go")
    assert paused.state is not None
    resumer = agent([hang()])
    stream = resumer.resume_stream(paused.state, {"c1": Approve(), "c2": ExternalResult("x")})
    async for event in stream:
        if type(event).__name__ == "TurnStarted":
            stream.cancel()
    result = stream.result
    assert result is not None
    assert result.stop_reason is StopReason.CANCELLED
    assert result.state is None
    assert result.pending == ()
    assert_valid(result)


async def test_resume_without_a_state_or_a_session_is_refused() -> None:
    with pytest.raises(DecisionInvalid):
        await agent([]).resume(None, {})
    state = PausedRun(run_id="r", messages=(Message.user("x"),), pending=(), paused_at=0.0)
    with pytest.raises(DecisionInvalid, match="each decision"):
        await agent([]).resume(state, {"a": True})  # type: ignore[dict-item]


async def test_an_agent_with_guardrails_is_resumed_through_them_and_they_check_its_answer() -> None:
    def no_secrets(ctx: Any, answer: str) -> GuardrailResult:
        return GuardrailResult.block("that answer is withheld") if "secret" in answer else GuardrailResult.passed()

    model = ScriptedProvider([call("delete", {"path": "a"}, id="g1")])
    guarded = Agent(model, tools=[paused_agent.delete], output_guardrails=[no_secrets])
    paused = await guarded.run("go")
    assert paused.stop_reason is StopReason.PAUSED
    assert paused.state is not None
    resumer = Agent(
        ScriptedProvider([reply("the secret is 42")]), tools=[paused_agent.delete], output_guardrails=[no_secrets]
    )
    result = await resumer.resume(paused.state.to_json(), {"g1": Approve()})
    assert paused_agent.RAN == ["delete a"]
    assert result.stop_reason is StopReason.GUARDRAIL  # the resumed answer went through the output guardrail
    assert result.run_id == paused.run_id
    assert_valid(result)


async def test_an_agent_with_handoffs_cannot_resume_yet() -> None:
    helper = Agent(ScriptedProvider([]), name="helper")
    team = Agent(
        ScriptedProvider([call("delete", {"path": "a"}, id="h1")]), tools=[paused_agent.delete], handoffs=[helper]
    )
    paused = await team.run("go")
    assert paused.state is not None
    with pytest.raises(ConfigInvalid, match="handoffs"):
        await team.resume(paused.state, {"h1": Approve()})
    assert paused_agent.RAN == []


async def test_a_hook_may_deny_an_external_call_which_then_does_not_wait() -> None:
    def hook(call: ToolCall) -> Any:
        from tether.tools import Allow, Deny

        return Deny("no browsing today") if call.name == "page_title" else Allow()

    model = ScriptedProvider([TURN])
    result = await Agent(
        model, tools=[paused_agent.delete, paused_agent.page_title, paused_agent.add], can_use_tool=hook
    ).run("go")
    assert result.stop_reason is StopReason.PAUSED
    assert [p.id for p in result.pending] == ["c1"]  # the approval waits; the denied external call does not
    assert result.state is not None
    denied = {r.call_id: r for r in result.state.results}["c2"]
    assert denied.code == "permission_denied"
    assert "no browsing today" in denied.content


async def test_a_typed_output_given_in_the_paused_turn_ends_the_resumed_run_with_it() -> None:
    turn = parallel(call("delete", {"path": "a"}, id="o1"), call("final_result", {"name": "Paris"}, id="o2"))
    typed = Agent(ScriptedProvider([turn]), tools=[paused_agent.delete], output_type=City)
    paused = await typed.run("go")
    assert paused.stop_reason is StopReason.PAUSED
    assert paused.state is not None
    resumer = Agent(ScriptedProvider([]), tools=[paused_agent.delete], output_type=City)
    result = await resumer.resume(paused.state, {"o1": Approve()})
    assert result.stop_reason is StopReason.COMPLETE  # no model call after: the output was given
    assert result.output == {"name": "Paris"}
    assert paused_agent.RAN == ["delete a"]
