"""LoopGuard: the run's counters, and the one place that decides a limit has been reached.

The contract
------------
* **Turns.** A turn is a provider call whose answer was used. After turn ``max_turns`` the run stops with
  ``max_turns`` if the model still wanted to act (its tool calls of that turn are run first, so nothing is
  left unanswered). Rejected answers do not count as turns; they count as invalid responses.
* **Tool calls** are counted exactly. Of one turn's calls, those past ``max_tool_calls_per_turn`` are not run
  and get an error result telling the model so (with ``excess_tool_calls="stop"``, the run then stops with
  ``max_tool_calls`` after that turn). Past ``max_tool_calls`` for the run, calls are refused the same way and
  the run stops with ``max_tool_calls`` after that turn.
* **Consecutive errors.** A turn whose tool results are all errors is an error turn; after
  ``max_consecutive_errors`` of them in a row the run stops. Any successful result resets the count.
* **Invalid responses.** An answer with nothing usable is rejected and retried with a corrective message;
  more than ``invalid_response_retries`` rejections in a row stop the run with ``invalid_response``.
* **Budget.** Each provider call is priced as it completes, from that call's own usage (its prompt size picks
  the price tier), and the run's cost is the sum of those; it is compared with ``max_cost_usd`` after every
  call, so the run stops after the call that reached the budget.
* **Repeats.** A turn asking for exactly the calls of the turn before is answered with the earlier results,
  and the next request asks the model only for its answer (``loop/repeats.py``); the guard says which
  results the model then has (:attr:`LoopGuard.repeated`).
* When several limits are reached by the same turn, the first in this order wins: budget, tool calls,
  consecutive errors, turns.

Deadlines are enforced by the run's :class:`~tether.loop.interrupts.Interrupter`; the guard only computes
the run's deadline. The guard holds counts and decides; it never touches the transcript.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from tether.errors import TetherError
from tether.limits import Limits, StopReason
from tether.loop.repeats import RepeatTracker, Verdict
from tether.messages import ToolCall, ToolResult
from tether.paused import PausedRun
from tether.usage import NO_COST, Cost, Price, Usage, cost_of


class Stop(msgspec.Struct, frozen=True, gc=False):
    """A decision to stop the run, with a sentence saying why and the error behind it, if any."""

    reason: StopReason
    detail: str
    error: Exception | None = None
    degraded: bool = False
    """The run's answer is best effort even though the model gave one (an answer cut at the output limit)."""


