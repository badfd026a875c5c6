"""A run's typed output, judged: :class:`OutputJudge` (``output.py`` says what an output type is).

The judge reads the output wherever the model gives it, validates it (the type's checks, then the output
validators), and counts the tries:

* **tool** mode: a turn's calls of an output tool are answered here, before the turn's other calls run (the
  executor is handed their results as verdicts): the first valid one is the output (``Final result
  processed.``), an invalid one is answered with its errors (``invalid_output``), and once there is an output any
  other is answered that it was not used. The turn's other calls run as usual; then the run ends with the output.
  An answer in text, with no output call, is sent back asking for the call.
* **native** and **prompted** modes, and JSON actions: the answer's text is the output's JSON; an invalid one is
  kept in the transcript, followed by a user message with the errors.

Each invalid try counts; past ``Limits.output_retries`` the run stops as ``invalid_output`` with the last raw
answer and its errors (``InvalidOutput``). Nothing raises out of a run for it.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import InvalidOutput
from tether.events import LlmEvent, PartialOutput, TextDelta, ToolCallDelta, ToolCallStart
from tether.limits import StopReason
from tether.loop.guard import Stop
from tether.loop.repeats import Verdict
from tether.messages import Message, ToolCall, ToolResult
from tether.output import ModelRetry, OutputChoice, OutputInvalid, OutputSpec
from tether.tools.threads import run_in_tool_thread

if TYPE_CHECKING:
    from tether.loop.accumulator import Shown, StreamAccumulator
    from tether.loop.progress import RunProgress
    from tether.loop.spec import RunSpec

PROCESSED = "Final result processed."
NOT_USED = "Not used: the final result was already given by an earlier call of this turn."


class OutputJudge:
    """One run's typed output: found, validated, retried or given up on (see the module docstring)."""

    __slots__ = ("_progress", "_spec", "errors", "found", "output", "raw", "tries")

    def __init__(self, spec: RunSpec, progress: RunProgress) -> None:
        assert spec.output is not None, "a judge for a run with a typed output"
        self._spec = spec
        self._progress = progress
        self.found = False
        """A valid output was given."""
        self.output: Any = None
        """The output, once one was valid."""
        self.raw: str | None = None
        """The last answer given as the output (its JSON, or its text), valid or not."""
        self.errors: tuple[str, ...] = ()
        """What was wrong with the last invalid try."""
        self.tries = 0
        """Invalid tries so far."""

    @property
    def spec(self) -> OutputSpec:
        output = self._spec.output
        assert output is not None
        return output

    # --- tool mode ------------------------------------------------------------------------------------------

    async def verdicts(self, calls: Sequence[ToolCall], verdicts: list[Verdict]) -> list[Verdict]:
        """The turn's verdicts with each admitted output call answered (see the module docstring)."""
        for position, call in enumerate(calls):
            choice = self.spec.choice(call.name) if self._spec.output_mode == "tool" else None
            if choice is None or verdicts[position] is not None:
                continue
            if self.found:
                verdicts[position] = ToolResult(call.id, call.name, NOT_USED)
                continue
            raw = call.raw_arguments or json.dumps(call.arguments)
            problem = await self._try(choice, call.arguments, raw)
            if problem is None:
                verdicts[position] = ToolResult(call.id, call.name, PROCESSED)
            else:
                verdicts[position] = ToolResult(call.id, call.name, problem, is_error=True, code="invalid_output")
        return verdicts

    # --- text answers ---------------------------------------------------------------------------------------

    async def answered(self, text: str) -> Message | None:
        """The output read from a final answer's ``text``: ``None`` once it is valid, else the user message that
        sends the model the errors (the loop keeps it in the transcript after the answer, and asks again)."""
        if self._spec.output_mode == "tool" and self._spec.tool_mode == "native":
            self._invalid(text, ("(output): the answer was text; no output tool was called",))
            names = " or ".join(choice.name for choice in self.spec.choices)
            return Message.user(f"Give your final answer by calling {names}, not as text.")
        try:
            choice, checked = self.spec.check_answer(text)
        except OutputInvalid as invalid:
            return Message.user(self._invalid(text, invalid.errors))
        problem = await self._try(choice, checked, text, checked_already=True)
        return None if problem is None else Message.user(problem)

    # --- the end --------------------------------------------------------------------------------------------

    def stop(self) -> Stop | None:
        """``invalid_output`` once the invalid tries have passed ``Limits.output_retries``; else ``None``."""
        if self.tries <= self._spec.limits.output_retries:
            return None
        errors = self.errors
        detail = f"the output was invalid after {self.tries} tries: " + "; ".join(errors[:3])
        return Stop(StopReason.INVALID_OUTPUT, detail, InvalidOutput(detail, raw=self.raw or "", errors=errors))

    # --- one try ------------------------------------------------------------------------------------------

    async def _try(self, choice: OutputChoice, data: Any, raw: str, *, checked_already: bool = False) -> str | None:
        """Validate one try; ``None`` when it is the output, else what to tell the model."""
        try:
            checked = data if checked_already else choice.check(data)
            output = await self.spec.value(choice, checked)
            for validator in self._spec.output_validators:
                output = await self._validated(validator, output)
        except OutputInvalid as invalid:
            return self._invalid(raw, invalid.errors)
        except ModelRetry as retry:
            return self._invalid(raw, (retry.message,))
        self.raw, self.errors, self.output, self.found = raw, (), output, True
        return None

    async def _validated(self, validator: Any, output: Any) -> Any:
        """``validator``'s word on ``output``: given the run's context first when it takes two parameters; run on a
        worker thread when it is synchronous."""
        takes_context = len(inspect.signature(validator).parameters) >= 2
        args = (self._progress.context(), output) if takes_context else (output,)
        if inspect.iscoroutinefunction(validator):
            return await validator(*args)
        return await run_in_tool_thread(lambda: validator(*args))

    def _invalid(self, raw: str, errors: Sequence[str]) -> str:
        self.tries += 1
        self.raw, self.errors = raw, tuple(errors)
        lines = "\n".join(f"- {line}" for line in errors)
        return f"The output is not valid:\n{lines}\nFix these and give the whole output again."


