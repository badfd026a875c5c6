"""Loopback stand-ins for Vertex AI's tests: a Google OAuth token endpoint that checks the JWT a service
account signs, a service account key file pointing at it, and a Vertex AI API that records what it is sent.

Only the remote endpoints are stood in for: google-auth itself reads the key file, signs the assertion and
exchanges it, over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
PROJECT = "proj-from-key"


def _unpadded(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class TokenServer:
    """Google's token endpoint: a JWT-bearer grant signed by ``key`` is answered with ``tok-1``, ``tok-2``, ...,
    each living ``expires_in`` seconds; anything else with ``invalid_grant``."""

    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    expires_in: int = 3600
    refuse: bool = False
    claims: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/token", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        form = await request.post()
        assertion = str(form.get("assertion", ""))
        if self.refuse or form.get("grant_type") != JWT_BEARER or not self._verified(assertion):
            return web.json_response({"error": "invalid_grant", "error_description": "Invalid JWT."}, status=400)
        self.claims.append(json.loads(_unpadded(assertion.split(".")[1])))
        token = f"tok-{len(self.claims)}"
        return web.json_response({"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"})

    def _verified(self, assertion: str) -> bool:
        """The assertion is an RS256 JWT signed by the service account's key."""
        try:
            head, claims, signature = assertion.split(".")
            self.key.public_key().verify(
                _unpadded(signature), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except (ValueError, InvalidSignature):
            return False
        return bool(json.loads(_unpadded(head)).get("alg") == "RS256")

    def key_file(self, folder: Path, *, project: str | None = PROJECT) -> Path:
        """A service account's JSON key whose ``token_uri`` is this server."""
        pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        data = {
            "type": "service_account",
            "private_key_id": "key-1",
            "private_key": pem,
            "client_email": "runner@proj.iam.gserviceaccount.com",
            "client_id": "1234567890",
            "token_uri": f"{self.url}/token",
        }
        if project is not None:
            data["project_id"] = project
        path = folder / "service-account.json"
        path.write_text(json.dumps(data))
        return path


@dataclass
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Answer = Callable[[Received], web.StreamResponse]


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in chunks)


def streamed(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="text/event-stream")


def google_error(status: int, name: str, message: str) -> web.Response:
    """An error as Google APIs write it."""
    return web.json_response({"error": {"code": status, "message": message, "status": name}}, status=status)


HELLO = sse(
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}], "modelVersion": "gemini-2.5-flash"},
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
        "modelVersion": "gemini-2.5-flash",
    },
)


@dataclass
class VertexApi:
    """Vertex AI's API: every request recorded, each answered by the next of ``answers`` (the last one again
    when they run out)."""

    answers: list[Answer] = field(default_factory=lambda: [lambda _: streamed(HELLO)])
    received: list[Received] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {name.lower(): value for name, value in request.headers.items()}
        received = Received(request.path, request.query_string, headers, await request.read())
        self.received.append(received)
        answer = self.answers[min(len(self.received), len(self.answers)) - 1]
        return answer(received)

    @property
    def tokens(self) -> list[str]:
        return [r.headers.get("authorization", "") for r in self.received]


def fixed_credentials(token: str = "fixed-token") -> Any:
    """google-auth user credentials holding a token valid for an hour, and nothing to refresh it with."""
    from google.oauth2.credentials import Credentials

    expiry = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)  # google-auth keeps naive UTC
    return Credentials(token=token, expiry=expiry)  # type: ignore[no-untyped-call]