class LoopGuard:
    """Counts turns, tool calls, errors and spend for one run, and says when and why to stop."""

    __slots__ = (
        "_cache_read_tokens", "_cache_write_1h_tokens", "_cache_write_tokens", "_input_tokens", "_output_tokens",
        "_reasoning_tokens", "_refused", "_requests", "error_turns", "invalid_in_a_row", "limits", "price", "repeated",
        "repeats", "spent", "tool_calls", "turns",
    )  # fmt: skip

    def __init__(self, limits: Limits, price: Price | None, repeatable: Callable[[str], bool] | None = None) -> None:
        """``repeatable(tool_name)``: whether a tool may be called again with the same arguments."""
        self.limits = limits
        self.price = price
        self.repeats = RepeatTracker(repeatable or _never)
        self.repeated: tuple[ToolResult, ...] = ()
        """The earlier results a repeated turn was answered with (empty unless the last turn was one): the
        model has what it asked for, so its next request only lets it answer."""
        self.turns = 0
        self.tool_calls = 0
        self.error_turns = 0
        self.invalid_in_a_row = 0
        self._input_tokens = self._output_tokens = self._cache_read_tokens = self._cache_write_tokens = 0
        self._reasoning_tokens = self._requests = self._cache_write_1h_tokens = 0
        """The run's usage so far as plain counts: a ``Usage`` is made when it is read (at a checkpoint and at the
        end), not on every call (a frozen seven-field value costs about 5,000 instructions to make)."""
        self.spent = NO_COST
        """The sum of each call's cost, priced when the call completed."""
        self._refused: str | None = None
        """Why the run stops with ``max_tool_calls`` after this turn, once a call was refused for a limit that
        stops it (the run's count, or the turn's with ``excess_tool_calls="stop"``)."""

    @property
    def cost(self) -> Cost | None:
        """What the run has cost so far; ``None`` when the model's price is unknown."""
        return None if self.price is None else self.spent

    @property
    def usage(self) -> Usage:
        """What the run has used so far, every provider call's usage added up."""
        return Usage(
            self._input_tokens, self._output_tokens, self._cache_read_tokens, self._cache_write_tokens,
            self._reasoning_tokens, self._requests, self._cache_write_1h_tokens,
        )  # fmt: skip

    def carry(self, before: LoopGuard) -> None:
        """Go on from the counts of ``before``, the guard of the run this one continues under another agent
        (``tether.team``): its turns, tool calls and spend count against the same limits. Its usage stays its own
        (each run's result, and its session, add up their own)."""
        self.turns, self.tool_calls, self.spent = before.turns, before.tool_calls, before.spent

    def resume(self, paused: PausedRun) -> None:
        """Go on from the counts of the run ``paused`` stopped (``pausing.py``): its turns, tool calls, error turns,
        usage and spend count against the same limits, and a limit a call of the paused turn reached still stops
        the run after it."""
        self.turns, self.tool_calls, self.error_turns = paused.turns, paused.tool_calls, paused.error_turns
        self.spent = paused.cost if paused.cost is not None else NO_COST
        self._refused = paused.refused
        self._count(paused.usage)

    @property
    def refused(self) -> str | None:
        """Why the run stops with ``max_tool_calls`` after this turn, if a call of it was refused for a limit."""
        return self._refused

    def record_call(self, usage: Usage) -> None:
        """Add one provider call's usage and its cost (checked against the budget before the next call)."""
        self._count(usage)
        if self.price is not None:
            self.spent = self.spent + cost_of(usage, self.price)

    def record_nested(self, usage: Usage, cost: Cost | None, tool_calls: int) -> None:
        """Add what an agent this run ran as a tool used (``nesting.py``): its usage and cost (priced at its own
        model's price) count against this run's budget, its tool calls against this run's ``max_tool_calls``."""
        self._count(usage)
        if cost is not None:
            self.spent = self.spent + cost
        self.tool_calls += tool_calls

    def _count(self, usage: Usage) -> None:
        """Add ``usage`` to the seven counts a ``Usage`` is made of when it is read (:attr:`usage`)."""
        self._input_tokens += usage.input_tokens
        self._output_tokens += usage.output_tokens
        self._cache_read_tokens += usage.cache_read_tokens
        self._cache_write_tokens += usage.cache_write_tokens
        self._reasoning_tokens += usage.reasoning_tokens
        self._requests += usage.requests
        self._cache_write_1h_tokens += usage.cache_write_1h_tokens

    def record_invalid(self, problem: str, error: Exception | None = None) -> Stop | None:
        """A rejected answer (``error``: the malformed answer's ``InvalidResponse``, if that was the problem);
        stop once the corrective retries are used up (or the budget is), with that error as the run's."""
        if stop := self._budget_stop():
            return stop
        self.invalid_in_a_row += 1
        if self.invalid_in_a_row > self.limits.invalid_response_retries:
            tries = self.invalid_in_a_row
            return Stop(StopReason.INVALID_RESPONSE, f"no usable answer after {tries} attempts: {problem}", error)
        return None

    def record_turn(self) -> None:
        """An answer was accepted as a turn."""
        self.turns += 1
        self.invalid_in_a_row = 0

    def admit(self, calls: Sequence[ToolCall]) -> list[Verdict]:
        """For each call in order: ``None`` to run it, a :class:`Repeat` (answered with an earlier result), or
        the reason it may not run. Counts the calls it lets run."""
        repeats = self.repeats.check(calls)
        self.repeated = () if repeats is None else tuple(repeat.earlier for repeat in repeats)
        if repeats is not None:
            return list(repeats)
        per_turn = self.limits.max_tool_calls_per_turn
        total = self.limits.max_tool_calls
        verdicts: list[Verdict] = []
        for position, _call in enumerate(calls):
            if per_turn is not None and position >= per_turn:
                verdicts.append(self._excess(len(calls), per_turn))
            elif total is not None and self.tool_calls >= total:
                self._refused = self._refused or f"reached the limit of {total} tool calls"
                verdicts.append(f"Not run: the run's limit of {total} tool calls has been reached.")
            else:
                self.tool_calls += 1
                verdicts.append(None)
        return verdicts

    def _excess(self, asked: int, per_turn: int) -> str:
        """The verdict on a call past ``max_tool_calls_per_turn``; with ``excess_tool_calls="stop"`` the run
        stops after this turn."""
        if self.limits.excess_tool_calls == "stop":
            self._refused = self._refused or (
                f"the model asked for {asked} tool calls in one turn, more than the {per_turn} of "
                "max_tool_calls_per_turn"
            )
            return (
                f"Not run: this turn asked for {asked} tool calls and at most {per_turn} run per turn; the run stops."
            )
        return (
            f"Not run: this turn asked for {asked} tool calls and at most {per_turn} run per turn. "
            "Call it again in your next turn if it is still needed."
        )

    def record_results(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> None:
        self.repeats.record(calls, results)
        if not results:
            return
        counted = False  # a typed output's invalid tries count against Limits.output_retries instead
        for result in results:  # a loop, not all(...): a generator per tool turn costs more than the test
            if not result.is_error:
                self.error_turns = 0
                return
            counted = counted or result.code != "invalid_output"
        if counted:
            self.error_turns += 1

    def after_turn(self) -> Stop | None:
        """Whether the run must stop after a turn whose tool calls have all been answered."""
        limits = self.limits
        if stop := self._budget_stop():
            return stop
        if self._refused is not None:
            return Stop(StopReason.MAX_TOOL_CALLS, self._refused)
        if limits.max_consecutive_errors is not None and self.error_turns >= limits.max_consecutive_errors:
            return Stop(
                StopReason.CONSECUTIVE_ERRORS,
                f"the tool calls of {self.error_turns} turns in a row all failed",
            )
        if limits.max_turns is not None and self.turns >= limits.max_turns:
            return Stop(StopReason.MAX_TURNS, f"reached the limit of {limits.max_turns} turns")
        return None

    def budget_spent(self) -> bool:
        """Whether ``max_cost_usd`` has been reached: no call is made for what can be done without."""
        return self._budget_stop() is not None

    def _budget_stop(self) -> Stop | None:
        limit = self.limits.max_cost_usd
        cost = self.cost
        if limit is None or cost is None or cost.total_usd < limit:
            return None
        return Stop(StopReason.BUDGET, f"spent ${cost.total_usd:.4f} of the ${limit:.4f} budget")


def _never(tool_name: str) -> bool:
    return False


def unanswered_repeat(had: Sequence[ToolResult], problem: str) -> Stop:
    """The stop of a run whose model, after a repeated call, gave no usable answer."""
    names = ", ".join(dict.fromkeys(result.name for result in had))
    detail = f"the model asked again for the calls it had the results of ({names}), then gave no usable answer: "
    return Stop(StopReason.CONSECUTIVE_ERRORS, detail + problem)


def reason_for(error: TetherError) -> StopReason:
    """The stop reason of a run an error ended."""
    return StopReason.TIMEOUT if error.code == "timeout" else StopReason.ERROR


def why_closed(stop: Stop) -> str:
    """What the result of a call left open by ``stop`` says."""
    return "the run was cancelled" if stop.reason is StopReason.CANCELLED else f"the run stopped: {stop.detail}"
