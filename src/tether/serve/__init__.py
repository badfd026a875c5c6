"""Agents on the web: an agent served over HTTP to AG-UI clients, the AI SDK's ``useChat`` and a page of its own.

Nothing here is imported by ``import tether``: the protocols' modules load their dependencies (the ``serve``
extra: ``ag-ui-protocol``, ``starlette``, ``uvicorn``) when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_face

if TYPE_CHECKING:
    from tether.serve.app import create_app
    from tether.serve.security import check_bind

__all__ = ["check_bind", "create_app"]

__getattr__, __dir__ = lazy_face(__name__, {"create_app": "tether.serve.app", "check_bind": "tether.serve.security"})
