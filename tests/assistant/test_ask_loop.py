"""ask() through the real loop with a scripted model: capability round trips, batched calls, failures the
model causes, the limits that stop a question (each answering with what the session confirmed), Ctrl-C."""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import replace
from typing import Any

import pytest

from tether import Assistant, ask, ask_async
from tether.assistant import ASK_LIMITS
from tether.errors import ConfigInvalid
from tether.events import RunCompleted, RunEvent, TextDelta, ToolCallStarted
from tether.limits import StopReason
from tether.messages import ToolResult
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, cut_off, hang, parallel, reply
from tether.tools.python_runtime import RuntimeSettings

NO_CLOCK = replace(ASK_LIMITS, request_timeout=None, step_timeout=60.0, run_timeout=None)
"""The question's limits with deadlines far away, for tests that set one deadline of their own."""


class Traced:
    """A value whose repr says which thread asked for it, and in what order it was asked."""

    def __init__(self, label: str, seen: list[tuple[str, int]]) -> None:
        self.label = label
        self.seen = seen

    def __repr__(self) -> str:
        self.seen.append((self.label, threading.get_ident()))
        return f"Traced({self.label})"


def tool_results(request: Request) -> tuple[ToolResult, ...]:
    """The results of the request's last message (the tool message the model is answered with)."""
    last = request.messages[-1]
    assert last.role == "tool", f"the last message is {last.role!r}, not the tool results"
    return tuple(part for part in last.parts if isinstance(part, ToolResult))


def envelope(result: ToolResult) -> dict[str, Any]:
    return dict(json.loads(result.content))


def test_a_capability_round_trip_runs_on_the_calling_thread_and_answers() -> None:
    seen: list[tuple[str, int]] = []
    model = ScriptedProvider([call("get_repr", {"expr": "df"}, id="c1"), reply("`df` is Traced(df).")])

    result = ask("what is df?", {"df": Traced("df", seen)}, model=model)

    assert (result.stop_reason, result.text, result.degraded) == (StopReason.COMPLETE, "`df` is Traced(df).", False)
    assert seen == [("df", threading.get_ident())]
    (answered,) = tool_results(model.requests[1])
    assert answered.call_id == "c1"
    assert envelope(answered) == {"ok": True, "result": {"repr": "Traced(df)", "truncated": False, "original_len": 10}}
    system = model.requests[0].system or ""
    assert "only from calling your functions" in system
    assert "Never invent" in system
    assert "concisely" in system
    model.assert_consumed()


def test_several_calls_of_one_turn_run_in_order_and_are_answered_in_one_message() -> None:
    seen: list[tuple[str, int]] = []
    namespace = {name: Traced(name, seen) for name in ("a", "b", "c")}
    turn = parallel(call("get_repr", {"expr": "c"}), call("get_repr", {"expr": "a"}), call("get_type", {"expr": "b"}))
    model = ScriptedProvider([turn, reply("done")])

    result = ask("show c and a, and the type of b", namespace, model=model)

    assert result.stop_reason == StopReason.COMPLETE
    assert [label for label, _ in seen] == ["c", "a"]
    results = tool_results(model.requests[1])
    assert [(r.call_id, r.name) for r in results] == [
        ("call_1", "get_repr"),
        ("call_2", "get_repr"),
        ("call_3", "get_type"),
    ]
    assert [envelope(r)["result"].get("repr") for r in results[:2]] == ["Traced(c)", "Traced(a)"]
    assert envelope(results[2])["result"]["qualified"].endswith(".Traced")
    assert sum(1 for m in model.requests[1].messages if m.role == "tool") == 1


def test_an_undeclared_function_is_answered_with_the_unknown_function_envelope_and_the_model_goes_on() -> None:
    model = ScriptedProvider([call("run_shell", {"cmd": "ls"}), call("list_globals"), reply("x is an int")])

    result = ask("what is defined?", {"x": 1}, model=model, settings=RuntimeSettings(allow_eval=False))

    (unknown,) = tool_results(model.requests[1])
    assert (unknown.is_error, unknown.code) == (True, "tool_not_found")
    declared = ["list_globals", "get_type", "get_repr", "get_dir", "get_doc", "get_last_exception"]
    assert envelope(unknown) == {
        "ok": False,
        "error": {
            "code": "unknown_function",
            "message": f"no function 'run_shell'; available: {', '.join(declared)}",
            "details": {"name": "run_shell", "available": declared},
        },
    }
    (listed,) = tool_results(model.requests[2])
    assert envelope(listed)["result"]["globals"] == [{"name": "x", "type_name": "int"}]
    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "x is an int")


