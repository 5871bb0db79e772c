"""`direct_init`: the faster ``__init__`` of the frozen dataclasses built on every run keeps
every behaviour of the dataclass's own."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from agentensemble._frozen import direct_init


@direct_init
@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)
    label: str = field(default="p", init=False)
    _norm: int = field(init=False, default=0, repr=False)
    scale: int = field(default=1, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_norm", abs(self.x) + abs(self.y))


def test_positional_keyword_defaults_and_factories_behave_as_the_dataclass_says() -> None:
    point = Point(3, y=-4, scale=2)
    assert (point.x, point.y, point.tags, point.label, point.scale) == (3, -4, (), "p", 2)
    assert point._norm == 7  # __post_init__ ran
    assert point == Point(x=3, y=-4, scale=2)


def test_the_instances_stay_frozen_and_replace_and_pickle_work() -> None:
    point = Point(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 5  # type: ignore[misc]
    moved = dataclasses.replace(point, y=9)
    assert (moved.x, moved.y, moved._norm) == (1, 9, 10)
    assert pickle.loads(pickle.dumps(point)) == point


def test_a_missing_or_unknown_argument_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, (), 4)  # type: ignore[call-arg]  # scale is keyword-only


def test_a_class_without_slots_is_refused() -> None:
    @dataclass(frozen=True)
    class Loose:
        x: int

    with pytest.raises(TypeError, match=r"Loose\.x is not a slot"):
        direct_init(Loose)


def test_the_signature_stays_the_dataclass_one_after_the_first_instance() -> None:
    import inspect

    Point(1)
    assert str(inspect.signature(Point)) == (
        "(x: 'int', y: 'int' = 0, tags: 'tuple[str, ...]' = <factory>, *, scale: 'int' = 1) -> None"
    )


def test_an_init_var_is_refused() -> None:
    from dataclasses import InitVar

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        x: int
        seed: InitVar[int] = 0

    with pytest.raises(TypeError, match="WithInitVar has an InitVar"):
        direct_init(WithInitVar)


def test_direct_maker_takes_packed_then_leading_then_keyword_fields() -> None:
    from agentensemble._frozen import direct_maker

    make = direct_maker(Point, packed=("y", "x"), leading=("scale",))
    point = make((-4, 3), 2, tags=("a",))
    assert point == Point(3, -4, ("a",), scale=2)
    assert point._norm == 7  # __post_init__ ran
    assert make((0, 0), 1) == Point(0)  # the class's defaults and factories
    with pytest.raises(TypeError, match="positional"):
        make((0, 0), 1, ("a",))  # every other field is keyword-only
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 5  # type: ignore[misc]


def test_direct_maker_refuses_a_field_the_class_does_not_have() -> None:
    from agentensemble._frozen import direct_maker

    with pytest.raises(TypeError, match="Point has no field 'z'"):
        direct_maker(Point, packed=("x", "z"))
