"""The soft-fail answer's findings: one sentence per completed call, from its envelope, in the order run."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace

from tether.assistant import ASK_LIMITS
from tether.assistant.findings import MAX_FINDINGS, Completed, finding, notice_text, soft_fail
from tether.errors import TimeoutExceeded
from tether.events import RunResult
from tether.limits import StopReason
from tether.loop.context import fallback_text
from tether.usage import Usage


def ok(result: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "result": result}


def failed(code: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": "it failed", "details": details or {}}}


@pytest.mark.parametrize(
    ("name", "arguments", "envelope", "sentence"),
    [
        (
            "get_type",
            {"expr": "df"},
            ok({"name": "DataFrame", "module": "pandas.core.frame", "qualified": "pandas.core.frame.DataFrame"}),
            "`df` is a pandas.core.frame.DataFrame",
        ),
        ("get_type", {"expr": "n"}, ok({"name": "int", "module": "builtins", "qualified": "int"}), "`n` is an int"),
        (
            "list_globals",
            {},
            ok({"globals": [{"name": "df", "type_name": "DataFrame"}, {"name": "n", "type_name": "int"}]}),
            "the session defines `df` (DataFrame), `n` (int)",
        ),
        ("list_globals", {}, ok({"globals": []}), "the session defines no names of its own"),
        (
            "get_repr",
            {"expr": "s"},
            ok({"repr": "'abc'", "truncated": True, "original_len": 9000}),
            "`s` is `'abc'` (cut; 9000 characters in all)",
        ),
        (
            "get_dir",
            {"expr": "client"},
            ok({"members": ["__init__", "get", "post"], "truncated": False, "original_len": 3}),
            "`client` has 3 attributes, among them get, post",
        ),
        ("get_doc", {"expr": "f"}, ok({"doc": None, "truncated": False, "original_len": 0}), "`f` has no docstring"),
        (
            "get_doc",
            {"expr": "f"},
            ok({"doc": "\n  Add two numbers.\n\n  More.", "truncated": False, "original_len": 30}),
            "the docstring of `f` begins: Add two numbers.",
        ),
        (
            "eval_expr",
            {"expr": "len(xs)"},
            ok({"value_repr": "3", "stdout": "hi\n", "stderr": ""}),
            "`len(xs)` evaluates to `3`; it printed 'hi' to stdout",
        ),
        (
            "get_last_exception",
            {},
            ok({"exception": {"exc_type": "KeyError", "message": "'col'", "traceback": "..."}}),
            "the last exception is KeyError: 'col'",
        ),
        ("get_last_exception", {}, ok({"exception": None}), "no exception has been raised in the session"),
        (
            "get_repr",
            {"expr": "missing"},
            failed("python_exception", {"exc_type": "NameError", "message": "name 'missing' is not defined"}),
            "`missing` raised NameError: name 'missing' is not defined",
        ),
    ],
)
def test_each_capability_gives_a_sentence_from_its_envelope(
    name: str, arguments: dict[str, Any], envelope: dict[str, Any], sentence: str
) -> None:
    assert finding(Completed(name, arguments, envelope)) == sentence


@pytest.mark.parametrize("code", ["invalid_args", "unknown_function", "internal"])
def test_calls_that_failed_for_the_models_own_reasons_confirm_nothing(code: str) -> None:
    assert finding(Completed("get_type", {"expr": "x"}, failed(code))) is None


def result(reason: StopReason, detail: str, text: str = "", error: Exception | None = None) -> RunResult:
    text = text or fallback_text(reason, detail)
    return RunResult(text, reason, (), Usage(), degraded=True, detail=detail, error=error)


def test_an_answered_question_is_left_as_it_is() -> None:
    answered = replace(result(StopReason.COMPLETE, "the model answered", "an answer"), degraded=False)

    assert soft_fail(answered, [], ASK_LIMITS) == (answered, "")


def test_the_loops_fixed_sentence_gives_way_to_the_limitation_and_the_findings() -> None:
    stopped = result(StopReason.MAX_TURNS, "reached the limit of 6 turns")
    calls = [Completed("get_type", {"expr": "n"}, ok({"qualified": "int"}))]

    answered, added = soft_fail(stopped, calls, ASK_LIMITS)

    assert (
        answered.text
        == added
        == ("(Stopped before a full answer: it used all of its 6 steps.)\nConfirmed in the session:\n- `n` is an int")
    )


def test_each_deadline_is_named_by_what_it_limits() -> None:
    def limitation(deadline: str) -> str:
        error = TimeoutExceeded("passed", details={"deadline": deadline})
        return notice_text(result(StopReason.TIMEOUT, "passed", "x", error), [], ASK_LIMITS).splitlines()[0]

    assert limitation("run_timeout") == "(Stopped before a full answer: it used all of its 20 s.)"
    assert limitation("step_timeout") == "(Stopped before a full answer: the model did not finish a step within 8 s.)"


def test_many_findings_are_counted_past_the_first_ones() -> None:
    calls = [Completed("get_type", {"expr": f"v{n}"}, ok({"qualified": "int"})) for n in range(MAX_FINDINGS + 3)]

    text = notice_text(result(StopReason.CANCELLED, "cancelled by the host"), calls, ASK_LIMITS)

    assert text.count("\n- `v") == MAX_FINDINGS
    assert text.endswith("\n- and 3 more findings")


def test_a_finding_confirmed_by_several_calls_is_listed_once_in_the_order_first_confirmed() -> None:
    int_n = Completed("get_type", {"expr": "n"}, ok({"qualified": "int"}))
    repr_n = Completed("get_repr", {"expr": "n"}, ok({"repr": "3", "truncated": False, "original_len": 1}))

    text = notice_text(result(StopReason.MAX_TURNS, "reached"), [int_n, repr_n, int_n, repr_n, int_n], ASK_LIMITS)

    assert text.splitlines()[1:] == ["Confirmed in the session:", "- `n` is an int", "- `n` is `3`"]
