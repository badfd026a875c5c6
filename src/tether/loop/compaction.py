"""The compaction step of a run: before a request that would not fit, and after a provider's overflow.

:class:`Compacting` is the part of a :class:`~tether.loop.engine.Run` that keeps its history inside the
model's window (the contract is ``loop/context/window.py``'s docstring; the user's guide, docs/context.md):

* ``_compact_if_needed``: before each request (and the summary call after a limit), compact when the request
  is estimated above the trigger;
* ``_compact``: summary calls in rounds (``ProviderCalls._summary_call``), a marker inserted for each, until
  the view is under the trigger; ``ContextOverflow`` when what is left still cannot be sent;
* ``_recover``: after a ``context_overflow`` answer, learn the window and compact, so that the turn is
  tried once more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from tether.errors import ContextOverflow, TetherError
from tether.events import Compacted
from tether.loop.calls import ProviderCalls
from tether.loop.context import dropped_summary, summary_request
from tether.loop.context.tokens import TokenGauge, fixed_chars, message_chars
from tether.loop.context.window import Budget, ContextWindow
from tether.messages import Message
from tether.tools.output_cache import reference_stub

MAX_COMPACTION_ROUNDS = 4
"""Summary calls one compaction makes at most (each summarizes what fits in one request)."""


class Compacting(ProviderCalls):
    """The compaction step (see the module docstring); :class:`~tether.loop.engine.Run` sets the attributes."""

    __slots__ = ("first_new",)
    """Where the run's new messages start, moved by a compaction (the other attributes are ``Run.__slots__``)."""

    transcript: list[Message]
    body_start: int
    first_new: int

    def _context_window(self) -> ContextWindow:
        """The model's view of the transcript; with a token gauge when compaction is on and the window known
        (with an unknown window the gauge starts at the first overflow, from what the provider says)."""
        settings, provider = self.spec.compaction, self.spec.provider
        window = gauge = None
        if settings is not None and not settings.enabled:
            settings = None
        if settings is not None:
            window = settings.context_window or provider.info.context_window
            if window is not None:
                gauge = TokenGauge(fixed_chars(self.system_text, self.definitions))
        max_tokens = self.spec.settings.max_tokens
        return ContextWindow(
            self.transcript, self.body_start, settings, window, max_tokens, gauge, reference_stub, self._fixed_chars
        )

    def _fixed_chars(self) -> int:
        """The characters every request carries whatever the history: the system prompt and the tools."""
        return fixed_chars(self.system_text, self.definitions)

    # --- build ------------------------------------------------------------------------------------------

    async def _compact_if_needed(self, turn_no: int, final: bool = False) -> Compacted | None:
        """Compact before the next request if it would pass the trigger; refuse one that cannot fit."""
        window = self.window
        if window.budget is None:
            return None
        view = self.window.view()
        if final:  # the summary request rides on the view
            view = [*view, summary_request()]
        if not window.over_trigger(view):
            return None
        return await self._compact(turn_no, "threshold")

    async def _compact(self, turn_no: int, reason: Literal["threshold", "overflow"]) -> Compacted | None:
        """Replace the oldest part of the view by a summary, in rounds, until the view is under the trigger
        or nothing more can be summarized. ``ContextOverflow`` when the next request still would not fit (or,
        after an overflow, when nothing could be compacted); ``None`` when there was nothing to do."""
        window = self.window
        before = window.estimate(window.view())
        summarized = trimmed = rounds = 0
        while rounds < MAX_COMPACTION_ROUNDS and (plan := window.plan(window.view())) is not None:
            rounds += 1
            summary = await self._summary_call(plan, turn_no)
            if summary is None:  # the model could not summarize it: the part is dropped, and the marker says so
                summary = dropped_summary(len(plan.summarized))
            if plan.cut <= self.first_new:
                self.first_new += 1
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
        kept = len(self.transcript) - window.start - 1
        marker = self.transcript[window.start]
        return Compacted(turn_no, before, after, summarized, kept, trimmed, reason, marker)

    async def _recover(self, failure: Exception, turn_no: int) -> Compacted | None:
        """After a ``context_overflow``: compact and return the event, so the turn is tried once more."""
        if not (isinstance(failure, TetherError) and failure.code == "context_overflow"):
            return None
        if not self.window.learn_overflow(self.window.view(), str(failure)):
            return None
        return await self._compact(turn_no, "overflow")


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
