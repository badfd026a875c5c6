"""``to_asgi()``: an agent (``Agent``, ``DurableAgent``) served over HTTP, as an ASGI app (``tether.serve``).

A base both agents share, so that each gives itself to ``tether.serve.create_app``; Starlette and the rest of
the server load only when it is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["Servable"]


class Servable:
    """What makes an agent servable: :meth:`to_asgi`."""

    __slots__ = ()

    def to_asgi(self, **options: Any) -> Starlette:
        """This agent as an ASGI app (Starlette): the page, the JSON API, AG-UI at ``/agui`` and the AI SDK's
        ``useChat`` at ``/api/chat``. Mount it in any ASGI server or app (``app.mount("/agent",
        agent.to_asgi())``); ``options`` are ``tether.serve.create_app``'s (``token=``, ``cors_origins=``,
        ``on_disconnect=``, ...). Needs the ``serve`` extra (``pip install 'tether[serve]'``)."""
        from tether.serve.app import create_app

        return create_app(self, **options)  # type: ignore[arg-type]  # an Agent or a DurableAgent
