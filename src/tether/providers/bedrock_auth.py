"""Bedrock's credentials and its requests' signatures: AWS Signature Version 4, computed by botocore.

botocore (the ``bedrock`` extra, ``pip install 'tether[bedrock]'``) is imported here, on first use, never at
``import tether``. It finds the credentials as every AWS SDK does (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, a profile of ``~/.aws/credentials`` or ``~/.aws/config``
named by ``AWS_PROFILE``, SSO, a web identity, the container or instance role, ...), refreshes those that
expire, and signs with its own ``SigV4Auth``: the signature is the one every AWS SDK sends.

:func:`sign` is the one signing function: the provider calls it for each attempt (a retry is signed anew, with
a fresh date), and the tests check it against the published SigV4 test suite. Bedrock's path carries the model
id URI-encoded (``anthropic.claude-3-5-haiku-20241022-v1%3A0``); the canonical request encodes that path once
more (``%253A``), as SigV4 does for every service but S3, and the request is sent with its path exactly as
signed (``yarl.URL(..., encoded=True)``: aiohttp would otherwise decode the ``%3A``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

from tether.errors import AuthFailed, ConfigInvalid

__all__ = [
    "INSTALL_HINT",
    "SERVICE",
    "Credentials",
    "load_credentials",
    "profile_region",
    "region_from",
    "sign",
    "signer_for",
]

SERVICE = "bedrock"
"""The service name Bedrock's runtime signs with (its endpoints are ``bedrock-runtime.{region}...``)."""
INSTALL_HINT = "'bedrock:' models need botocore, to sign their requests: pip install 'tether[bedrock]'"
TIMESTAMP = "%Y%m%dT%H%M%SZ"

Credentials = Any
"""botocore's ``Credentials`` (or ``RefreshableCredentials``): ``access_key``, ``secret_key``, ``token``."""


def _botocore() -> Any:
    """botocore's modules, imported on first use; ``ConfigInvalid`` naming the extra when it is missing."""
    try:
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        import botocore.session
    except ImportError:
        raise ConfigInvalid(INSTALL_HINT) from None
    return botocore


def load_credentials(
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    session_token: str | None = None,
    profile: str | None = None,
) -> Credentials:
    """The credentials given, or those botocore's chain finds (for ``profile`` when given); ``ConfigInvalid``
    when there are none."""
    botocore = _botocore()
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise ConfigInvalid("a Bedrock access key needs its secret key, and a secret key its access key")
        return botocore.credentials.Credentials(access_key, secret_key, session_token)
    try:
        session = botocore.session.Session(profile=profile)
        credentials = session.get_credentials()
    except Exception as exc:  # noqa: BLE001 - botocore's own errors (a profile not found, a bad config file)
        raise ConfigInvalid(f"Bedrock's AWS credentials could not be read: {exc}") from None
    if credentials is None:
        raise ConfigInvalid(
            "'bedrock:' models need AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a "
            "profile with AWS_PROFILE, or set AWS_BEARER_TOKEN_BEDROCK (a Bedrock API key)"
        )
    return credentials


def sign(
    credentials: Credentials,
    region: str,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    service: str = SERVICE,
    now: datetime.datetime | None = None,
) -> dict[str, str]:
    """``headers`` with the SigV4 headers added (``X-Amz-Date``, ``Authorization``, and
    ``X-Amz-Security-Token`` for temporary credentials), for this request signed at ``now`` (the current time
    by default) in ``region`` for ``service``. ``url`` is signed as it is sent: its path already URI-encoded."""
    botocore = _botocore()
    request = botocore.awsrequest.AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    when = (now or datetime.datetime.now(datetime.UTC)).strftime(TIMESTAMP)
    frozen = credentials.get_frozen_credentials() if hasattr(credentials, "get_frozen_credentials") else credentials
    _signer(botocore)(frozen, service, region, when).add_auth(request)
    return dict(request.headers.items())


_SIGNER: Any = None


def _signer(botocore: Any) -> Any:
    """botocore's ``SigV4Auth`` with its clock given: ``add_auth`` as botocore's, at the time it is handed
    (botocore's own reads the clock; the published test suite signs at a fixed one)."""
    global _SIGNER
    if _SIGNER is None:

        class ClockedSigV4(botocore.auth.SigV4Auth):  # type: ignore[misc]
            def __init__(self, credentials: Any, service: str, region: str, timestamp: str) -> None:
                super().__init__(credentials, service, region)
                self._timestamp = timestamp

            def add_auth(self, request: Any) -> None:
                if self.credentials is None:
                    raise AuthFailed("Bedrock has no AWS credentials to sign with")
                request.context["timestamp"] = self._timestamp
                self._modify_request_before_signing(request)
                canonical = self.canonical_request(request)
                signature = self.signature(self.string_to_sign(request, canonical), request)
                self._inject_signature_to_request(request, signature)

        _SIGNER = ClockedSigV4
    return _SIGNER


def signer_for(credentials: Credentials, region: str) -> Any:
    """The HTTP client's :data:`~tether.providers.http.client.Signer` for Bedrock: each attempt signed with
    :func:`sign`, its URL sent exactly as signed."""
    from yarl import URL

    def signed(url: str, body: bytes, headers: dict[str, str]) -> tuple[Any, dict[str, str]]:
        return URL(url, encoded=True), sign(credentials, region, "POST", url, headers, body)

    return signed


def region_from(region: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The region given, else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``."""
    env = os.environ if environ is None else environ
    return region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def profile_region(profile: str | None) -> str | None:
    """The region of the AWS profile (``region`` in ``~/.aws/config``), as botocore reads it; ``None`` without
    one, or without botocore."""
    try:
        import botocore.session
    except ImportError:
        return None
    try:
        region = botocore.session.Session(profile=profile).get_config_variable("region")
    except Exception:  # noqa: BLE001 - a profile that does not exist: no region from it
        return None
    return region if isinstance(region, str) and region else None
