"""FallbackProvider: models tried in order, the next one asked when one fails for a passing reason.

A hosted model that is down, overloaded or rate-limited would end a run; with a fallback the same request goes
to the next model instead. Which failures move on is a set of stable error codes (``on``): by default the ones
that say nothing about the request itself (``rate_limited``, ``provider_unavailable``, ``timeout``,
``transport``); ``auth_failed`` only when asked, since moving on from a refused key silently bills another
account. A bad request, a context overflow or a malformed answer would fail the same way on the next model,
and surface.

A model moves on only before the first event of an answer has left this provider: its ``StreamStart`` (and any
empty ``TextDelta``) is held until an answer's event follows it, and its ``ProviderRetry`` and ``RateLimitWait``
events (which are not an answer) pass through. Once an answer's event has been handed on, a failure surfaces as
it is: two attempts are never joined into one message. Each provider's own retries happen first, inside it.

Two more reasons, opt-in, are not failures of the call but of its answer, and are known only at its end, so they
apply only to an answer of which nothing has been handed on, that is one whose ``StreamEnd`` comes before any
text, thinking or tool call: ``content_filter`` (that end's finish reason is ``content_filter``) and
``empty_answer`` (it holds nothing, whatever its finish other than ``error``). A filtered answer that wrote some
text first reaches the host as it is (the text was shown as it came); holding every answer to its end would cost
every run its streaming. The last model's answer is never moved on from.

``Request.on_fallback`` is told of each move (the error, the model asked next) before the next model is asked:
the loop makes each attempt a record and a span of its own. Then a ``FallbackTaken`` event says so in the
stream, after the failed attempt's retries and before the next one's. The transcript needs nothing: a provider replays
only the reasoning signatures of its own origin (``base.py``), so a history one family wrote is continued by
another. ``Agent([...])`` with a list of models builds one (:func:`resolve_models`); a single model is never
wrapped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, ClassVar

from tether.errors import ConfigInvalid, ErrorCode, ProviderError
from tether.events import FallbackTaken, LlmEvent, ProviderRetry, RateLimitWait, StreamEnd, StreamStart, TextDelta
from tether.providers.base import ModelInfo, Provider, Request, ServedProvider, Server
from tether.providers.registry import resolve
from tether.usage import NO_USAGE, Usage

__all__ = [
    "FALLBACK_CODES",
    "FALLBACK_ON",
    "ContentFiltered",
    "EmptyAnswer",
    "FallbackProvider",
    "Refused",
    "resolve_models",
]

FALLBACK_ON = frozenset({"rate_limited", "provider_unavailable", "timeout", "transport"})
"""The codes that move on by default: failures of the service, not of the request."""
FALLBACK_CODES = FALLBACK_ON | {"auth_failed", "content_filter", "empty_answer"}
"""Every code ``on`` may hold: the defaults, ``auth_failed``, and two that are not failures of the call but of
its answer, ``content_filter`` and ``empty_answer`` (see the module docstring for when they apply)."""


class FallbackProvider:
    """Models tried in order (see the module docstring): ``FallbackProvider(["anthropic:...", "openai:..."])``.

    ``info`` is the first model's: a run is set up (its tools, its inputs, its price) for the model it asks
    first, and each record names the model that answered.
    """

    __slots__ = ("on", "providers")

    def __init__(self, models: Sequence[str | Provider], *, on: Iterable[str] = FALLBACK_ON, **options: Any) -> None:
        """``models``: model strings or providers, two or more (``options`` go to each string's builder, as in
        ``resolve``); ``on``: the error codes that move on, of :data:`FALLBACK_CODES`."""
        if isinstance(models, str) or len(models) < 2:
            raise ConfigInvalid("a fallback needs a list of two models or more")
        codes = frozenset(on)
        if unknown := codes - FALLBACK_CODES:
            known = ", ".join(sorted(FALLBACK_CODES))
            raise ConfigInvalid(f"a fallback cannot move on for {', '.join(sorted(unknown))}; it can for: {known}")
        self.providers: tuple[Provider, ...] = tuple(resolve(model, **options) for model in models)
        self.on = codes

    @property
    def info(self) -> ModelInfo:
        return self.providers[0].info

    def credentials(self) -> tuple[str, ...]:
        """Every model's secrets: a run masks the keys of all of them."""
        return tuple(
            secret
            for provider in self.providers
            if isinstance(provider, ServedProvider)
            for secret in provider.credentials()
        )

    @property
    def server(self) -> Server:
        """The first model's server."""
        first = self.providers[0]
        return first.server if isinstance(first, ServedProvider) else (None, None)

    async def reach(self, timeout: float) -> str:
        """Each model's API reached in turn (``Agent.health()``), what each said joined; one that cannot be
        reached fails the check, as a single model would."""
        said = []
        for provider in self.providers:
            reach = getattr(provider, "reach", None)
            name = provider.info.model_string
            said.append(f"{name}: {await reach(timeout)}" if reach is not None else f"{name}: nothing to reach")
        return "; ".join(said)

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """Each model in turn until one answers, or fails after its answer began, or fails for a code not in
        ``on``, or is the last; a ``FallbackTaken`` between two of them."""
        last = len(self.providers) - 1
        for index, provider in enumerate(self.providers):
            held: list[LlmEvent] = []
            answering = False
            moved: ProviderError | None = None
            events = provider.stream(request)
            try:
                async for event in events:
                    if not answering:
                        if type(event) is ProviderRetry or type(event) is RateLimitWait:
                            yield event  # not an answer: the attempt's own waits, shown as they come
                            continue
                        if type(event) is StreamStart or (type(event) is TextDelta and not event.text):
                            held.append(event)
                            continue
                        if type(event) is StreamEnd and index < last:
                            moved = self._refused(event)
                            if moved is not None:
                                break
                        answering = True
                        for kept in held:
                            yield kept
                    yield event
                else:
                    return
            except ProviderError as error:
                if answering or index == last or error.code not in self.on:
                    raise
                moved = error
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
            assert moved is not None  # only a break for a refused answer, or a failure, comes here
            following = self.providers[index + 1].info
            if request.on_fallback is not None:
                request.on_fallback(moved, provider.info, following)  # the loop masks its message in place
            yield FallbackTaken(
                provider.info.model_string, moved.code, moved.message, following.model_string, index + 2
            )

    def _refused(self, end: StreamEnd) -> ProviderError | None:
        """The answer ended before any of it was handed on: moved on from when its end is a content filter's
        (``content_filter`` in ``on``) or it held nothing at all (``empty_answer``)."""
        if end.finish_reason == "content_filter" and "content_filter" in self.on:
            return ContentFiltered("the answer was stopped by the provider's content filter", usage=end.usage)
        if end.finish_reason != "error" and "empty_answer" in self.on:
            return EmptyAnswer("the answer was empty: no text and no tool call", usage=end.usage)
        return None


class Refused(ProviderError):
    """An answer a fallback moves on from although its call succeeded: never raised, handed to
    ``Request.on_fallback`` and made a ``FallbackTaken``. ``usage``: what the answer spent."""

    def __init__(self, message: str, *, usage: Usage = NO_USAGE) -> None:
        super().__init__(message)
        self.usage = usage


class ContentFiltered(Refused):
    """An answer of nothing but a content filter's stop (``FallbackProvider(on={"content_filter"})``)."""

    code: ClassVar[ErrorCode] = "content_filter"


class EmptyAnswer(Refused):
    """An answer of nothing: no text, no thinking, no tool call (``on={"empty_answer"}``)."""

    code: ClassVar[ErrorCode] = "empty_answer"


def resolve_models(model: str | Provider | Sequence[str | Provider], **options: Any) -> Provider:
    """What ``Agent`` is given, as a provider: a model string or a provider as ``registry.resolve`` makes it; a
    list of two or more, a :class:`FallbackProvider` over them; a list of one, that one's provider."""
    if isinstance(model, str) or not isinstance(model, Sequence):
        return resolve(model, **options)
    if len(model) == 1:
        return resolve(model[0], **options)
    return FallbackProvider(model, **options)
