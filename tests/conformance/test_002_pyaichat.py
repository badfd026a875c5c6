"""Document 002 (pyaichat, Phase 5: a bounded, Gemini-native function-calling loop over a live Python session),
its mocked integration tests, provider tests and acceptance criteria, against tether's public API
(docs/conformance.md, section 002). The Gemini wire is served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tests.assistant.test_ask_gemini import candidate, function_responses, gemini, serving, streamed, text_answer, whole
from tests.wire.replay import Cassette
from tether import Assistant, StopReason, ToolResult, ask
from tether.assistant import ASK_LIMITS
from tether.providers import Request, ScriptedProvider, call, cut_off, empty, hang, parallel, reply

USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}
FAR = replace(ASK_LIMITS, request_timeout=None, step_timeout=60.0, run_timeout=None)
"""The question's limits with its deadlines far away, for the tests that set one of their own."""


def answered(request: Request) -> tuple[ToolResult, ...]:
    """The function responses the request carries back to the model (its last message)."""
    last = request.messages[-1]
    assert last.role == "tool"
    return last.tool_results


def envelope(result: ToolResult) -> dict[str, Any]:
    return dict(json.loads(result.content))


# --- the mocked integration tests ----------------------------------------------------------------------------


def test_002_i01_happy_path_function_call_response_then_final_text() -> None:
    model = ScriptedProvider([call("get_type", {"expr": "x"}, id="c1"), reply("x is an int")])
    result = ask("what is x?", {"x": 3}, model=model)
    assert (result.stop_reason, result.text, result.degraded) == (StopReason.COMPLETE, "x is an int", False)
    (response,) = answered(model.requests[1])
    assert response.call_id == "c1"
    assert envelope(response) == {"ok": True, "result": {"name": "int", "module": "builtins", "qualified": "int"}}


def test_002_i02_several_calls_of_one_turn_run_in_order_and_go_back_in_one_message() -> None:
    turn = parallel(call("get_repr", {"expr": "b"}), call("get_repr", {"expr": "a"}), call("list_globals"))
    model = ScriptedProvider([turn, reply("done")])
    ask("show b, a and the globals", {"a": 1, "b": 2}, model=model)
    responses = answered(model.requests[1])
    assert [envelope(r)["result"].get("repr") for r in responses[:2]] == ["2", "1"]
    assert envelope(responses[2])["result"]["globals"] == [
        {"name": "a", "type_name": "int"},
        {"name": "b", "type_name": "int"},
    ]
    assert sum(1 for m in model.requests[1].messages if m.role == "tool") == 1


def test_002_i04_an_empty_answer_is_retried_once_then_soft_fails() -> None:
    recovered = ask("what is x?", {"x": 3}, model=ScriptedProvider([empty(), reply("3")]))
    assert (recovered.stop_reason, recovered.text) == (StopReason.COMPLETE, "3")
    model = ScriptedProvider([call("get_type", {"expr": "x"}), empty(), empty()])
    result = ask("what is x?", {"x": 3}, model=model)
    assert result.stop_reason == StopReason.INVALID_RESPONSE
    assert result.degraded
    assert len(model.requests) == 3
    assert "- `x` is an int" in result.text


def test_002_i05_a_malformed_function_call_gets_one_correction_then_soft_fails() -> None:
    broken = call("get_type", '{"expr": "x"')  # arguments that are not JSON
    model = ScriptedProvider([broken, broken, reply("x is probably an int")])
    result = ask("what is x?", {"x": 3}, model=model)
    (first,) = answered(model.requests[1])
    assert (first.is_error, first.code) == (True, "invalid_arguments")
    assert result.degraded
    assert result.stop_reason == StopReason.CONSECUTIVE_ERRORS
    assert result.text.startswith("x is probably an int")


def test_002_i05_an_answer_cut_off_twice_retries_once_then_soft_fails() -> None:
    cut = cut_off(call("get_repr", {"expr": "x"}))
    model = ScriptedProvider([cut, cut])
    result = ask("what is x?", {"x": 7}, model=model)
    assert result.stop_reason == StopReason.INVALID_RESPONSE
    assert len(model.requests) == 2
    assert result.degraded


