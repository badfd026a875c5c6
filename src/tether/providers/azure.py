"""Azure OpenAI: OpenAI's Chat Completions on a model deployment of an Azure resource.

Azure speaks OpenAI's request and answer (the Chat Completions provider encodes and decodes them); what
differs is where a request goes and how it is signed:

* **Where.** A model string names a deployment (``azure:my-gpt-4o``), not a model. Given an ``api_version``
  (or ``OPENAI_API_VERSION`` in the environment) a request goes to the dated route,
  ``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version={version}``; without one (or with
  ``"v1"``) to the versionless v1 route, ``{endpoint}/openai/v1/chat/completions``, with the deployment as
  the body's ``model``. The endpoint is the resource's (``https://{resource}.openai.azure.com``): ``base_url``
  or ``AZURE_OPENAI_ENDPOINT``.
* **How.** A key goes in the ``api-key`` header (``api_key`` or ``AZURE_OPENAI_API_KEY``); a Microsoft Entra
  ID token goes as ``Authorization: Bearer`` (``entra_token``: the token, or a function returning a fresh
  one, called before every request, for tokens that expire; or ``AZURE_OPENAI_AD_TOKEN``). Either is
  masked in errors and logs like any key.

Errors are OpenAI's shape; a prompt Azure's content filter refuses is HTTP 400 with the code
``content_filter`` (``bad_request``, ``details["provider_code"] == "content_filter"``, never retried), and an
answer it cuts ends with the finish reason ``content_filter``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any

from tether.errors import ConfigInvalid
from tether.events import LlmEvent
from tether.keys import read_key
from tether.providers.base import Request
from tether.providers.http.client import Secret
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_chat_stream import ChatDecoder
from tether.providers.registry import PROFILES

__all__ = ["ENDPOINT_VARIABLE", "TOKEN_VARIABLE", "VERSION_VARIABLE", "AzureOpenAIProvider", "from_model_name"]

ENDPOINT_VARIABLE = "AZURE_OPENAI_ENDPOINT"
"""The resource's endpoint when ``base_url`` is not given."""
VERSION_VARIABLE = "OPENAI_API_VERSION"
"""The ``api-version`` when ``api_version`` is not given (the name OpenAI's own Azure client reads)."""
TOKEN_VARIABLE = "AZURE_OPENAI_AD_TOKEN"
"""A Microsoft Entra ID token, used when there is no key."""
KEY_HEADER = "api-key"

TokenSource = str | Callable[[], str]
"""An Entra ID token, or a function that returns a valid one (called before every request)."""


class AzureOpenAIProvider(OpenAIChatProvider):
    """A deployment of an Azure OpenAI resource, over Chat Completions."""

    def __init__(
        self,
        deployment: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        entra_token: TokenSource | None = None,
        api_version: str | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """
        Args:
            deployment: the deployment's name (what the Azure portal calls it, not the model's).
            base_url: the resource's endpoint, ``https://{resource}.openai.azure.com``; else
                ``AZURE_OPENAI_ENDPOINT``.
            api_key: the resource's key, sent as ``api-key``; else ``AZURE_OPENAI_API_KEY``.
            entra_token: a Microsoft Entra ID token, or a function returning one, sent as a Bearer token
                (instead of a key); else ``AZURE_OPENAI_AD_TOKEN`` when no key is found.
            api_version: a dated ``api-version`` (``2024-10-21``) for the deployments route; else
                ``OPENAI_API_VERSION``; neither, or ``"v1"``: the v1 route.
            environ: where the variables are read (the process environment by default).
            options: as :class:`~tether.providers.openai_chat.OpenAIChatProvider` takes them (``stream``,
                ``retry``, ``headers``, ...).
        """
        env = os.environ if environ is None else environ
        endpoint = (base_url or env.get(ENDPOINT_VARIABLE) or "").rstrip("/")
        if not endpoint:
            raise ConfigInvalid(
                f"'azure:{deployment}' needs the resource's endpoint: set {ENDPOINT_VARIABLE} or pass "
                "base_url='https://RESOURCE.openai.azure.com'"
            )
        version = api_version or env.get(VERSION_VARIABLE) or "v1"
        key = api_key or (read_key("azure") if environ is None else env.get("AZURE_OPENAI_API_KEY"))
        token: TokenSource | None = entra_token if entra_token is not None else env.get(TOKEN_VARIABLE) or None
        if key and entra_token is not None:
            raise ConfigInvalid(f"'azure:{deployment}' takes a key or an Entra ID token, not both")
        if not key and token is None:
            raise ConfigInvalid(
                f"'azure:{deployment}' needs a key or a token: set AZURE_OPENAI_API_KEY (or {TOKEN_VARIABLE}), "
                "or pass api_key= (or entra_token=)"
            )
        root, self.path = azure_route(endpoint, deployment, version)
        # the key is not the Chat Completions provider's to read: it would send it as a Bearer token
        profile = replace(PROFILES["azure"], requires_key=False)
        super().__init__(deployment, profile=profile, base_url=root, api_key=None, **options)
        self._token = token if callable(token) else None
        if key:
            self._client.renew_key(Secret(key), auth_header=KEY_HEADER, auth_prefix="")
        else:
            self._client.renew_key(Secret(token() if callable(token) else str(token)))

    def __repr__(self) -> str:
        return f"AzureOpenAIProvider({self.info.name!r}, base_url={self._client.base_url!r})"

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """As the Chat Completions provider's, to this deployment's route; a token function is asked for a
        token first, so that each request carries a valid one."""
        if self._token is not None:
            self._client.renew_key(Secret(self._token()))
        body, decoder = self.request_payload(request), ChatDecoder(self.profile)
        return self._client.answer(self.path, body, decoder, request, streaming=self.streaming, end_marker="[DONE]")


def azure_route(endpoint: str, deployment: str, version: str) -> tuple[str, str]:
    """The base URL and the path (with its query) of a deployment's Chat Completions: the v1 route for
    ``"v1"``, the deployments route with ``api-version`` for a dated version. An endpoint given with its
    ``/openai/v1`` (or ``/openai``) already is not extended twice."""
    for suffix in ("/openai/v1", "/openai"):
        endpoint = endpoint.removesuffix(suffix)
    if version == "v1":
        return f"{endpoint}/openai/v1", "/chat/completions"
    return f"{endpoint}/openai/deployments/{deployment}", f"/chat/completions?api-version={version}"


def from_model_name(prefix: str, name: str, **options: Any) -> AzureOpenAIProvider:
    """The builder behind ``azure:DEPLOYMENT`` model strings."""
    return AzureOpenAIProvider(name, **{k: v for k, v in options.items() if v is not None})
