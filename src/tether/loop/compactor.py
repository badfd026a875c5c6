"""The compactor of a run: it owns the model's view of the transcript and keeps each request inside the window.

The contract is ``context/window.py``'s docstring (the user's guide, docs/context.md). A :class:`Compactor`:

* before each request (and the summary call after a limit) compacts when the request is estimated above the
  trigger (:meth:`Compactor.before`);
* compacts in rounds: a summary call per round (:meth:`Compactor._summary`, tools off, its text not shown),
  a marker inserted into the transcript for each, until the view is under the trigger;
  ``ContextOverflow`` when what is left still cannot be sent;
* after a provider's ``context_overflow`` answer learns the window and compacts, so that the turn is tried
  once more (:meth:`Compactor.after`);
* after the run's answer compacts when the conversation is then over the trigger (``Compaction.after_answer``:
  :meth:`Compactor.after_answer`), so that what the run leaves is ready for the next run; its failure costs
  the run nothing (the next run's first request compacts instead).

Each step returns what it did: the ``Compacted`` event, or ``None`` when nothing was done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from msgspec.structs import replace

from tether.errors import ContextOverflow, TetherError
from tether.events import Compacted
from tether.loop.call import Calls, ProviderCall
from tether.loop.context import compaction_request, dropped_summary, summary_request
from tether.loop.context.tokens import TokenGauge, message_chars
from tether.loop.context.window import Budget, ContextWindow, Plan
from tether.loop.interrupts import Interrupted
from tether.loop.offer import Offer
from tether.loop.state import RunState
from tether.messages import Message
from tether.providers.base import ModelSettings
from tether.tools.output_cache import reference_stub

MAX_COMPACTION_ROUNDS = 4
"""Summary calls one compaction makes at most (each summarizes what fits in one request)."""


class Compactor:
    """Keeps one run's requests inside the model's context window (see the module docstring)."""

    __slots__ = ("_calls", "_offer", "_state", "window")

    def __init__(self, state: RunState, offer: Offer, calls: Calls) -> None:
        self._state = state
        self._offer = offer
        self._calls = calls
        spec = offer.spec
        settings = spec.compaction if spec.compaction is not None and spec.compaction.enabled else None
        window = gauge = None
        if settings is not None:
            window = settings.context_window or spec.provider.info.context_window
            if window is not None:  # unknown: the gauge starts at the first overflow, from what the provider says
                gauge = TokenGauge(offer.fixed_chars())
        self.window = ContextWindow(
            state.transcript, state.body_start, settings, window, spec.settings.max_tokens, gauge, reference_stub,
        )  # fmt: skip
        """The model's view of the transcript and its budget."""
        calls.gauge = gauge

    def view(self) -> list[Message]:
        """The messages the model is sent (without the system prompt), before ``max_history_messages``."""
        return self.window.view()

    def tools_changed(self) -> None:
        """The offer grew (the tool-output reader joined it): every request now carries more."""
        if (gauge := self.window.gauge) is not None:
            gauge.fixed_chars = self._offer.fixed_chars()

    async def before(self, turn_no: int, *, final: bool = False) -> Compacted | None:
        """Compact before the next request if it would pass the trigger; refuse one that cannot fit."""
        window = self.window
        if window.budget is None:
            return None
        view = window.view()
        if final:  # the summary request rides on the view
            view = [*view, summary_request()]
        if not window.over_trigger(view):
            return None
        return await self._compact(turn_no, "threshold")

    async def after(self, failure: Exception, turn_no: int) -> Compacted | None:
        """After a ``context_overflow``: learn the window and compact, so that the turn is tried once more;
        ``None`` for any other failure, or when compaction is off."""
        if not (isinstance(failure, TetherError) and failure.code == "context_overflow"):
            return None
        if not self.window.learn_overflow(self.window.view(), str(failure), self._offer.fixed_chars()):
            return None
        self._calls.gauge = self.window.gauge
        return await self._compact(turn_no, "overflow")

    async def after_answer(self, turn_no: int, *, in_session: bool) -> Compacted | None:
        """Compact after the run's answer when ``Compaction.after_answer`` asks for it (``in_session``: the run
        saves a session) and the next request, as it stands, would pass the trigger. A failure (the provider's,
        a cancel, what still cannot fit) is not the run's: it keeps its answer, and the transcript stays valid
        as it was (a marker inserted by a round before the failure is itself valid)."""
        settings = self._offer.spec.compaction
        when = settings.after_answer if settings is not None else "never"
        if when == "never" or (when == "session" and not in_session):
            return None
        window = self.window
        if not window.over_trigger(window.view()):
            return None
        try:
            return await self._compact(turn_no, "threshold")
        except (TetherError, Interrupted):
            return None

    async def _compact(self, turn_no: int, reason: Literal["threshold", "overflow"]) -> Compacted | None:
        """Replace the oldest part of the view by a summary, in rounds, until the view is under the trigger
        or nothing more can be summarized. ``ContextOverflow`` when the next request still would not fit (or,
        after an overflow, when nothing could be compacted); ``None`` when there was nothing to do."""
        window, state = self.window, self._state
        before = window.estimate(window.view())
        summarized = trimmed = rounds = 0
        while rounds < MAX_COMPACTION_ROUNDS and (plan := window.plan(window.view())) is not None:
            rounds += 1
            summary = await self._summary(plan, turn_no)
            if summary is None:  # the model could not summarize it: the part is dropped, and the marker says so
                summary = dropped_summary(len(plan.summarized))
            if plan.cut <= state.first_new:
                state.first_new += 1
            window.compacted(plan, summary)
            summarized, trimmed = summarized + len(plan.summarized), len(plan.trimmed)
            if not window.over_trigger(window.view()):
                break
        view = window.view()
        after = window.estimate(view)
        if window.over_limit(view) or (reason == "overflow" and not rounds):
            raise ContextOverflow(_does_not_fit(view, after, window.budget))
        if not rounds:
            return None
        kept = len(state.transcript) - window.start - 1
        marker = state.transcript[window.start]
        return Compacted(turn_no, before, after, summarized, kept, trimmed, reason, marker)

    async def _summary(self, plan: Plan, turn_no: int) -> str | None:
        """Ask the model, tools off, for a summary of ``plan.summarized``; its text, or ``None`` when it gave
        nothing usable. Recorded like every call (``TurnRecord.compaction``); its deltas are not shown.

        Interrupts and provider failures propagate, except a ``context_overflow`` (the part to summarize
        was still too big): then ``None``, and the caller tries a smaller part.
        """
        offer, calls = self._offer, self._calls
        budget = self.window.budget
        assert budget is not None
        spec = offer.spec
        ask = compaction_request(spec.compaction.instructions if spec.compaction else None)
        settings = _summary_settings(spec.settings, budget.summary_tokens)
        call = ProviderCall(calls, offer.summary(plan.summarized, ask, settings), turn_no, 1, final=True, quiet=True)
        try:
            async for _ in call.deltas(offer.actions):
                pass
        except Exception as failure:
            calls.failed(call, failure, compaction=True)
            if isinstance(failure, TetherError) and failure.code == "context_overflow":
                return None
            raise
        assert call.outcome is not None
        read = calls.read(call.outcome, final=True, actions=offer.actions)
        calls.completed(call, read.turn, read.problem, compaction=True)
        text = read.turn.text.strip()
        return text if read.problem is None and text else None