def test_002_i06_an_unusable_first_candidate_is_passed_over_for_a_usable_one() -> None:
    blocked = candidate([{"text": "I cannot"}], finish="SAFETY", index=0)
    usable = candidate([{"functionCall": {"id": "fc-1", "name": "get_type", "args": {"expr": "x"}}}], index=1)
    cassette = Cassette(
        "composed",
        (
            whole({"candidates": [blocked, usable], "usageMetadata": USAGE}),
            whole(text_answer("x is an int.")),
        ),
    )
    with serving(cassette) as server:
        result = ask("what is x?", {"x": 3}, model=gemini(server, stream=False))
    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "x is an int.")
    (response,) = function_responses(server.bodies[1])
    assert (response["id"], response["name"]) == ("fc-1", "get_type")


def test_002_p09_an_answer_without_a_usable_candidate_is_retried_once() -> None:
    blocked = candidate([{"text": "I cannot"}], finish="SAFETY", index=0)
    cassette = Cassette(
        "composed",
        (
            whole({"candidates": [blocked], "usageMetadata": USAGE}),
            whole(text_answer("x is an int.")),
        ),
    )
    with serving(cassette) as server:
        result = ask("what is x?", {"x": 3}, model=gemini(server, stream=False))
    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "x is an int.")
    assert len(server.bodies) == 2
    assert "I cannot" not in json.dumps(server.bodies[1]["contents"])


def test_002_i07_the_step_cap_soft_fails_with_the_findings() -> None:
    steps = [call("get_repr", {"expr": f"v{n}"}) for n in range(6)]
    model = ScriptedProvider([*steps, reply("")])
    result = ask("what are the v's?", {f"v{n}": n for n in range(6)}, model=model)
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.turns == 6
    assert result.degraded
    assert "it used all of its 6 steps" in result.text
    assert "- `v5` is `5`" in result.text


def test_002_i08_the_total_timeout_soft_fails_with_the_findings() -> None:
    model = ScriptedProvider([call("get_type", {"expr": "x"}), hang()])
    result = ask("what is x?", {"x": 3}, model=model, limits=replace(FAR, run_timeout=0.2))
    assert result.stop_reason == StopReason.TIMEOUT
    assert result.degraded
    assert "- `x` is an int" in result.text


def test_002_i09_a_step_timeout_soft_fails_with_the_findings() -> None:
    model = ScriptedProvider([call("get_type", {"expr": "x"}), hang()])
    result = ask("what is x?", {"x": 3}, model=model, limits=replace(FAR, step_timeout=0.2))
    assert result.stop_reason == StopReason.TIMEOUT
    assert "did not finish a step within 0.2 s" in result.text
    assert "- `x` is an int" in result.text


def test_002_i10_a_capability_exception_is_returned_and_the_loop_continues() -> None:
    model = ScriptedProvider([call("eval_expr", {"expr": "1 / 0"}), reply("dividing by zero fails")])
    result = ask("what is 1/0?", {}, model=model)
    (response,) = answered(model.requests[1])
    failed = envelope(response)
    assert failed["ok"] is False
    assert failed["error"]["code"] == "python_exception"
    assert failed["error"]["message"] == "ZeroDivisionError: division by zero"
    assert failed["error"]["details"]["exc_type"] == "ZeroDivisionError"
    assert "Traceback" in failed["error"]["details"]["traceback"]
    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "dividing by zero fails")


# --- the capability result schema ---------------------------------------------------------------------------


class Documented:
    """A documented class."""

    def method(self) -> None:
        """A method."""


@pytest.mark.parametrize(
    ("name", "arguments", "result"),
    [
        ("list_globals", {}, {"globals": [{"name": "n", "type_name": "list"}]}),
        ("get_type", {"expr": "n"}, {"name": "list", "module": "builtins", "qualified": "list"}),
        ("get_repr", {"expr": "n"}, {"repr": "[1, 2]", "truncated": False, "original_len": 6}),
        ("eval_expr", {"expr": "print('hi') or len(n)"}, {"value_repr": "2", "stdout": "hi\n", "stderr": ""}),
        ("get_last_exception", {}, {"exception": None}),
    ],
)
def test_002_r_each_capability_answers_its_documented_result(
    name: str, arguments: dict[str, Any], result: dict[str, Any]
) -> None:
    model = ScriptedProvider([call(name, arguments), reply("ok")])
    ask("look", {"n": [1, 2]}, model=model, last_exception=None)
    (response,) = answered(model.requests[1])
    given = envelope(response)
    assert given["ok"] is True
    assert {key: given["result"][key] for key in result} == result
    assert set(given["result"]) - set(result) <= {"truncated", "original_len"}