class PartialOutputs:
    """A watch's picker for a call of a run with a typed output (``interrupts.Picker``): it folds every event into
    the call's accumulator, as the plain picker does, and hands on the output as written so far
    (:class:`~tether.events.PartialOutput`) in place of the deltas of its raw JSON: the text of a ``native`` or
    ``prompted`` answer, or the arguments of an output tool's call."""

    __slots__ = ("_accumulator", "_calls", "_spec", "_text", "_tool_mode", "_turn", "held")

    def __init__(self, accumulator: StreamAccumulator, spec: OutputSpec, *, tool_mode: bool, turn: int) -> None:
        self._accumulator = accumulator
        self._spec = spec
        self._tool_mode = tool_mode
        self._turn = turn
        self._text: list[str] = []
        self._calls: dict[str, list[str]] = {}
        """The argument deltas of each output call so far, by call id."""
        self.held: list[Shown | PartialOutput] | None = None
        """What an event showed after what :meth:`pick` returned (a thinking block's mark came first)."""

    def pick(self, event: LlmEvent) -> Shown | PartialOutput | None:
        accumulator = self._accumulator
        shown = accumulator.add(event)
        if accumulator.held is None:
            return self._shown(event, shown)
        held, accumulator.held = accumulator.held, None  # a mark first: the rest as this picker shows it
        self.held = [picked for item in held if (picked := self._shown(event, item)) is not None] or None
        return shown

    def release(self) -> Shown | PartialOutput:
        """The first of what is :attr:`held`."""
        held = self.held
        assert held, "released only while something is held"
        shown = held.pop(0)
        if not held:
            self.held = None
        return shown

    def _shown(self, event: LlmEvent, shown: Shown | None) -> Shown | PartialOutput | None:
        """What is handed on of ``event``, which the accumulator showed as ``shown``: the output so far in place
        of its raw JSON's deltas."""
        if self._tool_mode:
            if isinstance(event, ToolCallStart) and self._spec.choice(event.name) is not None:
                self._calls[event.id] = []
            elif isinstance(event, ToolCallDelta) and (pieces := self._calls.get(event.id)) is not None:
                pieces.append(event.arguments_delta)
                return self._partial("".join(pieces))
            return shown
        if isinstance(event, TextDelta):
            self._text.append(event.text)
            return self._partial("".join(self._text))
        return shown

    def _partial(self, text: str) -> PartialOutput | None:
        from pydantic_core import from_json

        try:
            data = from_json(text, allow_partial="trailing-strings")
        except ValueError:  # not JSON (yet, or at all): nothing to show
            return None
        return PartialOutput(data, self._spec.partial(data), self._turn)
