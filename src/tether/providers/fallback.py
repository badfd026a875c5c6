"""FallbackProvider: models tried in order, the next one asked when one fails for a passing reason.

A hosted model that is down, overloaded or rate-limited would end a run; with a fallback the same request goes
to the next model instead. Which failures move on is a set of stable error codes (``on``): by default the ones
that say nothing about the request itself (``rate_limited``, ``provider_unavailable``, ``timeout``,
``transport``); ``auth_failed`` only when asked, since moving on from a refused key silently bills another
account. A bad request, a context overflow or a malformed answer would fail the same way on the next model,
and surface.

A model moves on only before the first event of an answer has left this provider: its ``StreamStart`` is held
until an answer's event follows it, and its ``ProviderRetry`` events (which are not an answer) pass through.
Once an answer's event has been handed on, a failure surfaces as it is: two attempts are never joined into one
message. Each provider's own retries happen first, inside it.

``Request.on_fallback`` is told of each move (the error, the model asked next) before the next model is asked:
the loop makes each attempt a record and a span of its own. The transcript needs nothing: a provider replays
only the reasoning signatures of its own origin (``base.py``), so a history one family wrote is continued by
another. ``Agent([...])`` with a list of models builds one (:func:`resolve_models`); a single model is never
wrapped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from tether.errors import ConfigInvalid, ProviderError
from tether.events import LlmEvent, ProviderRetry, StreamStart
from tether.providers.base import ModelInfo, Provider, Request, ServedProvider, Server
from tether.providers.registry import resolve

__all__ = ["FALLBACK_CODES", "FALLBACK_ON", "FallbackProvider", "resolve_models"]

FALLBACK_ON = frozenset({"rate_limited", "provider_unavailable", "timeout", "transport"})
"""The codes that move on by default: failures of the service, not of the request."""
FALLBACK_CODES = FALLBACK_ON | {"auth_failed"}
"""Every code ``on`` may hold."""


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
        ``on``, or is the last."""
        last = len(self.providers) - 1
        for index, provider in enumerate(self.providers):
            held: StreamStart | None = None
            answering = False
            events = provider.stream(request)
            try:
                async for event in events:
                    if not answering:
                        if type(event) is StreamStart:
                            held = event
                            continue
                        if type(event) is not ProviderRetry:
                            answering = True
                            if held is not None:
                                yield held
                    yield event
                return
            except ProviderError as error:
                if answering or index == last or error.code not in self.on:
                    raise
                if request.on_fallback is not None:
                    request.on_fallback(error, provider.info, self.providers[index + 1].info)
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()


def resolve_models(model: str | Provider | Sequence[str | Provider], **options: Any) -> Provider:
    """What ``Agent`` is given, as a provider: a model string or a provider as ``registry.resolve`` makes it; a
    list of two or more, a :class:`FallbackProvider` over them; a list of one, that one's provider."""
    if isinstance(model, str) or not isinstance(model, Sequence):
        return resolve(model, **options)
    if len(model) == 1:
        return resolve(model[0], **options)
    return FallbackProvider(model, **options)
