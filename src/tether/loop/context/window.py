"""The model's view of a run's transcript, how big it is, and how a compaction reshapes it.

The contract (docs/context.md):

* The transcript keeps every message. The model is sent the *view*: the system prompt, then everything
  from the last compaction marker on (``tether.messages.model_view``). Without a marker the view is the
  transcript.
* With a budget (``Compaction`` on and a context window known or learned from an overflow), the loop
  compacts before a request estimated above ``Budget.trigger``: the oldest part of the view is replaced by a
  summary the model writes, in a marker inserted into the transcript where the verbatim part resumes.
* A compaction cuts only between whole exchanges (``history.cut_points``): a tool call and its result, and
  an assistant message with its signed thinking, are summarized or kept together. It keeps the most recent
  messages that fit ``Budget.keep`` (at least the last exchange) and sends for summary only what fits the
  window with room for the summary itself; when that is less than everything, it runs again on the result.
* No request above ``Budget.limit`` is sent: when nothing more can be compacted the run stops with
  ``context_overflow`` saying what does not fit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tether.limits import Compaction
from tether.loop.context.history import cut_points
from tether.loop.context.tokens import TokenGauge, message_chars
from tether.messages import (
    CompactionInfo,
    Message,
    ToolResult,
    compaction_marker,
    compaction_of,
    last_compaction,
    view_from,
)

Stub = Callable[[ToolResult], "str | None"]
"""The short text a cached tool output is shown as once trimmed (``tools.output_cache.reference_stub``)."""

MAX_SUMMARY_TOKENS = 4_096


@dataclass(frozen=True, slots=True)
class Budget:
    """A run's context budget in tokens, from ``Compaction`` and the model's window."""

    window: int
    trigger: int
    """Compact before a request estimated above this."""
    limit: int
    """Never send a request estimated above this: the window less the room the answer needs."""
    keep: int
    """Tokens of recent messages kept verbatim at most (at least the last exchange is kept)."""
    summary_tokens: int
    """``max_tokens`` of the summary call."""

    @classmethod
    def of(cls, settings: Compaction, window: int, max_tokens: int | None) -> Budget:
        answer = min(max_tokens or 0, window // 2)
        limit = window - answer
        summary = settings.summary_tokens or max(min(window // 8, MAX_SUMMARY_TOKENS), 64)
        return cls(
            window=window,
            trigger=min(int(window * settings.threshold), limit),
            limit=limit,
            keep=int(window * settings.keep_recent),
            summary_tokens=min(summary, window // 4),
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """One compaction step: summarize ``transcript[start:cut]`` (sent as ``summarized``), keep the rest."""

    start: int
    cut: int
    summarized: tuple[Message, ...]
    """What the summary call sends: the model's view of the part to summarize."""
    trimmed: dict[str, str]
    tokens_before: int


