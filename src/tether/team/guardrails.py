"""Guardrails: checks of a run's input and of its answer, each of which lets it pass, blocks it, or asks again.

``Agent(input_guardrails=[...], output_guardrails=[...])`` takes guardrails: functions ``check(ctx, value)``
(sync, run on a worker thread, or async) that return a :class:`GuardrailResult`, or :class:`Guardrail`s that
wrap one with options (``run_alongside=``, a name), or agents (:func:`agent_guardrail`). ``ctx`` is the run's
``RunContext``; ``value`` is the prompt's text (input) or the answer (output: its text, or the typed output).

* **Input guardrails** check the prompt of a run that has one, for the agent the run starts with. By default
  they run before the first model call, in order: one that blocks stops the run with the stop reason
  ``guardrail`` and its message as ``result.text``, before any request is made, any token spent or any tool
  run. ``Guardrail(check, run_alongside=True)`` runs concurrently with the first model call instead (faster when
  it passes): if it blocks, that call is cancelled, or, if it had already answered, its answer is left out of
  the transcript and none of its tool calls runs. An input guardrail cannot ask for a retry.
* **Output guardrails** check the answer of the agent that gives it (the last of a run that was handed off):
  a typed output once it is valid (they run as its last output validators), or the answer's text. One that
  blocks stops the run as ``guardrail`` (its message the result's text; the transcript keeps the answer); one
  that asks for a retry sends the model its message, as an invalid output is sent its errors, and the try
  counts against ``Limits.output_retries`` (past it the run stops as ``invalid_output``).

A guardrail that raises blocks (it fails closed), its message saying so. Which tools may run is not a
guardrail's business: ``can_use_tool`` decides that, call by call.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, TypeAlias

import msgspec
from typing_extensions import TypedDict

from tether.errors import ConfigInvalid
from tether.run_context import RunContext
from tether.tools.threads import run_in_tool_thread

__all__ = [
    "Guardrail",
    "GuardrailCheck",
    "GuardrailResult",
    "GuardrailVerdict",
    "agent_guardrail",
    "guardrails_of",
]


class GuardrailResult(msgspec.Struct, frozen=True, gc=False):
    """A guardrail's word: ``GuardrailResult.passed()``, ``.block(message)`` or ``.retry(message)``."""

    action: Literal["pass", "block", "retry"]
    message: str = ""
    """What the host reads (``block``: the result's text) or the model does (``retry``)."""

    @classmethod
    def passed(cls) -> GuardrailResult:
        return _PASSED

    @classmethod
    def block(cls, message: str) -> GuardrailResult:
        return cls("block", message)

    @classmethod
    def retry(cls, message: str) -> GuardrailResult:
        return cls("retry", message)


_PASSED = GuardrailResult("pass")

GuardrailCheck: TypeAlias = Callable[[RunContext[Any], Any], "GuardrailResult | Awaitable[GuardrailResult]"]
"""A guardrail's function: ``check(ctx, value)``, sync or async."""


class Guardrail:
    """A guardrail's function with its options: a ``name`` (the function's by default), and, for an input
    guardrail, ``run_alongside=True`` to run it concurrently with the first model call (see the module
    docstring)."""

    __slots__ = ("check", "name", "run_alongside")

    def __init__(self, check: GuardrailCheck, *, name: str | None = None, run_alongside: bool = False) -> None:
        if not callable(check):
            raise ConfigInvalid(f"a guardrail must be a function of (ctx, value), not {type(check).__name__}")
        self.check = check
        self.name = name or getattr(check, "__name__", None) or type(check).__name__
        self.run_alongside = bool(run_alongside)

    async def __call__(self, ctx: RunContext[Any], value: Any) -> GuardrailResult:
        """The guardrail's word on ``value``; a function that raises, or returns anything but a
        :class:`GuardrailResult`, blocks."""
        try:
            if inspect.iscoroutinefunction(self.check):
                result = await self.check(ctx, value)
            else:
                result = await run_in_tool_thread(lambda: self.check(ctx, value))
                if inspect.isawaitable(result):
                    result = await result
        except Exception as error:  # noqa: BLE001 - a guardrail that fails keeps the run from going on
            return GuardrailResult.block(f"The guardrail {self.name!r} failed: {type(error).__name__}: {error}")
        if not isinstance(result, GuardrailResult):
            kind = type(result).__name__
            return GuardrailResult.block(f"The guardrail {self.name!r} gave a {kind}, not a GuardrailResult.")
        return result

    def __repr__(self) -> str:
        alongside = ", run_alongside=True" if self.run_alongside else ""
        return f"Guardrail({self.name!r}{alongside})"


def guardrails_of(given: Iterable[Guardrail | GuardrailCheck | Any], where: str) -> tuple[Guardrail, ...]:
    """``Agent(input_guardrails=...)`` or ``output_guardrails=...`` as :class:`Guardrail`s; ``ConfigInvalid``
    for anything that cannot be one, or for ``run_alongside`` on an output guardrail."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        raise ConfigInvalid(f"{where} must be a list of guardrails, not {type(given).__name__}")
    guardrails = tuple(item if isinstance(item, Guardrail) else Guardrail(item) for item in given)
    if where == "output_guardrails" and (alongside := [g.name for g in guardrails if g.run_alongside]):
        raise ConfigInvalid(f"output guardrails run on the answer; run_alongside is for input guardrails: {alongside}")
    return guardrails


class GuardrailVerdict(TypedDict):
    """What an agent used as a guardrail gives (:func:`agent_guardrail`): its decision and why."""

    action: Literal["pass", "block", "retry"]
    message: str


def agent_guardrail(
    agent: Any,
    *,
    name: str | None = None,
    run_alongside: bool = False,
    prompt: Callable[[Any], str] | None = None,
) -> Guardrail:
    """An agent as a guardrail: each check is a run of ``agent`` whose typed output is a
    :class:`GuardrailVerdict` (``{"action": "pass" | "block" | "retry", "message": ...}``), given the value as
    its prompt (``prompt(value)`` makes it, else the value's text or JSON). Its runs are its own: their usage is
    not the checked run's. A run that gives no verdict blocks."""
    if not hasattr(agent, "run"):
        raise ConfigInvalid(f"agent_guardrail takes an Agent, not {type(agent).__name__}")
    made = prompt or _prompt_of
    label = name or getattr(agent, "name", None) or "agent_guardrail"

    async def check(ctx: RunContext[Any], value: Any) -> GuardrailResult:
        result = await agent.run(made(value), output_type=GuardrailVerdict, deps=ctx.deps)
        verdict = result.output
        if not isinstance(verdict, dict):
            return GuardrailResult.block(f"The guardrail {label!r} gave no verdict ({result.stop_reason}).")
        return GuardrailResult(verdict["action"], verdict.get("message", ""))

    return Guardrail(check, name=label, run_alongside=run_alongside)


def _prompt_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    from pydantic_core import to_json  # a typed output: a model, a dataclass, a dict, ...

    return to_json(value).decode()
