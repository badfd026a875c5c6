"""Agents on the web: an agent served over HTTP to AG-UI clients, the AI SDK's ``useChat`` and a page of its own.

Nothing here is imported by ``import tether``: the protocols' modules load their dependencies (the ``serve``
extra: ``ag-ui-protocol``, ``starlette``, ``uvicorn``) when first used.
"""