class ContextWindow:
    """The view of one run's transcript (see the module docstring).

    ``transcript`` is the run's own list: the loop appends to it, and :meth:`compacted` inserts markers.
    ``start`` is where the view begins (the last marker, or the first message after the system prompt); the
    rendered head of the view (the marker's summary, merged and trimmed) is made once per compaction.
    """

    __slots__ = (
        "_fixed", "_head", "_verbatim_from", "budget", "gauge", "max_tokens", "settings", "start", "stub", "transcript",
    )  # fmt: skip

    def __init__(
        self,
        transcript: list[Message],
        body_start: int,
        settings: Compaction | None,
        window: int | None,
        max_tokens: int | None,
        gauge: TokenGauge | None,
        stub: Stub | None = None,
    ) -> None:
        self.transcript = transcript
        self.settings = settings
        self.max_tokens = max_tokens
        self.gauge = gauge
        self.budget = Budget.of(settings, window, max_tokens) if settings is not None and window else None
        self.stub = stub
        marker = last_compaction(transcript, body_start)
        self.start = body_start if marker is None else marker
        self._head: Sequence[Message] = ()  # shared while empty; a list once a compaction made one
        self._verbatim_from = self.start
        if marker is not None:
            self._render(len(transcript))

    def _render(self, end: int) -> None:
        """Make the head of the view: ``transcript[start:end]`` as the model sees it after the marker."""
        self._head = view_from(self.transcript[:end], self.start)
        self._verbatim_from = end

    def view(self) -> list[Message]:
        """The messages the model is sent (without the system prompt), before ``max_history_messages``."""
        tail = self.transcript[self._verbatim_from :]
        return [*self._head, *tail] if self._head else tail

    # --- size ---------------------------------------------------------------------------------------------

    def estimate(self, view: Sequence[Message]) -> int:
        assert self.gauge is not None
        return self.gauge.estimate(view)

    def over_trigger(self, view: Sequence[Message]) -> bool:
        """Whether the request sending ``view`` should be compacted first."""
        return self.budget is not None and self.gauge is not None and self.gauge.estimate(view) > self.budget.trigger

    def over_limit(self, view: Sequence[Message]) -> bool:
        return self.budget is not None and self.gauge is not None and self.gauge.estimate(view) > self.budget.limit

    def learn_overflow(self, view: Sequence[Message], detail: str, fixed_chars: int = 0) -> bool:
        """The provider refused ``view`` as too long. Learn the window (from the error, else from the view's
        size, even when a larger one is known: it was not this request's limit) and recalibrate; ``False``
        when compaction is off, so nothing can be done. ``fixed_chars``: what every request carries besides its
        messages (the system prompt, the tools), for a gauge made now."""
        if self.settings is None:
            return False
        if self.gauge is None:
            self.gauge = TokenGauge(fixed_chars)
        window = window_in_error(detail)
        if window is None:  # what was refused bounds the window, whatever the model is known to have
            window = int(self.gauge.whole(view) * 0.9)
        if self.budget is not None:
            window = min(window, self.budget.window)
        self.gauge.overflowed(view, window, tokens_in_error(detail))
        self.budget = Budget.of(self.settings, max(window, 256), self.max_tokens)
        return True

    # --- compaction ---------------------------------------------------------------------------------------

    def plan(self, view: Sequence[Message]) -> Plan | None:
        """The next compaction step, or ``None`` when nothing before the last exchange can be summarized or
        when the last exchange, always kept, cannot fit the window whatever is summarized."""
        budget, gauge, transcript = self.budget, self.gauge, self.transcript
        assert budget is not None
        assert gauge is not None
        start, end = self.start, len(transcript)
        floor = start + 2 if compaction_of(transcript[start]) is not None else start + 1
        cuts = [c for c in cut_points(transcript, start, end) if c >= floor]
        if not cuts:
            return None
        sizes = [gauge.tokens(message_chars(m)) for m in transcript[start:end]]
        suffix = [0] * (len(sizes) + 1)
        for index in range(len(sizes) - 1, -1, -1):
            suffix[index] = suffix[index + 1] + sizes[index]
        fixed = gauge.tokens(gauge.fixed_chars)
        if suffix[cuts[-1] - start] + fixed > budget.limit:
            return None  # the last exchange alone is over the limit: no summary of the rest makes it fit
        cut = next((c for c in cuts if suffix[c - start] <= budget.keep), cuts[-1])
        room = budget.limit - budget.summary_tokens - fixed - 200
        while suffix[0] - suffix[cut - start] > room:  # the part to summarize must fit in one request
            earlier = [c for c in cuts if c < cut]
            if not earlier:
                return None
            cut = earlier[-1]
        summarized = view_from(transcript[:cut], start) if start == self._marker_index() else transcript[start:cut]
        return Plan(start, cut, tuple(summarized), self._trims(cut), gauge.estimate(view))

    def _marker_index(self) -> int | None:
        return self.start if compaction_of(self.transcript[self.start]) is not None else None

    def _trims(self, cut: int) -> dict[str, str]:
        """Cached tool outputs among the kept messages to show by reference (the last turn's stay whole);
        those an earlier marker trimmed stay trimmed."""
        transcript, trimmed = self.transcript, {}
        if (marker := self._marker_index()) is not None:
            info = compaction_of(transcript[marker])
            assert info is not None
            trimmed = {k: v for k, v in info.trimmed.items() if _answered_in(transcript, cut, k)}
        if self.stub is None or self.settings is None or not self.settings.trim_tool_outputs:
            return trimmed
        last_tool = max((i for i in range(cut, len(transcript)) if transcript[i].role == "tool"), default=None)
        for index in range(cut, len(transcript)):
            if index == last_tool or transcript[index].role != "tool":
                continue
            for result in transcript[index].tool_results:
                if result.call_id not in trimmed and (stub := self.stub(result)) is not None:
                    trimmed[result.call_id] = stub
        return trimmed

    def compacted(self, plan: Plan, summary: str) -> Message:
        """Insert the marker ``plan`` and ``summary`` make into the transcript; the view starts at it now.

        Returns the marker; ``CompactionInfo.tokens_after`` is the estimate of the new view.
        """
        transcript = self.transcript
        kept = len(transcript) - plan.cut
        draft = CompactionInfo(kept, len(plan.summarized), plan.tokens_before, 0, plan.trimmed)
        transcript.insert(plan.cut, compaction_marker(summary, draft))
        self.start = plan.cut
        self._render(len(transcript))
        after = self.gauge.estimate(self.view()) if self.gauge is not None else 0
        marker = compaction_marker(
            summary, CompactionInfo(kept, len(plan.summarized), plan.tokens_before, after, plan.trimmed)
        )
        transcript[plan.cut] = marker  # the rendered view holds the marker's text, not its record: still right
        return marker


def _answered_in(transcript: Sequence[Message], start: int, call_id: str) -> bool:
    return any(r.call_id == call_id for m in transcript[start:] if m.role == "tool" for r in m.tool_results)


_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d[\d,]*)", re.IGNORECASE),
    re.compile(r"tokens? > (\d[\d,]*) maximum", re.IGNORECASE),
    re.compile(r"maximum number of tokens allowed \((\d[\d,]*)\)", re.IGNORECASE),
    re.compile(r"context (?:window|length|size) (?:of|is) (\d[\d,]*)", re.IGNORECASE),
    re.compile(r"n_ctx\D{0,4}(\d+)", re.IGNORECASE),
)


_SENT_PATTERNS = (
    re.compile(r"prompt is too long: (\d[\d,]*) tokens", re.IGNORECASE),
    re.compile(r"(?:messages|input|prompt) resulted in (\d[\d,]*) tokens", re.IGNORECASE),
    re.compile(r"you requested (?:about )?(\d[\d,]*) tokens", re.IGNORECASE),
    re.compile(r"input token count \((\d[\d,]*)\)", re.IGNORECASE),
    re.compile(r"n_prompt_tokens\D{0,4}(\d+)", re.IGNORECASE),
)


def tokens_in_error(detail: str) -> int | None:
    """How many tokens the provider counted in the refused request, when its overflow error says."""
    for pattern in _SENT_PATTERNS:
        if match := pattern.search(detail):
            return int(match.group(1).replace(",", ""))
    return None


def window_in_error(detail: str) -> int | None:
    """The context window a provider's overflow error states, if it states one (OpenAI, Anthropic, Gemini,
    llama.cpp and vLLM wordings)."""
    for pattern in _WINDOW_PATTERNS:
        if match := pattern.search(detail):
            value = int(match.group(1).replace(",", ""))
            if value >= 256:
                return value
    return None
