"""A cheaper ``__init__`` for the frozen dataclasses made on every step: messages, parts, events, usage.

A frozen dataclass refuses ``self.x = ...``, so the ``__init__`` ``dataclasses`` generates sets each field with
``object.__setattr__(self, "x", x)``: a call through a wrapper that slices its arguments into a tuple and looks
the name up on the type. Making a six-field event costs about four times what it costs unfrozen, and a step
makes dozens of them. :func:`quick_init` gives a frozen class with slots an ``__init__`` that sets each slot
through the slot's own descriptor instead (bound once, when the class is made): about half the cost, with the
same signature, defaults, default factories, keyword-only fields and ``__post_init__``. The class stays frozen:
assigning to a field afterwards still raises ``FrozenInstanceError``.

A class of :data:`TWIN_FROM_FIELDS` fields or more does better still: its ``__init__`` turns the new value into
an unfrozen twin class (the same slots, so the same layout), fills the fields with plain attribute stores and
turns it back, before anyone else can see it. That is one descriptor call and two class changes a value,
whatever its size, against a descriptor call a field (``bench/frozen.py --values``, six fields: 10,521
instructions generated, 6,444 descriptor by descriptor, 4,877 through the twin, 2,990 unfrozen). A subclass,
whose layout may differ, is filled descriptor by descriptor.
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

TWIN_FROM_FIELDS = 4
"""Fields from which filling an unfrozen twin wins: its fixed cost is about that of four descriptor calls."""
_TO_CLASS = object.__dict__["__class__"].__set__
"""Changes a value's class without the frozen class's ``__setattr__``, which refuses every assignment."""


def quick_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of ``cls`` (a ``@dataclass(frozen=True, slots=True)``) as the module docstring
    says; apply it above the ``@dataclass`` decorator."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__ or not params.init:
        raise TypeError(f"quick_init needs a frozen dataclass with slots and a generated __init__: {cls!r}")
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    values: list[tuple[int, str, str]] = []  # (number, field name, the expression of its value)
    for number, field in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
        namespace[f"_set{number}"] = _setter(cls, field.name)
        has_factory = field.default_factory is not dataclasses.MISSING
        if has_factory:
            namespace[f"_factory{number}"] = field.default_factory
        if not field.init:  # not a parameter: its default, or its factory's value, as dataclasses does
            if has_factory:
                values.append((number, field.name, f"_factory{number}()"))
            elif field.default is not dataclasses.MISSING:
                namespace[f"_default{number}"] = field.default
                values.append((number, field.name, f"_default{number}"))
            continue
        name = field.name
        if has_factory:
            param = f"{name}=_FACTORY"
            values.append((number, name, f"_factory{number}() if {name} is _FACTORY else {name}"))
        else:
            if field.default is not dataclasses.MISSING:
                namespace[f"_default{number}"] = field.default
                param = f"{name}=_default{number}"
            else:
                param = name
            values.append((number, name, name))
        (keyword if field.kw_only else positional).append(param)
    body = _body(cls, values, namespace)
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


def _setter(cls: type, name: str) -> Any:
    """The setter of field ``name``'s slot, on ``cls`` or on the base that declares it."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name].__set__
    raise TypeError(f"quick_init finds no slot for field {name!r} of {cls!r}")


def _body(cls: type, values: list[tuple[int, str, str]], namespace: dict[str, Any]) -> list[str]:
    """The lines that fill a value's fields: through the unfrozen twin when ``cls`` has one (a subclass, whose
    layout may differ, by :func:`_fill`), else each through its slot's descriptor."""
    twin = _twin(cls) if len(values) >= TWIN_FROM_FIELDS else None
    if twin is None:
        return [f"    _set{number}(self, {value})" for number, _, value in values]
    setters = tuple(namespace[f"_set{number}"] for number, _, _ in values)
    namespace.update(_cls=cls, _Twin=twin, _to_class=_TO_CLASS, _fill=_fill, _setters=setters)
    return [
        "    if type(self) is _cls:",
        "        _to_class(self, _Twin)",
        *(f"        self.{name} = {value}" for _, name, value in values),
        "        self.__class__ = _cls",
        "    else:",
        f"        _fill(self, _setters, ({', '.join(value for _, _, value in values)},))",
    ]


def _fill(value: object, setters: tuple[Any, ...], fields: tuple[Any, ...]) -> None:
    """Set each field of ``value`` through its slot's descriptor (a subclass's value: one function for all, so that
    a class's ``__init__`` is compiled with one way of filling it in full)."""
    for setter, field in zip(setters, fields, strict=True):
        setter(value, field)


def _twin(cls: type) -> type | None:
    """An unfrozen class with the slots of ``cls`` that a value may be turned into and back, or ``None`` when
    there is none: tried once, on a blank value. A base with slots of its own gives ``cls`` a layout that is not
    only its slots; Python 3.11 also refuses a class with a weak-reference slot (``weakref_slot=True``), which
    3.12 accepts."""
    twin = type(f"_Unfrozen{cls.__name__}", (), {"__slots__": cls.__dict__["__slots__"], "__module__": cls.__module__})
    blank: object = object.__new__(cls)
    try:
        _TO_CLASS(blank, twin)
        blank.__class__ = cls
    except TypeError:
        return None
    return twin
