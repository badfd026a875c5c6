"""Capabilities over a live Python namespace, for an assistant that answers questions about a session.

The contract
------------
* :class:`PythonRuntime` holds one namespace (a REPL's globals) and a reader of the session's last
  exception, and offers seven capabilities. :meth:`PythonRuntime.call` runs one synchronously on the calling
  thread (a namespace is not thread-safe: the host calls it from the thread that owns it, one call at a
  time) and answers with an envelope, ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error":
  {"code", "message", "details"}}``. It never raises, except ``KeyboardInterrupt`` (so a host can cancel).
* Results:

  - ``list_globals(include_all=false)`` -> ``{"globals": [{"name", "type_name"}], "truncated",
    "original_len"}``: the user's names in definition order, the most recent ``max_globals`` of them;
    without ``include_all``, not modules, not names starting with ``_`` (dunders, ``_``, private helpers)
    and not the host's ``hidden`` names. ``original_len`` counts the names.
  - ``get_type(expr)`` -> ``{"name", "module", "qualified"}``
  - ``get_repr(expr)`` -> ``{"repr", "truncated", "original_len"}``
  - ``get_dir(expr, include_dunder=false)`` -> ``{"members", "truncated", "original_len"}`` (names counted)
  - ``get_doc(expr)`` -> ``{"doc": str | null, "truncated", "original_len"}``
  - ``eval_expr(expr)`` -> ``{"value_repr", "stdout", "stderr", "truncated", "original_len": {"value_repr",
    "stdout", "stderr"}}``: what it printed is captured, not shown in the session; a value whose repr
    raises gets a placeholder naming the failure. Offered only with ``allow_eval``.
  - ``get_last_exception()`` -> ``{"exception": null | {"exc_type", "message", "traceback", "truncated",
    "original_len": {"message", "traceback"}}}``

  Every text is bounded by :class:`RuntimeSettings` and says so with ``truncated`` and ``original_len``.
* ``expr`` is evaluated as a Python expression in the namespace when evaluation is allowed; with
  ``allow_eval=False`` it must be a name or dotted attribute path, resolved without calling anything, so
  that the model cannot run code of its own (``expressions.py`` states the rules).
* Error codes: ``invalid_args`` (missing, unknown or wrong-typed arguments, a refused path; details:
  ``problems``), ``unknown_function`` (details: ``name``, ``available``), ``python_exception`` (the
  user's code or the expression raised, or passed ``eval_timeout`` as a ``TimeoutError``; details as
  ``get_last_exception``'s exception), ``internal`` (a failure of the runtime itself).
* Every call's user code (evaluations, reprs, ``__dir__``, ``__doc__``, properties) runs under the
  deadline with its output captured (``guard.py``); ``SystemExit`` from ``exit()`` is reported, never
  obeyed. The session's ``_``, ``sys.last_*`` and streams are left alone.
* :meth:`PythonRuntime.tools` gives the capabilities as tether Tools whose results are the envelopes as
  compact JSON (an error envelope as an error result); all but ``eval_expr`` are read-only.
  :meth:`PythonRuntime.unknown_function` is the envelope a host answers a call of any other name with
  (``Agent(unknown_tool=...)``), so that the model reads every answer in the same shape.
"""

from tether.tools.python_runtime.runtime import (
    PythonRuntime,
    RuntimeSettings,
    envelope_text,
    last_exception_from_sys,
)

__all__ = ["PythonRuntime", "RuntimeSettings", "envelope_text", "last_exception_from_sys"]
