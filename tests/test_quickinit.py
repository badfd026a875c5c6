"""quick_init: a frozen dataclass keeps its constructor's behaviour and stays frozen, for less work."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
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