def test_a_malformed_call_is_corrected_once_then_the_question_degrades_with_what_was_confirmed() -> None:
    broken = call("get_type", '{"expr": "df"')  # arguments that are not JSON
    model = ScriptedProvider([call("get_type", {"expr": "df"}), broken, broken, reply("df is a list, I think")])

    result = ask("what is df?", {"df": [1, 2]}, model=model)

    (corrective,) = tool_results(model.requests[2])
    assert corrective.is_error
    assert corrective.code == "invalid_arguments"
    assert result.stop_reason == StopReason.CONSECUTIVE_ERRORS
    assert result.degraded
    assert len(model.requests) == 4  # three turns, then one call without tools for the answer
    assert result.text.startswith("df is a list, I think\n\n(Stopped before a full answer: the model's function calls")
    assert "- `df` is a list" in result.text


def test_an_answer_cut_off_twice_stops_after_one_corrective_retry() -> None:
    cut = cut_off(call("get_repr", {"expr": "x"}))  # the call's arguments end at the output limit
    model = ScriptedProvider([call("list_globals"), cut, cut])

    result = ask("what is x?", {"x": 7}, model=model)

    assert result.stop_reason == StopReason.INVALID_RESPONSE
    assert len(model.requests) == 3
    assert "no usable answer, even after a corrective retry" in result.text
    assert "- the session defines `x` (int)" in result.text
    model.assert_consumed()


def test_the_step_cap_stops_the_question_with_every_finding() -> None:
    steps = [call("get_repr", {"expr": f"v{n}"}) for n in range(6)]
    model = ScriptedProvider([*steps, reply("")])  # the answer asked for without tools is empty

    result = ask("what are the v's?", {f"v{n}": n * 10 for n in range(6)}, model=model)

    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.turns == 6
    assert len(model.requests) == 7
    assert model.requests[6].tool_choice == "none"
    assert result.text.startswith(
        "(Stopped before a full answer: it used all of its 6 steps.)\nConfirmed in the session:"
    )
    assert [line for line in result.text.splitlines() if line.startswith("- ")] == [
        f"- `v{n}` is `{n * 10}`" for n in range(6)
    ]


def test_a_model_that_asks_again_instead_of_answering_gets_each_finding_once_and_no_raw_results() -> None:
    def turn() -> Step:
        repr_n = call("get_repr", {"expr": "n"})
        return parallel(repr_n, call("get_type", {"expr": "n"}), repr_n)

    model = ScriptedProvider([call("list_globals"), turn(), turn(), reply(""), reply("")])

    result = ask("what is n?", {"n": 3}, model=model)

    assert result.stop_reason == StopReason.CONSECUTIVE_ERRORS
    assert result.text.startswith("(Stopped before a full answer: the model's function calls kept failing (")
    assert result.text.endswith(
        "Confirmed in the session:\n- the session defines `n` (int)\n- `n` is `3`\n- `n` is an int"
    )
    assert '"ok":true' not in result.text, "the loop's raw results give way to the findings they confirm"
    model.assert_consumed()


def test_the_total_timeout_stops_the_question_with_what_was_confirmed() -> None:
    model = ScriptedProvider([call("get_last_exception"), hang()])
    limits = replace(NO_CLOCK, run_timeout=0.2)

    result = ask("why did it fail?", {}, model=model, last_exception=KeyError("col"), limits=limits)

    assert result.stop_reason == StopReason.TIMEOUT
    assert result.degraded
    assert "(Stopped before a full answer: it used all of its 0.2 s.)" in result.text
    assert "- the last exception is KeyError: 'col'" in result.text


