"""`direct_init`: the faster ``__init__`` of the frozen dataclasses built on every run keeps
every behaviour of the dataclass's own."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from agentensemble._frozen import Deferred, defer_fields, direct_init, direct_new


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


@direct_init
@dataclass(frozen=True, slots=True)
class Pair:
    """Too few fields for the twin: each slot is set through its descriptor."""

    left: int
    right: int = 0


@dataclass(frozen=True, slots=True)
class _Base:
    kind: str
    size: int = 0


@direct_init
@dataclass(frozen=True, slots=True)
class Derived(_Base):
    """A frozen base's fields too: the base's frozen __setattr__ must not see the build."""

    colour: str = "red"
    weight: int = 1


def test_small_and_derived_classes_are_exactly_their_class_and_stay_frozen() -> None:
    from agentensemble._frozen import _building_twin

    assert _building_twin(Derived) is not None  # built as its twin
    pair, derived = Pair(1, 2), Derived("box", 3, weight=7)
    assert type(pair) is Pair
    assert type(derived) is Derived
    assert (pair.left, pair.right) == (1, 2)
    assert (derived.kind, derived.size, derived.colour, derived.weight) == ("box", 3, "red", 7)
    for instance, name in ((pair, "left"), (derived, "kind"), (derived, "colour")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(instance, name, 0)
    assert derived == Derived("box", 3, "red", 7)
    assert pickle.loads(pickle.dumps(derived)) == derived


def test_a_generic_class_is_built_as_its_twin_and_keeps_its_parameters() -> None:
    from typing import Generic, TypeVar

    value_type = TypeVar("value_type")

    @direct_init
    @dataclass(frozen=True, slots=True)
    class Box(Generic[value_type]):
        value: value_type
        label: str = ""
        count: int = 0
        extra: tuple[str, ...] = ()

    box: Box[int] = Box(5, "five")
    assert type(box) is Box
    assert (box.value, box.label) == (5, "five")
    assert getattr(Box, "__parameters__", None) == (value_type,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        box.value = 6  # type: ignore[misc]


@pytest.mark.parametrize("refusal", [TypeError, ValueError])
def test_a_class_whose_twin_cannot_be_made_is_built_through_its_descriptors(
    refusal: type[Exception],
) -> None:
    class Closed:
        __slots__ = ()

        def __init_subclass__(cls, **kwargs: object) -> None:
            if cls.__name__.endswith("Building"):
                raise refusal("no subclasses here")
            super().__init_subclass__(**kwargs)

    @direct_init
    @dataclass(frozen=True, slots=True)
    class Sealed(Closed):
        a: int
        b: int = 0
        c: int = 0
        d: int = 0

    from agentensemble._frozen import _building_twin

    assert _building_twin(Sealed) is None
    sealed = Sealed(1, 2, 3, 4)
    assert type(sealed) is Sealed
    assert (sealed.a, sealed.d) == (1, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sealed.a = 5  # type: ignore[misc]


def test_direct_new_takes_the_class_arguments_and_a_subclass_gets_its_own() -> None:
    from agentensemble._frozen import direct_new

    point = direct_new(Point)(3, y=-4, scale=2)
    assert point == Point(3, -4, scale=2)
    assert type(point) is Point
    assert point._norm == 7  # __post_init__ ran
    assert direct_new(Point) is direct_new(Point)  # made once, kept on the class
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        direct_new(Point)(1, z=2)  # type: ignore[call-arg]

    @dataclass(frozen=True, slots=True)
    class Tagged(Point):
        tag: str = "t"

    tagged = direct_new(Tagged)(1, tag="new")
    assert type(tagged) is Tagged
    assert (tagged.x, tagged.tag, tagged._norm) == (1, "new", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tagged.tag = "changed"  # type: ignore[misc]


def test_a_plain_subclass_instance_keeps_its_class() -> None:
    class Labelled(Derived):
        __slots__ = ("note",)

    class Same(Derived):  # the same layout: a class swap would be allowed, and wrong
        __slots__ = ()

    Derived("first")  # the class's own instances are built as its twin from now on
    assert type(Same("box")) is Same
    labelled = Labelled("box", 2, weight=3)
    assert type(labelled) is Labelled
    assert (labelled.kind, labelled.size, labelled.weight) == ("box", 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        labelled.kind = "crate"  # type: ignore[misc]


def test_a_subclass_instance_gets_its_factory_defaults() -> None:
    class Plain(Point):
        __slots__ = ()

    Point(0)  # the generated __init__ is in place from now on
    plain = Plain(1)
    assert type(plain) is Plain
    assert plain.tags == ()  # the factory's value, not the generated init's sentinel


def test_a_factory_that_raises_leaves_no_twin_behind() -> None:
    def refuse() -> tuple[str, ...]:
        raise RuntimeError("no default today")

    @direct_init
    @dataclass(frozen=True, slots=True)
    class Fussy:
        a: int
        b: int = 0
        c: int = 0
        tags: tuple[str, ...] = field(default_factory=refuse)

    fussy = Fussy(1, tags=("given",))
    with pytest.raises(RuntimeError, match="no default today"):
        fussy.__init__(2)  # type: ignore[misc]  # built again, on an existing instance
    assert type(fussy) is Fussy
    assert (fussy.a, fussy.tags) == (1, ("given",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fussy.a = 3  # type: ignore[misc]


def test_execution_metrics_of_builds_a_subclass_as_its_own_class() -> None:
    from agentensemble.observability._metrics import ExecutionMetrics, TaskMetrics

    class Totals(ExecutionMetrics):
        __slots__ = ()

    totals = Totals.of([TaskMetrics(input_tokens=2, output_tokens=3)])
    assert type(totals) is Totals
    assert totals.total_tokens == 5


def test_fields_named_like_builtins_do_not_shadow_the_generated_code() -> None:
    @direct_init
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Shadowing:
        id: int = 0
        type: str = field(default="kind", init=False)
        object: tuple[int, ...] = field(default_factory=tuple)
        len: int = 1

    class Sub(Shadowing):
        __slots__ = ()

    shadowing = Shadowing(id=3)
    assert (shadowing.id, shadowing.type, shadowing.object, shadowing.len) == (3, "kind", (), 1)
    assert type(Sub()) is Sub
    assert Sub().object == ()


class _Counted(Deferred):
    """A deferred value that counts how many times it is made."""

    __slots__ = ("made_count", "value")

    def __init__(self, value: object) -> None:
        self.value = value
        self.made_count = 0

    def made(self) -> object:
        self.made_count += 1
        return self.value


@defer_fields("detail")
@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    name: str
    detail: object = None
    size: int = 0
    more: int = 0


def test_a_deferred_field_is_made_at_its_first_reading_and_kept() -> None:
    deferred = _Counted(["the", "detail"])
    result = Result(name="r", detail=deferred)
    assert deferred.made_count == 0
    first = result.detail
    assert first == ["the", "detail"]
    assert result.detail is first
    assert deferred.made_count == 1


def test_equality_replace_and_pickle_see_a_deferred_field_s_value() -> None:
    made_early = Result(name="r", detail=["x"])
    assert Result(name="r", detail=_Counted(["x"])) == made_early
    assert dataclasses.replace(Result(name="r", detail=_Counted(["x"])), size=2).detail == ["x"]
    copied = pickle.loads(pickle.dumps(Result(name="r", detail=_Counted(["x"]))))
    assert copied == made_early
    assert not isinstance(vars(Result)["detail"].__get__(copied, Result), Deferred)


def test_a_deferred_field_stays_frozen_and_every_constructor_takes_a_deferred() -> None:
    result = direct_new(Result)(name="r", detail=_Counted(7))
    assert result.detail == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.detail = 8  # type: ignore[misc]
    assert SmallPair(1, _Counted(2)).y == 2  # under four fields: set through the slot itself


@defer_fields("y")
@direct_init
@dataclass(frozen=True, slots=True)
class SmallPair:
    x: int
    y: object


def test_a_deferred_that_does_not_say_how_to_make_its_value_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="does not say how its value is made"):
        _ = Result(name="r", detail=Deferred()).detail
