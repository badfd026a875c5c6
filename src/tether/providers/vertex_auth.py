"""The boundary with ``google-auth``: Application Default Credentials found, and their tokens refreshed.

Imported on first use only (by :mod:`tether.providers.vertex`, when a ``vertex:`` model is built with no key),
since it imports ``google.auth``, the ``vertex`` extra.

google-auth refreshes a token through a transport it is given: its ``requests`` one (the extra installs
``google-auth[requests]``: google-auth finds the metadata server's credentials, on Compute Engine, Cloud Run
and GKE, only through it). A refresh blocks, so the provider runs it in a worker thread, one at a time per
credentials (:class:`TokenSource`): many runs that find the token expired together refresh it once.
"""

from __future__ import annotations

import threading
from typing import Any

import google.auth
import google.auth.exceptions
from google.auth.transport.requests import Request as AuthRequest

__all__ = ["SCOPES", "TokenSource", "default_credentials"]

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
"""The scope Vertex AI's API asks of an access token."""


def default_credentials() -> tuple[Any, str | None]:
    """Application Default Credentials with the cloud-platform scope, and the project they name (``None`` when
    they name none); google-auth's ``DefaultCredentialsError`` when none are found."""
    credentials, project = google.auth.default(scopes=list(SCOPES), request=AuthRequest())
    return credentials, project


class TokenSource:
    """Access tokens of one credentials object, refreshed when they expire (google-auth's ``valid``, which
    counts a token about to expire as expired) or when the API refused the one sent."""

    __slots__ = ("_lock", "_request", "credentials")

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials
        self._request = AuthRequest()
        self._lock = threading.Lock()

    def current(self) -> str | None:
        """The token, when it is still valid; ``None`` when it must be refreshed first."""
        credentials = self.credentials
        return str(credentials.token) if credentials.valid and credentials.token else None

    def refreshed(self, refused: str | None = None) -> str:
        """A valid token, refreshed (blocking: call it in a worker thread) when the current one is expired or
        is ``refused``, the one the API answered 401 to; another thread's fresh token is taken as it is."""
        with self._lock:
            credentials = self.credentials
            if (refused is not None and credentials.token == refused) or not credentials.valid:
                credentials.refresh(self._request)
            return str(credentials.token)


RefreshError = google.auth.exceptions.RefreshError
"""google-auth's: the token endpoint refused the credentials."""
AuthTransportError = google.auth.exceptions.TransportError
"""google-auth's: the token endpoint could not be reached."""
DefaultCredentialsError = google.auth.exceptions.DefaultCredentialsError
"""google-auth's: no Application Default Credentials were found."""