def test_a_step_timeout_stops_the_question_and_streams_the_soft_fail_answer() -> None:
    model = ScriptedProvider([call("get_type", {"expr": "n"}), hang("Looking at n")])
    limits = replace(NO_CLOCK, step_timeout=0.2)
    events: list[RunEvent] = []
    threads: set[int] = set()

    def on_event(event: RunEvent) -> None:
        threads.add(threading.get_ident())
        events.append(event)

    result = ask("what is n?", {"n": 3}, model=model, limits=limits, on_event=on_event)

    assert result.stop_reason == StopReason.TIMEOUT
    assert result.text == (
        "Looking at n\n\n(Stopped before a full answer: the model did not finish a step within 0.2 s.)\n"
        "Confirmed in the session:\n- `n` is an int"
    )
    texts = [event.text for event in events if isinstance(event, TextDelta)]
    assert "".join(texts) == result.text
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].result is result
    assert sum(isinstance(event, RunCompleted) for event in events) == 1
    assert threads == {threading.get_ident()}


def test_a_question_that_confirmed_nothing_says_so() -> None:
    model = ScriptedProvider([hang()])

    result = ask("what is n?", {"n": 3}, model=model, limits=replace(NO_CLOCK, step_timeout=0.2))

    assert result.text == (
        "(Stopped before a full answer: the model did not finish a step within 0.2 s.)\n"
        "Nothing about the session was confirmed before that."
    )


def test_ctrl_c_while_waiting_cancels_the_question_and_returns_its_result() -> None:
    main = threading.main_thread().ident
    assert main == threading.get_ident(), "the test runs on the main thread, where Python delivers SIGINT"

    def interrupt_then_hang(request: Request) -> Step:
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)  # Ctrl-C, while the calling thread waits for the model
        return hang()

    model = ScriptedProvider([call("get_type", {"expr": "df"}), interrupt_then_hang])
    namespace: dict[str, Any] = {"df": {"a": 1}}

    result = ask("what is df?", namespace, model=model)

    assert result.stop_reason == StopReason.CANCELLED
    assert "(Stopped before a full answer: the question was cancelled.)" in result.text
    assert "- `df` is a dict" in result.text
    assert namespace == {"df": {"a": 1}}


def test_each_question_starts_without_the_earlier_ones() -> None:
    model = ScriptedProvider([reply("one"), reply("two")])
    assistant = Assistant(model)

    first = assistant.ask("first?", {})
    second = assistant.ask("second?", {})

    assert (first.text, second.text) == ("one", "two")
    assert [m.text for m in model.requests[1].messages] == ["second?"]


def test_the_last_exception_given_is_the_one_reported() -> None:
    model = ScriptedProvider([call("get_last_exception"), reply("a ValueError")])

    ask("why?", {}, model=model, last_exception=ValueError("bad value"))

    (answered,) = tool_results(model.requests[1])
    assert envelope(answered)["result"]["exception"]["exc_type"] == "ValueError"
    assert envelope(answered)["result"]["exception"]["message"] == "bad value"


def test_a_read_only_assistant_offers_no_eval_and_its_prompt_does_not_name_it() -> None:
    from tether.tools.python_runtime import RuntimeSettings

    model = ScriptedProvider([reply("ok")])

    ask("anything?", {}, model=model, settings=RuntimeSettings(allow_eval=False))

    offered = [tool.name for tool in model.requests[0].tools]
    assert "eval_expr" not in offered
    assert "get_repr" in offered
    assert "eval_expr" not in (model.requests[0].system or "")


def test_an_exception_in_on_event_cancels_the_question_and_is_raised() -> None:
    seen: list[tuple[str, int]] = []
    model = ScriptedProvider([call("get_repr", {"expr": "v"}), reply("never asked")])

    def on_event(event: RunEvent) -> None:
        if isinstance(event, ToolCallStarted):
            raise RuntimeError("the host's printer broke")

    with pytest.raises(RuntimeError, match="printer broke"):
        ask("what is v?", {"v": Traced("v", seen)}, model=model, on_event=on_event)
    assert seen == [], "the call queued behind the failed event was answered without being run"
    assert len(model.requests) == 1


