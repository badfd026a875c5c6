"""Google Vertex AI: Gemini models of a Google Cloud project, signed with Application Default Credentials.

Vertex AI speaks the Gemini API's ``generateContent`` and ``streamGenerateContent?alt=sse`` (the same
request body, the same streamed JSON, the same error object ``{"error": {"code", "message", "status"}}``), so
:class:`VertexProvider` is the Gemini provider (:mod:`tether.providers.gemini`) with another route and
another signature:

* **Where.** ``vertex:gemini-2.5-flash`` goes to
  ``https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse``;
  the location ``global`` (the default) to ``https://aiplatform.googleapis.com/...``, which serves every
  current Gemini model and spreads the load over regions. The project is ``project=``, else
  ``GOOGLE_CLOUD_PROJECT``, else the one the credentials name; the location ``location=``, else
  ``GOOGLE_CLOUD_LOCATION``, else ``global``. ``base_url`` replaces the endpoint's root (a proxy, a test server).
* **How.** An OAuth access token of the Application Default Credentials (``google-auth``, the ``vertex``
  extra, imported on first use: ``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth application-default login``,
  the metadata server) as ``Authorization: Bearer``, refreshed in a worker thread before a request when it
  has expired, and once more when the API answers 401 to it before any event (revoked, or expired early). A
  token is a credential like a key: it is what :meth:`credentials` returns, and is masked in errors. With
  ``api_key=`` (Vertex AI express mode) the key goes as ``x-goog-api-key`` to
  ``https://aiplatform.googleapis.com/v1/publishers/google/models/...``, no project, no token.

Errors are the Gemini API's and read the same way (``http/errors.py``): ``RESOURCE_EXHAUSTED`` (429) is
``rate_limited``, ``UNAVAILABLE`` (503) ``provider_unavailable``, ``PERMISSION_DENIED`` and
``UNAUTHENTICATED`` (403, 401) ``auth_failed``, ``INVALID_ARGUMENT`` (400) ``bad_request``, or
``context_overflow`` when its message says the input is too long. A token endpoint that refuses the
credentials is ``auth_failed`` too; one that cannot be reached, ``transport``.

Thought signatures keep the Gemini provider's origin (``"gemini"``): the same models write and read them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from tether.errors import AuthFailed, ConfigInvalid, TransportError
from tether.events import LlmEvent
from tether.providers.base import Request
from tether.providers.gemini import GeminiProvider
from tether.providers.http.client import Secret

if TYPE_CHECKING:
    from tether.providers.vertex_auth import TokenSource

__all__ = ["LOCATION_VARIABLE", "PROJECT_VARIABLE", "VertexProvider", "from_model_name", "vertex_root"]

PROJECT_VARIABLE = "GOOGLE_CLOUD_PROJECT"
"""The project when ``project`` is not given (the variable Google's own clients read)."""
LOCATION_VARIABLE = "GOOGLE_CLOUD_LOCATION"
"""The location when ``location`` is not given."""
DEFAULT_LOCATION = "global"
EXPRESS_ROOT = "https://aiplatform.googleapis.com/v1/publishers/google"
INSTALL_HINT = "Vertex AI's credentials need google-auth: pip install 'tether[vertex]'"


class VertexProvider(GeminiProvider):
    """A Gemini model on Vertex AI (``{root}/v1/projects/{project}/locations/{location}/publishers/google``)."""

    prefix: ClassVar[str] = "vertex"

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        credentials: Any = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """
        Args:
            model: the model id (``gemini-2.5-flash``).
            project: the Google Cloud project; else ``GOOGLE_CLOUD_PROJECT``, else the credentials' own.
            location: ``global`` or a region (``us-central1``, ``europe-west4``); else ``GOOGLE_CLOUD_LOCATION``,
                else ``global``.
            base_url: the endpoint's root, replacing ``https://{location}-aiplatform.googleapis.com`` (the
                path from ``/v1/projects/...`` on is added to it).
            api_key: a Vertex AI express mode key (``x-goog-api-key``), instead of credentials.
            credentials: google-auth credentials to sign with, instead of the Application Default Credentials.
            environ: where the variables are read (the process environment by default).
            options: as :class:`~tether.providers.gemini.GeminiProvider` takes them (``stream``, ``retry``,
                ``rate_limit``, ``headers``, ``context_window``, ...).
        """
        env = os.environ if environ is None else environ
        self._tokens: TokenSource | None = None
        if api_key:
            if credentials is not None:
                raise ConfigInvalid(f"'vertex:{model}' takes an express mode key or credentials, not both")
            self._express_key: str | None = api_key
            root = (base_url.rstrip("/") + "/v1/publishers/google") if base_url else EXPRESS_ROOT
        else:
            self._express_key = None
            self._tokens, found = _token_source(model, credentials)
            project = project or env.get(PROJECT_VARIABLE) or found
            if not project:
                raise ConfigInvalid(
                    f"'vertex:{model}' needs a Google Cloud project: set {PROJECT_VARIABLE} or pass project=..."
                )
            location = location or env.get(LOCATION_VARIABLE) or DEFAULT_LOCATION
            root = vertex_root(project, location, base_url)
        super().__init__(model, base_url=root, **options)

    def _credential(self, model: str, api_key: str | None) -> tuple[str, str]:
        """The express mode key in ``x-goog-api-key``; with credentials, nothing yet (a token, before the first
        request)."""
        if self._express_key is not None:
            from tether.keys import read_key

            return read_key("vertex", self._express_key) or "", "x-goog-api-key"
        return "", "Authorization"

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """As the Gemini provider's, signed with a valid token (see the module docstring)."""
        if self._tokens is None:
            return super().stream(request)
        return self._signed(request)

    async def _signed(self, request: Request) -> AsyncGenerator[LlmEvent, None]:
        """The answer, with a token refreshed first when it has expired, and the request sent once more with a
        fresh one when the API refuses the token (401) before any event."""
        sent = await self._token()
        for last in (False, True):
            events = GeminiProvider.stream(self, request)
            answered = False
            try:
                async for event in events:
                    answered = True
                    yield event
                return
            except AuthFailed as error:
                if last or answered or error.status != 401:
                    raise
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
            await self._token(refused=sent)

    async def _token(self, refused: str | None = None) -> str:
        """The token to send, refreshed in a worker thread when it must be, and set on the client."""
        tokens = self._tokens
        assert tokens is not None
        token = None if refused is not None else tokens.current()
        if token is None:
            token = await asyncio.to_thread(_refresh, tokens, refused)
        client = self._client
        if client.credentials() != (token,):
            client.renew_key(Secret(token))
        return token

    async def reach(self, timeout: float) -> str:
        """Reach the API and see the credentials accepted, without spending a token: ``countTokens`` of a word
        for this model (Vertex AI lists no publisher models on ``v1``)."""
        if self._tokens is not None:
            await self._token()
        path = f"{self._path}:countTokens"
        body = {"contents": [{"role": "user", "parts": [{"text": "ping"}]}]}
        data = await self._client.post_json(path, body, timeout=timeout, deadline=None)
        counted = data.get("totalTokens") if isinstance(data, dict) else None
        return f"{self._client.base_url}{path} answered" + (f" ({counted} tokens)" if counted is not None else "")


def vertex_root(project: str, location: str, base_url: str | None = None) -> str:
    """The URL a model's path (``/models/{model}:...``) is added to: the location's endpoint (the global one for
    ``global``), or ``base_url`` in its place, then the project's publisher path."""
    if base_url:
        host = base_url.rstrip("/")
    elif location == "global":
        host = "https://aiplatform.googleapis.com"
    else:
        host = f"https://{location}-aiplatform.googleapis.com"
    return f"{host}/v1/projects/{project}/locations/{location}/publishers/google"


def _token_source(model: str, credentials: Any) -> tuple[TokenSource, str | None]:
    """The tokens of ``credentials``, or of the Application Default Credentials, and the project those name."""
    try:
        from tether.providers.vertex_auth import DefaultCredentialsError, TokenSource, default_credentials
    except ImportError:
        raise ConfigInvalid(f"'vertex:{model}': {INSTALL_HINT}") from None
    if credentials is not None:
        return TokenSource(credentials), getattr(credentials, "project_id", None)
    try:
        found, project = default_credentials()
    except DefaultCredentialsError as error:
        raise ConfigInvalid(
            f"'vertex:{model}' found no Application Default Credentials: run `gcloud auth application-default "
            f"login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file ({error})"
        ) from None
    return TokenSource(found), project


def _refresh(tokens: TokenSource, refused: str | None) -> str:
    """A fresh token (in a worker thread); google-auth's failures as tether's errors."""
    from tether.providers.vertex_auth import AuthTransportError, RefreshError

    try:
        return tokens.refreshed(refused)
    except RefreshError as error:
        raise AuthFailed(f"vertex could not get an access token: {error}", provider_message=str(error)) from None
    except AuthTransportError as error:
        raise TransportError(f"vertex could not reach the token endpoint: {error}") from None


def from_model_name(prefix: str, name: str, **options: Any) -> VertexProvider:
    """The builder behind ``vertex:MODEL`` model strings."""
    return VertexProvider(name, **{key: value for key, value in options.items() if value is not None})
