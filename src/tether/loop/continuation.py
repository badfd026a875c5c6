"""A final answer cut off at the output limit: continued, and marked when it stays cut.

A model's answer that calls no tool and ends with the finish reason ``length`` stopped because the request's
``max_tokens`` ran out, usually mid-sentence. Returned as it is, it would read as a clean answer. Instead the
answer joins the transcript as far as it came, and up to ``Limits.answer_continuations`` more calls (tools off,
each a turn) ask the model to go on from where it stopped, within the limit; each continuation's text is joined
to the same assistant message (its thinking left out: a message's thinking comes first) and streamed as more of
the answer. The request to go on is sent with that call only (``context/prompts.py``), as a correction is.

The answer is whole once a continuation ends on its own. It stays cut, and :class:`Continued` says so (the run
then stops ``complete`` but ``degraded``, its detail saying the answer was cut off), when the continuations are
spent, switched off (``answer_continuations = 0``), or when one cannot be made: the budget is spent, the host
asked to stop after this turn, the call failed or gave nothing usable. An interrupt (a cancel, a deadline)
during a continuation ends the run as it would anywhere, with the answer joined so far.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import msgspec

from tether.events import RunEvent, TextDelta, TurnStarted
from tether.loop.accumulator import AccumulatedTurn
from tether.loop.call import Calls, ProviderCall
from tether.loop.context import continuation_request
from tether.loop.guard import LoopGuard
from tether.loop.interrupts import Interrupt, Interrupted, Interrupter
from tether.loop.offer import Offer
from tether.loop.state import RunState
from tether.messages import Message

__all__ = ["Continuation", "Continued", "continued_detail", "cut_detail"]


class Continued(msgspec.Struct, frozen=True):
    """What became of an answer cut at the output limit: its text as joined, whether it is still cut, how many
    continuations were made, and the interrupt that stopped one, if any."""

    text: str
    cut: bool
    continuations: int = 0
    interrupt: Interrupt | None = None


class Continuation:
    """The continuations of a run's answers (see the module docstring)."""

    __slots__ = ("calls", "emit", "guard", "interrupter", "offer", "state", "view")

    def __init__(
        self,
        calls: Calls,
        offer: Offer,
        state: RunState,
        guard: LoopGuard,
        interrupter: Interrupter,
        view: Callable[[], list[Message] | tuple[Message, ...]],
        emit: Callable[[RunEvent], RunEvent],
    ) -> None:
        self.calls, self.offer, self.state, self.guard = calls, offer, state, guard
        self.interrupter = interrupter
        self.view = view
        """The model's view of the transcript (the compactor's), the answer so far at its end."""
        self.emit = emit

    async def events(self, turn: AccumulatedTurn) -> AsyncGenerator[RunEvent | Continued, None]:
        """The events of the continuations of ``turn``, an answer (already in the transcript) that ended at the
        output limit; the last item is the :class:`Continued` outcome."""
        text, made = turn.text, 0
        for _ in range(self.guard.limits.answer_continuations):
            if self.interrupter.after_turn is not None or self.guard.budget_spent():
                break
            turn_no = self.state.turn = self.guard.turns + 1
            yield self.emit(TurnStarted(turn_no, final=True))
            request, _ = self.offer.turn(self.view(), None, final=True, called=True, ask=continuation_request())
            call = ProviderCall(self.calls, request, turn_no, 1, final=True)
            deltas = call.deltas(self.offer.actions)
            try:
                async for delta in deltas:
                    yield delta
            except Exception as failure:  # noqa: BLE001 - the answer so far stands; the result says it is cut
                yield self.emit(self.calls.failed(call, failure))
                if (failed := self.calls.failure(call, failure, "stop")) is not None:
                    yield self.emit(failed)
                interrupt = failure.interrupt if isinstance(failure, Interrupted) else None
                yield Continued(text, cut=True, continuations=made, interrupt=interrupt)
                return
            finally:
                await deltas.aclose()
            assert call.outcome is not None, "a call's outcome is set when its stream is over"
            read = self.calls.read(call.outcome, final=True, actions=self.offer.actions, continuing=True)
            if read.shown:
                yield self.emit(TextDelta(read.shown))
            yield self.emit(self.calls.completed(call, read.turn, read.problem))
            if read.problem is not None:
                yield self.emit(self.calls.rejected(call, read.problem, None))
                break
            self.guard.record_turn()
            made += 1
            text = self.state.continue_answer(read.turn.message).text
            if read.turn.finish_reason != "length":
                yield Continued(text, cut=False, continuations=made)
                return
        yield Continued(text, cut=True, continuations=made)


def cut_detail(continued: Continued) -> str:
    """The stop's detail of a run whose answer stayed cut at the output limit."""
    after = continued.continuations
    if after:
        return f"the model's answer was cut off at the output limit, still after {after} continuation(s)"
    return "the model's answer was cut off at the output limit"


def continued_detail(continued: Continued) -> str:
    """The stop's detail of a run whose answer went on past the output limit and then ended on its own."""
    return f"the model answered, its answer continued {continued.continuations} time(s) past the output limit"
