"""A cheaper ``__init__`` for the frozen dataclasses made on every step: messages, parts, events, usage.

A frozen dataclass refuses ``self.x = ...``, so the ``__init__`` ``dataclasses`` generates sets each field with
``object.__setattr__(self, "x", x)``: a call through a wrapper that slices its arguments into a tuple and looks
the name up on the type. Making a six-field event costs about four times what it costs unfrozen, and a step
makes dozens of them. :func:`quick_init` gives a frozen class with slots an ``__init__`` that sets each slot
through the slot's own descriptor instead (bound once, when the class is made): about half the cost, with the
same signature, defaults, default factories, keyword-only fields and ``__post_init__``. The class stays frozen:
assigning to a field afterwards still raises ``FrozenInstanceError``.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a parameter whose field has a ``default_factory`` (shown as ``<factory>``, as
    ``dataclasses`` shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of ``cls`` (a ``@dataclass(frozen=True, slots=True)``) as the module docstring
    says; apply it above the ``@dataclass`` decorator."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__ or not params.init:
        raise TypeError(f"quick_init needs a frozen dataclass with slots and a generated __init__: {cls!r}")
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for number, field in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
        setter = f"_set{number}"
        namespace[setter] = cls.__dict__[field.name].__set__
        has_factory = field.default_factory is not dataclasses.MISSING
        if has_factory:
            namespace[f"_factory{number}"] = field.default_factory
        if not field.init:  # not a parameter: its default, or its factory's value, as dataclasses does
            if has_factory:
                body.append(f"    {setter}(self, _factory{number}())")
            elif field.default is not dataclasses.MISSING:
                namespace[f"_default{number}"] = field.default
                body.append(f"    {setter}(self, _default{number})")
            continue
        name = field.name
        if has_factory:
            param = f"{name}=_FACTORY"
            body.append(f"    {setter}(self, _factory{number}() if {name} is _FACTORY else {name})")
        else:
            if field.default is not dataclasses.MISSING:
                namespace[f"_default{number}"] = field.default
                param = f"{name}=_default{number}"
            else:
                param = name
            body.append(f"    {setter}(self, {name})")
        (keyword if field.kw_only else positional).append(param)
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    if inspect.signature(init).parameters.keys() != inspect.signature(cls.__init__).parameters.keys():
        raise TypeError(f"quick_init cannot rebuild the __init__ of {cls!r} (an InitVar?)")
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(getattr(cls.__init__, "__annotations__", {}))
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
