"""What a question to the Python assistant is allowed: its limits and its system prompt.

A question is a small, bounded run: at most :data:`ASK_LIMITS`' six steps, eight seconds per provider call,
twenty seconds in all, one corrective retry after an unusable answer (or a call that could not be run), and
no memory of earlier questions (a model run in this process, on a CPU, gets more time:
:data:`LOCAL_ASK_LIMITS`). The system prompt names only the capabilities offered (``eval_expr`` is left
out in read-only mode) and tells the model that facts about the session come from them alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from tether.limits import Limits

ASK_LIMITS = Limits(
    max_turns=6,
    max_consecutive_errors=2,
    request_timeout=8.0,
    step_timeout=8.0,
    tool_timeout=8.0,
    run_timeout=20.0,
    invalid_response_retries=1,
)
"""One question: 6 steps (then one call without tools for the answer), 8 s per provider call and per
capability call, 20 s in total, one corrective retry for an empty or unusable answer, and a second failed
round of calls (unknown function, unreadable arguments) in a row stops it."""

LOCAL_ASK_LIMITS = replace(ASK_LIMITS, request_timeout=90.0, step_timeout=90.0, run_timeout=180.0)
"""A question to a model run in this process (``local:``): :data:`ASK_LIMITS` with time for a CPU. Loading the
model and evaluating the first prompt take seconds before the first token, and a few hundred tokens at 30-100
a second do not fit in eight; a cloud model's limits would stop it mid-answer."""


def ask_limits(provider: str) -> Limits:
    """The limits of a question to a model of ``provider`` (``ModelInfo.provider``)."""
    return LOCAL_ASK_LIMITS if provider == "local" else ASK_LIMITS


_WHAT = {
    "list_globals": "list_globals() lists the names the user defined, with their types",
    "get_type": "get_type(expr) gives the type of an expression's value",
    "get_repr": "get_repr(expr) gives its repr",
    "get_dir": "get_dir(expr) lists its attributes and methods",
    "get_doc": "get_doc(expr) gives its docstring",
    "eval_expr": "eval_expr(expr) evaluates an expression and captures what it prints",
    "get_last_exception": "get_last_exception() gives the last exception the session raised, with its traceback",
}

SYSTEM = """\
You are an assistant inside a live Python session. You answer the user's questions about that session: \
the variables it defines, their types, values, attributes and documentation, and the errors it raised.
Facts about the running session come only from calling your functions: {functions}. Call them to look \
before you answer; several calls can go in one turn.
Never invent variables, values, outputs or results. If your functions did not confirm something, say that \
you do not know it. Every function answers {{"ok": true, "result": ...}} or {{"ok": false, "error": ...}}; an \
error is a fact too (a NameError means the name is not defined).
Answer concisely: a few sentences, names and values quoted exactly, code only when it helps."""


def system_prompt(capabilities: Iterable[str]) -> str:
    """The system prompt of a question, naming the capabilities offered (in the order given)."""
    names = list(capabilities)
    described = [_WHAT.get(name, f"{name}()") for name in names]
    return SYSTEM.format(functions="; ".join(described))