def test_002_r_get_dir_and_get_doc_answer_with_their_truncation_fields() -> None:
    model = ScriptedProvider([parallel(call("get_dir", {"expr": "D"}), call("get_doc", {"expr": "D"})), reply("ok")])
    ask("look", {"D": Documented}, model=model)
    listed, doc = (envelope(r)["result"] for r in answered(model.requests[1]))
    assert "method" in listed["members"]
    assert set(listed) == {"members", "truncated", "original_len"}
    assert doc == {"doc": "A documented class.", "truncated": False, "original_len": len("A documented class.")}


def test_002_r_the_last_exception_is_reported_with_type_message_and_traceback() -> None:
    model = ScriptedProvider([call("get_last_exception"), reply("a KeyError")])
    empty: dict[str, int] = {}
    try:
        empty["col"]
    except KeyError as error:
        ask("why?", {}, model=model, last_exception=error)
    (response,) = answered(model.requests[1])
    exception = envelope(response)["result"]["exception"]
    assert (exception["exc_type"], exception["message"]) == ("KeyError", "'col'")
    assert "Traceback" in exception["traceback"]


def test_002_r_invalid_arguments_answer_an_invalid_args_envelope() -> None:
    model = ScriptedProvider([call("get_type", {"expression": "x"}), reply("ok")])
    ask("what is x?", {"x": 1}, model=model)
    (response,) = answered(model.requests[1])
    assert response.is_error
    refused = envelope(response)
    assert refused["ok"] is False
    assert refused["error"]["code"] == "invalid_args"
    assert "expr" in refused["error"]["message"]


# --- the loop's settings and the Gemini wire ----------------------------------------------------------------


def test_002_l_the_defaults_are_six_steps_eight_seconds_a_step_twenty_in_all_one_retry() -> None:
    assert ASK_LIMITS.max_turns == 6
    assert (ASK_LIMITS.step_timeout, ASK_LIMITS.run_timeout) == (8.0, 20.0)
    assert ASK_LIMITS.invalid_response_retries == 1


def test_002_l_each_question_starts_with_only_its_own_question() -> None:
    model = ScriptedProvider([reply("one"), reply("two")])
    assistant = Assistant(model)
    assistant.ask("first?", {})
    assistant.ask("second?", {})
    assert [m.text for m in model.requests[1].messages] == ["second?"]


def test_002_l_the_model_may_answer_directly_without_calling_a_function() -> None:
    model = ScriptedProvider([reply("I can answer that without looking.")])
    result = ask("what is Python?", {}, model=model)
    assert (result.stop_reason, result.degraded) == (StopReason.COMPLETE, False)
    assert model.requests[0].tool_choice == "auto"


def test_002_w_the_gemini_wire_carries_declarations_auto_mode_and_function_responses_as_user() -> None:
    calls = [{"functionCall": {"id": "fc-1", "name": "get_type", "args": {"expr": "x"}}}]
    cassette = Cassette(
        "composed",
        (
            streamed({"candidates": [candidate(calls)], "usageMetadata": USAGE}),
            streamed(text_answer("x is an int.")),
        ),
    )
    with serving(cassette) as server:
        ask("what is x?", {"x": 3}, model=gemini(server))
    first, second = server.bodies
    (tools,) = first["tools"]
    declared = {d["name"]: d for d in tools["functionDeclarations"]}
    assert set(declared) == {
        "list_globals",
        "get_type",
        "get_repr",
        "get_dir",
        "get_doc",
        "eval_expr",
        "get_last_exception",
    }
    assert first["toolConfig"]["functionCallingConfig"]["mode"] == "AUTO"
    assert "systemInstruction" in first
    model_turn, results = second["contents"][-2:]
    assert model_turn == {"role": "model", "parts": calls}, "the model's content goes back unchanged"
    assert results["role"] == "user"
    (response,) = function_responses(second)
    assert (response["id"], response["name"]) == ("fc-1", "get_type")
    assert response["response"]["ok"] is True