def _summary_settings(settings: ModelSettings, summary_tokens: int) -> ModelSettings:
    """The settings of a summary call: its ``max_tokens`` at most the summary's size, unless reasoning is set
    (a thinking budget needs ``max_tokens`` above it: left alone)."""
    if any(key in settings.extra for key in ("thinking", "reasoning", "reasoning_effort", "thinkingConfig")):
        return settings
    return replace(settings, max_tokens=min(settings.max_tokens or summary_tokens, summary_tokens))


def _does_not_fit(view: Sequence[Message], tokens: int, budget: Budget | None) -> str:
    """Why a request cannot be sent: what is left after compaction is still bigger than the window."""
    window = f"{budget.window:,}-token context window" if budget is not None else "context window"
    last = max((message_chars(m) for m in view), default=0)
    return (
        f"the conversation cannot be made to fit the model's {window}: after compaction the next request is "
        f"still about {tokens:,} tokens, and the most recent exchange cannot be summarized (its largest message "
        f"has {last:,} characters). Raise Compaction.context_window if the window is larger, or make tool "
        "outputs smaller (cache_tool_outputs, max_tool_output)."
    )


def still_too_long(refused: ContextOverflow) -> ContextOverflow:
    """The error that ends a turn refused as too long again after its compaction: the provider's, saying so."""
    return ContextOverflow(
        "the conversation was compacted and the turn retried, and the provider still refused it as too long for "
        f"the model's context window ({refused.message}). If the window is smaller than known, set "
        "Compaction.context_window to it.",
        status=refused.status,
        provider_message=refused.provider_message,
        request_id=refused.request_id,
        details=refused.details,
    )