async def test_ask_async_runs_the_calls_on_the_loops_thread() -> None:
    seen: list[tuple[str, int]] = []
    model = ScriptedProvider([call("get_repr", {"expr": "v"}), reply("v is Traced(v)")])

    result = await ask_async("what is v?", {"v": Traced("v", seen)}, model=model)

    assert result.text == "v is Traced(v)"
    assert seen == [("v", threading.get_ident())]


async def test_ask_async_soft_fails_like_ask() -> None:
    model = ScriptedProvider([call("get_type", {"expr": "v"}), hang()])

    result = await ask_async("what is v?", {"v": 1.5}, model=model, limits=replace(NO_CLOCK, run_timeout=0.2))

    assert result.stop_reason == StopReason.TIMEOUT
    assert result.text.endswith("Confirmed in the session:\n- `v` is a float")


async def test_ask_async_raises_what_on_event_raised_after_cancelling() -> None:
    seen: list[tuple[str, int]] = []
    model = ScriptedProvider([call("get_repr", {"expr": "v"}), reply("never asked")])

    def on_event(event: RunEvent) -> None:
        if isinstance(event, ToolCallStarted):
            raise RuntimeError("the host's printer broke")

    with pytest.raises(RuntimeError, match="printer broke"):
        await ask_async("what is v?", {"v": Traced("v", seen)}, model=model, on_event=on_event)
    assert len(model.requests) == 1


def test_without_a_namespace_the_question_is_about_main() -> None:
    import __main__

    model = ScriptedProvider([call("get_type", {"expr": "__name__"}), reply("ok")])

    ask("what is __name__?", model=model)

    (answered,) = tool_results(model.requests[1])
    assert envelope(answered)["result"]["qualified"] == "str"
    assert vars(__main__)["__name__"] == "__main__"


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"question": "  "}, "needs a question"),
        ({"question": "what?", "namespace": ["not", "a", "dict"]}, "namespace must be a dict"),
        ({"question": "what?", "tool_mode": "auto"}, "tool_mode must be 'native' or 'json'"),
        ({"question": "what?", "last_exception": "boom"}, "last_exception must be an exception or None"),
    ],
)
def test_bad_arguments_are_refused_before_the_model_is_asked(arguments: dict[str, Any], complaint: str) -> None:
    model = ScriptedProvider([])

    with pytest.raises(ConfigInvalid, match=complaint) as refused:
        ask(**{"model": model, **arguments})

    assert refused.value.code == "config_invalid"
    assert model.requests == []


def test_a_model_that_cannot_call_functions_is_refused_unless_json_actions_are_asked_for() -> None:
    actions = [
        reply('{"type": "tool_call", "name": "get_type", "arguments": {"expr": "n"}}'),
        reply('{"type": "final", "text": "n is an int"}'),
    ]
    plain = ScriptedProvider(actions, supports_tools=False)

    with pytest.raises(ConfigInvalid, match="TETHER_MODEL"):
        Assistant(plain)

    result = Assistant(plain, tool_mode="json").ask("what is n?", {"n": 3})
    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "n is an int")
    assert '"qualified":"int"' in plain.requests[1].messages[-1].text


def test_a_model_run_in_this_process_gets_the_time_a_cpu_needs() -> None:
    import msgspec

    from tether.assistant import LOCAL_ASK_LIMITS

    plain = ScriptedProvider([reply('{"type": "final", "text": "3"}')], supports_tools=False)
    assert Assistant(plain, tool_mode="json").limits == ASK_LIMITS, "a served model keeps the question's limits"
    plain.info = msgspec.structs.replace(plain.info, provider="local")  # as LocalProvider's info says
    local = Assistant(plain, tool_mode="json")
    assert local.limits == LOCAL_ASK_LIMITS
    assert (local.limits.request_timeout or 0) > (ASK_LIMITS.request_timeout or 0)
    assert (local.limits.run_timeout or 0) > (ASK_LIMITS.run_timeout or 0)
    given = replace(ASK_LIMITS, max_turns=2)
    assert Assistant(plain, tool_mode="json", limits=given).limits == given, "limits given are kept"
