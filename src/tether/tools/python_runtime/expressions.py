"""What an ``expr`` argument names: an expression evaluated in the namespace, or, in read-only mode, a path.

The contract
------------
* With evaluation allowed, ``expr`` is any Python expression, compiled as one (``eval`` mode: no
  statements) and evaluated with the namespace as its globals and the builtins available. A namespace that
  is not a ``dict`` is passed as the locals (names it holds are then invisible inside lambdas). When the
  namespace has no ``__builtins__``, the key is lent for the evaluation and removed after it. Nothing else
  of the session changes unless the expression changes it: ``_`` and ``sys.last_*`` are left alone.
* Read-only (``allow_eval=False``), ``expr`` must be a *path*: a name, then attribute names, joined by dots
  (``df.columns``, ``np.linalg.norm``). :func:`check_path` refuses anything else before any lookup, with
  :class:`PathRefused`: calls, subscripts, operators, literals, keywords, and ``__dunder__`` names other
  than a few plain descriptive ones (``__class__``, ``__name__``, ``__doc__``, ...), which closes the
  walks through ``__globals__``, ``__builtins__``, ``__subclasses__`` or ``__init__`` to code that was
  never meant to be reached. :func:`resolve_path` looks the name up in the namespace, then in the builtins,
  and follows the attributes with ``getattr``: nothing is called, so no code the model wrote runs. (Reading
  an attribute runs the object's own properties, as showing its repr runs its ``__repr__``.)
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Mapping, MutableMapping
from typing import Any

from tether.tools.python_runtime.values import is_dunder

MAX_PATH = 500
"""Characters of a read-only path."""

SAFE_DUNDERS = frozenset(
    {"__class__", "__name__", "__qualname__", "__module__", "__doc__", "__dict__", "__mro__", "__bases__",
     "__file__", "__version__", "__all__", "__wrapped__"}
)  # fmt: skip
"""The ``__dunder__`` names a read-only path may use: descriptive data, no door to code or to builtins."""

_FILENAME = "<expression>"


class PathRefused(ValueError):
    """A read-only ``expr`` that is not a plain dotted path."""


def evaluate(expr: str, namespace: MutableMapping[str, Any]) -> Any:
    """The value of the expression ``expr`` in ``namespace`` (see the module docstring)."""
    code = compile(expr, _FILENAME, "eval", dont_inherit=True)
    if not isinstance(namespace, dict):
        return eval(code, {"__builtins__": builtins}, namespace)
    lent = "__builtins__" not in namespace
    if lent:
        namespace["__builtins__"] = builtins
    try:
        return eval(code, namespace)  # evaluating is this function's job
    finally:
        if lent:
            namespace.pop("__builtins__", None)


def check_path(expr: str) -> tuple[str, ...]:
    """The names of the read-only path ``expr``; :class:`PathRefused` saying why when it is not one."""
    if len(expr) > MAX_PATH:
        raise PathRefused(f"the path is {len(expr)} characters long; at most {MAX_PATH}")
    parts = tuple(part.strip() for part in expr.strip().split("."))
    for part in parts:
        if not part.isidentifier() or keyword.iskeyword(part):
            raise PathRefused(
                f"{expr!r} is not a name or a dotted attribute path (like 'df.columns'): in read-only mode "
                "expressions are not evaluated, so calls, subscripts, operators and literals are refused"
            )
        if is_dunder(part) and part not in SAFE_DUNDERS:
            allowed = ", ".join(sorted(SAFE_DUNDERS))
            raise PathRefused(f"{part!r} is not readable in read-only mode; of the dunder names only: {allowed}")
    return parts


def resolve_path(parts: tuple[str, ...], namespace: Mapping[str, Any]) -> Any:
    """The object at a checked path: the name from the namespace or the builtins, then ``getattr`` along."""
    name = parts[0]
    if name in namespace:
        value = namespace[name]
    elif name in vars(builtins):
        value = vars(builtins)[name]
    else:
        raise NameError(f"name {name!r} is not defined", name=name)
    for attribute in parts[1:]:
        value = getattr(value, attribute)
    return value
