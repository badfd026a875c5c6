"""From a configuration to what ``Agent`` takes: the provider for ``runtime.model`` and the limits.

``runtime.retries`` becomes the provider's ``RetryPolicy(max_retries=...)`` (providers that run in this
process, ``scripted:`` and ``local:``, make no requests to retry); ``[providers.NAME] rpm`` and ``tpm`` its
``RateLimit`` (refused for those two).

``[providers.NAME]`` adjusts a built-in provider (``[providers.ollama] base_url = ...``) or adds one under a
new name that speaks a compatibility profile (``[providers.gpu] profile = "vllm"`` makes ``gpu:qwen3`` a
vLLM model at that table's ``base_url``). The key is read here, from the variable ``api_key_env`` names, or
comes from the reference ``api_key`` holds (``cmd:pass show openai``), resolved when the provider is built
(:mod:`tether.secret_refs`); it is never stored in the configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether.config.load import builtin_prefixes
from tether.config.schema import Config
from tether.errors import ConfigInvalid
from tether.providers.registry import PROFILES, over_http, resolve

if TYPE_CHECKING:
    from tether.providers.base import Provider
    from tether.providers.http.client import Secret
    from tether.providers.http.ratelimit import RateLimit

NEED_KEY = frozenset({"anthropic", "gemini", "openai-responses"})
"""Built-in providers outside ``PROFILES`` that refuse to start without a key."""


@dataclass(frozen=True, slots=True)
class ModelTarget:
    """The model string the registry knows and the options for its builder."""

    model: str
    """A built-in ``provider:model`` string (a provider of your own naming is replaced by its profile)."""
    base_url: str | None = None
    api_key: Secret | None = None
    headers: dict[str, str] = field(default_factory=dict)
    retries: int | None = None
    """Retries of a failed request (``runtime.retries``); ``None``: the provider's default."""
    name: str | None = None
    """A ``[providers.NAME]``'s NAME, the provider's name where a run is shown; ``None``: the prefix's."""
    api_version: str | None = None
    """Azure OpenAI's ``api-version`` (``[providers.NAME] api_version``); given to Azure's builder only."""
    prompt_cache: str | None = None
    """``[providers.anthropic] prompt_cache``; ``None``: the provider's default."""
    rate_limit: RateLimit | None = None
    """``[providers.NAME] rpm`` and ``tpm``; ``None``: no client-side limit."""

    def provider(self) -> Provider:
        """Build the provider (``tether.providers.registry.resolve``)."""
        retry = None
        if self.retries is not None and over_http(self.model.partition(":")[0]):
            from tether.providers.http.retry import RetryPolicy

            retry = RetryPolicy(max_retries=self.retries)
        limited = {"rate_limit": self.rate_limit} if self.rate_limit is not None else {}
        return resolve(
            self.model,
            base_url=self.base_url,
            api_key=self.api_key.reveal() if self.api_key else None,
            headers=dict(self.headers) or None,
            retry=retry,
            provider_name=self.name,
            **({"api_version": self.api_version} if self.api_version else {}),
            prompt_cache=self.prompt_cache,
            **limited,
        )


def model_target(config: Config, env: Mapping[str, str] | None = None) -> ModelTarget:
    """What ``runtime.model`` means under ``config``; the key is read from ``env`` (``os.environ``)."""
    env = os.environ if env is None else env
    model = config.runtime.model
    if model is None:
        raise ConfigInvalid("no model is configured: set runtime.model in agent.toml, or TETHER_MODEL")
    if isinstance(model, list):  # a fallback's models are built one by one (build_provider)
        model = model[0]
    prefix, _, name = model.partition(":")
    settings = config.providers.get(prefix)
    retries = config.runtime.retries
    if settings is None:
        return ModelTarget(model, retries=retries)
    profile = prefix if prefix in builtin_prefixes() else (settings.profile or "openai-compatible")
    api_key: Secret | None = None
    if settings.api_key is not None:  # a reference, resolved when the provider is built (keys.read_key)
        from tether.providers.http.client import Secret

        api_key = Secret(settings.api_key)
    elif settings.api_key_env is not None:
        value = env.get(settings.api_key_env)
        needs_key = profile in NEED_KEY or (profile in PROFILES and PROFILES[profile].requires_key)
        if value:
            from tether.providers.http.client import Secret  # aiohttp: only when a provider is built

            api_key = Secret(value)
        elif needs_key:
            raise ConfigInvalid(
                f"providers.{prefix}.api_key_env names {settings.api_key_env}, which is not set: "
                f"{model!r} needs an API key"
            )
    shown = None if prefix == profile else prefix
    rate_limit = None
    if settings.rpm is not None or settings.tpm is not None:
        if not over_http(profile):
            raise ConfigInvalid(f"providers.{prefix}: rpm and tpm limit requests over HTTP; {model!r} makes none")
        from tether.providers.http.ratelimit import RateLimit

        rate_limit = RateLimit(rpm=settings.rpm, tpm=settings.tpm)
    return ModelTarget(
        f"{profile}:{name}",
        settings.base_url,
        api_key,
        dict(settings.headers),
        retries,
        shown,
        api_version=settings.api_version,
        prompt_cache=settings.prompt_cache,
        rate_limit=rate_limit,
    )


def build_provider(config: Config, env: Mapping[str, str] | None = None) -> Provider:
    """The provider for ``runtime.model``, for ``Agent(build_provider(config), limits=...)``: for a list of
    models, a ``FallbackProvider`` over each one's provider (each with its own ``[providers.NAME]``)."""
    models = config.runtime.model
    if not isinstance(models, list) or len(models) == 1:
        return model_target(config, env).provider()
    from tether.providers.fallback import FallbackProvider

    def one(model: str) -> Config:
        return config.model_copy(update={"runtime": config.runtime.model_copy(update={"model": model})})

    return FallbackProvider([model_target(one(model), env).provider() for model in models])
