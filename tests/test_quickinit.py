"""quick_init: a frozen dataclass keeps its constructor's behaviour and stays frozen, for less work."""

from __future__ import annotations

import dataclasses
import dis
import inspect
import pickle
import sys
import weakref
from dataclasses import dataclass, field

import pytest

from tether.events import StreamEnd, TurnCompleted
from tether.messages import Message, Text, ToolCall
from tether.quickinit import quick_init
from tether.usage import NO_USAGE, Usage


@quick_init
@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)
    seen: int = field(default=7, init=False)
    extra: str = field(default="x", kw_only=True)


@dataclass(frozen=True, slots=True)
class Plain:
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)
    seen: int = field(default=7, init=False)
    extra: str = field(default="x", kw_only=True)


@quick_init
@dataclass(frozen=True, slots=True)
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


def test_the_signature_defaults_and_factories_are_those_dataclasses_makes() -> None:
    assert list(inspect.signature(Sample.__init__).parameters) == list(inspect.signature(Plain.__init__).parameters)
    for args, kwargs in [(("a",), {}), (("a", 5), {"tags": ["t"], "extra": "y"}), ((), {"name": "b", "count": 0})]:
        made, expected = Sample(*args, **kwargs), Plain(*args, **kwargs)  # type: ignore[arg-type]
        assert dataclasses.astuple(made) == dataclasses.astuple(expected)
    first, second = Sample("a"), Sample("a")
    assert first.tags == []
    assert first.tags is not second.tags
    assert first.seen == 7
    with pytest.raises(TypeError):
        Sample("a", 1, [], "positional")  # type: ignore[call-arg]  # extra is keyword-only
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]


def test_the_class_stays_frozen_hashable_and_picklable() -> None:
    sample = Checked(4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.value = 5  # type: ignore[misc]
    assert hash(Checked(4)) == hash(sample)
    assert Checked(4) == sample
    assert pickle.loads(pickle.dumps(sample)) == sample
    assert dataclasses.replace(sample, value=9).value == 9


def test_post_init_still_runs() -> None:
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)
    with pytest.raises(ValueError, match="negative"):
        dataclasses.replace(Checked(1), value=-2)


def test_the_hot_types_use_it_and_build_the_same_values() -> None:
    """Messages, parts, events and usage are made through the quick constructor, and equal what a field-by-field
    construction would give."""
    for cls in (Message, Text, ToolCall, TurnCompleted, StreamEnd, Usage):
        assert cls.__init__.__module__ != "dataclasses"
        assert "_set0" in cls.__init__.__globals__
    call = ToolCall("c1", "add", {"a": 1}, '{"a": 1}')
    assert (call.id, call.name, call.arguments, call.raw_arguments) == ("c1", "add", {"a": 1}, '{"a": 1}')
    end = StreamEnd("stop", NO_USAGE)
    assert end.kind == "stream_end"
    assert end.provider_data is None
    assert end.usage == Usage()


def _plain_stores(cls: type) -> list[str]:
    init = cls.__dict__["__init__"]
    return [op.argval for op in dis.get_instructions(init) if op.opname == "STORE_ATTR"]


def test_a_value_of_four_fields_or_more_is_filled_by_plain_stores_on_its_unfrozen_twin() -> None:
    """From four fields, the value is turned into an unfrozen twin, filled with plain stores and turned back:
    it comes out of its own class, whole and frozen. Fewer fields keep a descriptor call each."""
    for cls in (Sample, ToolCall, TurnCompleted, Usage):
        names = [f.name for f in dataclasses.fields(cls)]
        assert _plain_stores(cls) == [*names, "__class__"], cls
    assert _plain_stores(Checked) == []
    assert _plain_stores(Message) == []
    made, expected = Sample("a", 5, ["t"], extra="y"), Plain("a", 5, ["t"], extra="y")
    assert type(made) is Sample
    assert dataclasses.astuple(made) == dataclasses.astuple(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 6  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(made)) == made

    @quick_init
    @dataclass(frozen=True, slots=True)
    class Named:
        __hidden: int  # a field named _Named__hidden
        __dunder__: int
        third: int
        fourth: int

    named = Named(1, 2, 3, 4)
    assert _plain_stores(Named) == ["_Named__hidden", "__dunder__", "third", "fourth", "__class__"]
    assert dataclasses.astuple(named) == (1, 2, 3, 4)


def test_a_subclass_keeps_its_class_and_is_filled_slot_by_slot() -> None:
    """The twin has the class's own layout: a subclass (with slots of its own or none) is not turned into it,
    and a value of it stays of the subclass."""

    class Tagged(Sample):
        __slots__ = ("tag",)

    class Same(Sample):
        __slots__ = ()

    for cls in (Tagged, Same):
        made = cls("a", 2)
        assert type(made) is cls
        assert dataclasses.astuple(made) == dataclasses.astuple(Plain("a", 2))
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.name = "b"  # type: ignore[misc]


def test_a_class_with_a_base_of_its_own_is_filled_slot_by_slot() -> None:
    @dataclass(frozen=True, slots=True)
    class Base:
        first: int

    @quick_init
    @dataclass(frozen=True, slots=True)
    class Derived(Base):
        second: int
        third: int
        fourth: int
        fifth: int = 5

    assert _plain_stores(Derived) == []
    made = Derived(1, 2, 3, 4)
    assert type(made) is Derived
    assert dataclasses.astuple(made) == (1, 2, 3, 4, 5)


def test_a_class_with_a_weak_reference_slot_is_made_whole_whichever_way_the_interpreter_allows() -> None:
    """Python 3.11 cannot turn such a value into a twin and back (3.12 can): the class is then filled slot by
    slot, and either way its values are whole, frozen and weakly referable."""

    @quick_init
    @dataclass(frozen=True, slots=True, weakref_slot=True)
    class Watched:
        first: int
        second: int
        third: int
        fourth: list[int] = field(default_factory=list)

    made = Watched(1, 2, 3)
    assert type(made) is Watched
    assert dataclasses.astuple(made) == (1, 2, 3, [])
    assert weakref.ref(made)() is made
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.first = 0  # type: ignore[misc]
    assert bool(_plain_stores(Watched)) == (sys.version_info >= (3, 12))


def test_refuses_a_class_it_cannot_speed_up() -> None:
    @dataclass(slots=True)
    class Mutable:
        value: int

    @dataclass(frozen=True)
    class NoSlots:
        value: int

    for cls in (Mutable, NoSlots):
        with pytest.raises(TypeError, match="frozen dataclass with slots"):
            quick_init(cls)
    with pytest.raises(TypeError, match="InitVar"):

        @quick_init
        @dataclass(frozen=True, slots=True)
        class WithInitVar:
            value: int
            seed: dataclasses.InitVar[int] = 0

            def __post_init__(self, seed: int) -> None:
                pass
