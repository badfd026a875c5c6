"""The Python assistant: questions about a live Python session, answered by inspecting it.

``ask(question, namespace)`` runs one small, bounded agent run whose only tools are the capabilities of
``tether.tools.python_runtime`` over ``namespace`` (a REPL's globals) and the session's last exception;
:class:`Assistant` is what a REPL holds to ask many questions with one model. The contract (limits, threads,
cancellation, the soft-fail answer) is in ``core.py``; docs/python.md is the user's guide.
"""

from __future__ import annotations

from tether.assistant.core import Assistant, ask, ask_async
from tether.assistant.defaults import ASK_LIMITS, LOCAL_ASK_LIMITS, system_prompt

__all__ = ["ASK_LIMITS", "LOCAL_ASK_LIMITS", "Assistant", "ask", "ask_async", "system_prompt"]
