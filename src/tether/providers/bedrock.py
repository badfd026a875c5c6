"""AWS Bedrock's Converse API (``/model/{modelId}/converse-stream`` and ``/converse``), over tether's HTTP client.

A model string names a Bedrock model id or inference profile: ``bedrock:anthropic.claude-3-5-haiku-20241022-v1:0``,
``bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0``, ``bedrock:amazon.nova-pro-v1:0``. The region is
``region``, else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else the AWS profile's; requests go to
``https://bedrock-runtime.{region}.amazonaws.com`` (``base_url`` overrides it: a VPC endpoint, or a test server).
The model id is URI-encoded in the path (``...-v1%3A0``), as Bedrock's API requires.

Credentials, first found wins:

* a Bedrock API key (``api_key``, else ``AWS_BEARER_TOKEN_BEDROCK``), sent as ``Authorization: Bearer``; no
  botocore needed;
* AWS credentials, each request signed with SigV4 by botocore (``bedrock_auth.py``, the ``bedrock`` extra):
  ``access_key`` / ``secret_key`` / ``session_token`` given, else botocore's chain (environment variables,
  ``profile`` or ``AWS_PROFILE``, SSO, container and instance roles...). The secret key and session token are
  masked in a run's output like any API key.

The request body is built by ``bedrock_wire.py``, the answer read by ``bedrock_stream.py`` from AWS event-stream
frames (``providers/http/eventstream.py``). HTTP errors are mapped as every provider's are (``http/errors.py``):
403 (``AccessDeniedException``, ``UnrecognizedClientException``) -> ``auth_failed``, 429
(``ThrottlingException``) -> ``rate_limited``, 400 (``ValidationException``) -> ``bad_request``, or
``context_overflow`` when its message says the input is too long, 500/503 -> ``provider_unavailable``.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec

from tether.errors import ConfigInvalid
from tether.events import LlmEvent
from tether.keys import read_key
from tether.providers.base import TOOL_CHOICES, ForceTool, ModelInfo, Request
from tether.providers.bedrock_auth import load_credentials, profile_region, region_from, signer_for
from tether.providers.bedrock_stream import PROVIDER, BedrockDecoder
from tether.providers.bedrock_wire import encode_body
from tether.providers.http.body import ResponseLimits
from tether.providers.http.client import HttpClient, OverHttp, Secret
from tether.providers.http.ratelimit import RateLimit, limiter_of
from tether.providers.http.retry import RetryPolicy
from tether.providers.windows import checked_window, context_window_for

__all__ = ["TOKEN_VARIABLE", "BedrockProvider", "bare_model", "from_model_name", "model_path"]

TOKEN_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"
"""A Bedrock API key, used before AWS credentials when set."""
REGION_PREFIXES = ("us.", "eu.", "apac.", "global.", "jp.", "au.", "ca.", "us-gov.")
"""Cross-region inference profiles: a prefix before the model id, the same model served from several regions."""
FORCING_VENDORS = ("anthropic.", "mistral.", "amazon.nova")
"""Model families whose Converse ``toolChoice`` may be ``any`` or a named tool (the others take ``auto`` only)."""
THINKING_MODELS = ("anthropic.claude-3-7", "anthropic.claude-sonnet-4", "anthropic.claude-opus-4", "deepseek.r1")


class BedrockProvider(OverHttp):
    """A model on AWS Bedrock, through the Converse API."""

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        session_token: str | None = None,
        profile: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        rate_limit: RateLimit | None = None,
        response_limits: ResponseLimits | None = None,
        headers: dict[str, str] | None = None,
        context_window: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """
        Args:
            model: the model id or inference profile (``anthropic.claude-3-5-haiku-20241022-v1:0``).
            region: the AWS region; else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else (with AWS credentials)
                the profile's ``region`` in ``~/.aws/config``.
            base_url: the runtime endpoint; ``https://bedrock-runtime.{region}.amazonaws.com``.
            api_key: a Bedrock API key (Bearer); else ``AWS_BEARER_TOKEN_BEDROCK``; else SigV4 signing.
            access_key, secret_key, session_token: AWS credentials; else botocore's credential chain.
            profile: the AWS profile botocore reads the credentials of (else ``AWS_PROFILE``).
            stream: stream answers (ConverseStream, the default), or ask for whole ones (Converse).
            retry: how failed requests are retried.
            rate_limit: requests and tokens per window, shared by every run of this process on the same model.
            response_limits: the most of an answer read; the defaults when not given.
            headers: extra headers sent (and signed) with every request.
            context_window: the model's input limit in tokens; the known one (Claude's) by default.
            environ: where the variables are read (the process environment by default).
        """
        env = os.environ if environ is None else environ
        region = region_from(region, env)
        if not region and environ is None and not (api_key or env.get(TOKEN_VARIABLE)):
            region = profile_region(profile)  # AWS credentials: the profile's region, as the AWS CLI reads it
        if not region and not base_url:
            raise ConfigInvalid(f"'bedrock:{model}' needs a region: set AWS_REGION, or pass region='us-east-1'")
        root = (base_url or f"https://bedrock-runtime.{region}.amazonaws.com").rstrip("/")
        if access_key or secret_key:
            token = read_key("bedrock", api_key) if api_key else None
        else:
            token = read_key("bedrock", api_key) if environ is None else api_key or env.get(TOKEN_VARIABLE) or None
        self._credentials: Any = None
        signer = None
        if token is None:
            self._credentials = load_credentials(
                access_key=access_key, secret_key=secret_key, session_token=session_token, profile=profile
            )
            signer = signer_for(self._credentials, region or _region_of(root))
        self.streaming = stream
        vendor_model = bare_model(model)
        self.info = ModelInfo(
            PROVIDER,
            model,
            supports_thinking=vendor_model.startswith(THINKING_MODELS),
            supports_output_schema=True,
            input_kinds=frozenset({"text", "image", "document"}),
            context_window=checked_window(context_window, f"'bedrock:{model}'") or _window(vendor_model),
            tool_choices=TOOL_CHOICES if vendor_model.startswith(FORCING_VENDORS) else frozenset({"auto", "none"}),
        )
        self._paths = {streaming: model_path(model, streaming=streaming) for streaming in (True, False)}
        self._client = HttpClient(
            root,
            provider=PROVIDER,
            api_key=Secret(token) if token is not None else None,
            headers=headers,
            retry=retry,
            limits=response_limits,
            limiter=limiter_of(rate_limit, root, token or _access_key(self._credentials), model),
            signer=signer,
        )

    def __repr__(self) -> str:
        return f"BedrockProvider({self.info.model_string!r}, base_url={self._client.base_url!r})"

    def credentials(self) -> tuple[str, ...]:
        """The secrets of this provider: the API key, or the AWS secret key and session token (never sent, but
        masked all the same)."""
        if self._credentials is None:
            return self._client.credentials()
        frozen = self._credentials.get_frozen_credentials()
        return tuple(secret for secret in (frozen.secret_key, frozen.token) if secret)

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """The events of ``request``'s answer, streamed (ConverseStream) or read whole (Converse)."""
        streaming = self.streaming
        body = msgspec.json.encode(self.request_body(request))
        return self._client.answer(self._paths[streaming], body, BedrockDecoder(), request, streaming=streaming)

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``, as plain data (``bedrock_wire.py``); ``ConfigInvalid`` for a tool choice
        the model cannot honour (Converse takes ``any`` and a named tool for Claude, Mistral and Nova only)."""
        choice = request.tool_choice
        named = "tool" if isinstance(choice, ForceTool) else choice
        if request.tools and named not in self.info.tool_choices:
            raise ConfigInvalid(
                f"'bedrock:{self.info.name}' takes tool_choice {' or '.join(sorted(self.info.tool_choices))} "
                f"only, not {named!r}"
            )
        return encode_body(request)

    async def reach(self, timeout: float) -> str:
        """Bedrock's runtime lists no models: what is checked is that credentials were found (a request spends
        tokens, so none is made)."""
        how = "a Bedrock API key" if self._credentials is None else "AWS credentials (SigV4)"
        return f"{self._client.base_url}: {how} found; not checked without a request"


def model_path(model: str, *, streaming: bool) -> str:
    """``/model/{modelId}/converse-stream`` (or ``/converse``), the id URI-encoded (``:`` -> ``%3A``, ``/`` of
    an ARN -> ``%2F``)."""
    return f"/model/{urllib.parse.quote(model, safe='')}/{'converse-stream' if streaming else 'converse'}"


def bare_model(model: str) -> str:
    """The model id without its cross-region prefix (``us.anthropic.claude-...`` -> ``anthropic.claude-...``)."""
    for prefix in REGION_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


def _window(vendor_model: str) -> int | None:
    """A Claude model's window, from Anthropic's table (``anthropic.claude-sonnet-4-20250514-v1:0``)."""
    if not vendor_model.startswith("anthropic."):
        return None
    name = vendor_model.removeprefix("anthropic.").partition(":")[0]
    return context_window_for("anthropic", name.removesuffix("-v1").removesuffix("-v2"))


def _region_of(url: str) -> str:
    """The region in a ``bedrock-runtime.{region}.amazonaws.com`` URL; ``us-east-1`` for another host."""
    host = urllib.parse.urlsplit(url).hostname or ""
    parts = host.split(".")
    return parts[1] if len(parts) > 2 and parts[0].startswith("bedrock-runtime") else "us-east-1"


def _access_key(credentials: Any) -> str:
    return str(credentials.access_key) if credentials is not None else ""


def from_model_name(prefix: str, name: str, **options: Any) -> BedrockProvider:
    """The builder behind ``bedrock:MODEL_ID`` model strings (``None`` = not given)."""
    return BedrockProvider(name, **{key: value for key, value in options.items() if value is not None})
