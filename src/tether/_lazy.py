"""A package's face that loads what it hands on when it is first asked for, so that importing the package (which
``import tether.providers.base`` does too) costs nothing but the face itself."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_face(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each name to the module that
    defines it; a name is imported on first use and kept in the package."""
    namespace = importlib.import_module(package).__dict__

    def get(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return get, names
