"""`direct_init`: a faster ``__init__`` for the frozen slotted dataclasses built on every run
(and `direct_maker`, a faster constructor still, for the events of a task).

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__``, a
call each. These build the instance as a "twin" instead: a class with the same slots and no
frozen ``__setattr__``, whose ``self.field = value`` the interpreter specialises into a
direct slot store; then they make it an instance of the class (a class swap the interpreter
allows between classes of one layout). With fewer than four fields, where the swaps cost
more than they save, each slot is set through its own descriptor. The engine builds
several such objects for every fact of every run (events, trace records, metrics,
contexts), so the difference is a large part of its own cost per task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, ParamSpec, TypeVar, cast

__all__ = ["Deferred", "defer_fields", "direct_init", "direct_maker", "direct_new"]

C = TypeVar("C", bound=type)
T = TypeVar("T")
P = ParamSpec("P")


def direct_init(cls: C) -> C:
    """Give a frozen, slotted dataclass an ``__init__`` with the same arguments and defaults
    (factories included) that sets each slot directly (see the module), then calls
    ``__post_init__`` if the class has one; an instance of a subclass that inherits it is
    built by the dataclass's own. The class stays frozen for everyone else, and
    `dataclasses.replace` works as before. Apply it above ``@dataclass``, on classes without
    ``InitVar`` pseudo-fields (they would not be passed on).

    The new ``__init__`` is written when the first instance is made, so importing the class
    costs nothing more. It keeps the original's signature for `inspect` and ``help()``."""
    original = vars(cls)["__init__"]
    _check_generatable(cls)

    def first_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if type(self) is not cls:
            original(self, *args, **kwargs)
            return
        fast = _generated(cls, original=original)
        fast.__wrapped__ = original
        setattr(cls, "__init__", fast)  # noqa: B010  (mypy refuses a plain assignment to __init__)
        fast(self, *args, **kwargs)

    first_init.__qualname__ = f"{cls.__qualname__}.__init__"
    first_init.__wrapped__ = original  # type: ignore[attr-defined]  # the signature to show
    setattr(cls, "__init__", first_init)  # noqa: B010
    return cls


def direct_new(cls: Callable[P, T]) -> Callable[P, T]:
    """The constructor of the frozen, slotted dataclass `cls` for the engine's hot paths:
    called with the class's own arguments, but a plain function, so a call with keywords
    passes them without a dict (calling a class puts them in one, which ``__init__`` then
    unpacks: a third of the cost of an instance with a dozen fields). Made at its first use
    and kept on the class; ``__post_init__`` runs as in ``__init__``.

    A call with more than 15 keywords is compiled into a call with a dict again: pass the
    fields that keep their default by omitting them."""
    made: tuple[object, Callable[P, T]] | None = getattr(cls, "__direct_new__", None)
    if made is not None and made[0] is cls:  # a subclass inherits the attribute, not the use
        return made[1]
    new: Callable[P, T] = _made_new(cast("type[Any]", cls))
    return new


def _made_new(cls: type[Any]) -> Any:
    """`cls`'s `direct_new` constructor, made and kept on the class."""
    _check_generatable(cls)
    new = _generated(cls, allocate=True)
    setattr(cls, "__direct_new__", (cls, new))  # noqa: B010  (a class attribute, not a field)
    return new


def direct_maker(
    cls: type[T], packed: tuple[str, ...], leading: tuple[str, ...] = ()
) -> Callable[..., T]:
    """A constructor of the frozen, slotted dataclass `cls` for the hottest paths:
    ``make(values, *leading, **others)``, where `values` is a tuple of the `packed` fields
    in that order (the ids every event of a task shares, say), then the `leading` fields
    positionally, then every other field by keyword only, with the class's defaults. It
    builds the instance without parsing a keyword per packed field, which halves the cost
    of an instance with a dozen fields. ``__post_init__`` runs as in ``__init__``."""
    _check_generatable(cls)
    dataclass: type[Any] = cls
    names = {item.name for item in dataclasses.fields(dataclass)}
    unknown = [name for name in (*packed, *leading) if name not in names]
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}")
    maker: Callable[..., T] = _generated(cls, packed=packed, leading=leading)
    return maker


def _generated(
    cls: type[Any],
    *,
    packed: tuple[str, ...] | None = None,
    leading: tuple[str, ...] = (),
    allocate: bool = False,
    original: Callable[..., None] | None = None,
) -> Any:
    """The ``__init__`` of `cls` that sets each slot directly (a subclass's instance goes to
    `original`, the dataclass's own: it is not built as the class's twin); with `allocate`,
    the `direct_new` constructor (the same arguments); with `packed`, the `direct_maker`
    constructor (every other field keyword-only)."""
    params: dict[str, Any] = {"_missing": dataclasses.MISSING, "_cls": cls, "_new": object.__new__}
    positional: list[str] = []
    keywords: list[str] = []
    values: list[tuple[str, str]] = []
    given = {*(packed or ()), *leading}
    for item in dataclasses.fields(cls):
        if item.name in given:
            value: str | None = item.name
        else:
            signature = keywords if item.kw_only or packed is not None else positional
            value = _argument(item, params, signature)
        if value is not None:
            values.append((item.name, value))
    makes = packed is not None or allocate
    twinned = len(values) >= _TWIN_FROM_FIELDS and (makes or original is not None)
    building = _building_twin(cls) if twinned else None
    if building is None:
        allocation = "    self = _new(_cls)\n"
        body = []
        for field, value in values:
            params[f"_set_{field}"] = _slot(cls, field).__set__
            body.append(f"    _set_{field}(self, {value})\n")
    else:  # defaults and factories first: one that raises must not leave a twin behind
        params["_building"], params["_become"] = building, _SET_CLASS
        allocation = "    self = _new(_building)\n"
        body = [f"    self.{field} = {_local(field, value)}\n" for field, value in values]
        body.append("    self.__class__ = _cls\n")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    resolved = [
        f"    {_local(field, value)} = {value}\n"
        for field, value in values
        if building and value != field
    ]
    if packed is not None:
        name, head = "make", ["values", *leading]
        unpack = [f"    ({', '.join(packed)},) = values\n"] if packed else []
        body = [*unpack, *resolved, allocation, *body, "    return self\n"]
    elif allocate:
        name, head = "new", []
        body = [*resolved, allocation, *body, "    return self\n"]
    else:
        name, head = "__init__", ["self"]
        if building is not None:
            params["_original"] = original
            local = {field: _local(field, value) for field, value in values}
            passed = [
                *(local.get(name, name) for name in _names(positional)),
                *(f"{name}={local.get(name, name)}" for name in _names(keywords)),
            ]
            body = [
                *resolved,
                "    if self.__class__ is not _cls:  # a subclass's instance: not the twin's\n",
                f"        return _original(self, {', '.join(passed)})\n",
                "    _become(self, _building)\n",
                *body,
            ]
    arguments = [*head, *positional, *(["*", *keywords] if keywords else [])]
    lines = [f"def {name}({', '.join(arguments)}):\n", *(body or ["    return None\n"])]
    exec("".join(lines), params)  # generated from the class's own fields, as dataclasses does
    made = params[name]
    made.__qualname__ = f"{cls.__qualname__}.{name}"
    return made


def _local(field: str, value: str) -> str:
    """The local that holds a field's value: its parameter, or for a default or factory
    worked out before the instance is built, a name no field or builtin can shadow."""
    return field if value == field else f"_value_{field}"


def _names(signature: list[str]) -> list[str]:
    """The parameter names of a generated signature (``name`` or ``name=default``)."""
    return [parameter.partition("=")[0] for parameter in signature]


_TWIN_FROM_FIELDS = 4
"""From this many fields to set, building the instance as its twin pays for the two class
swaps (measured: 30-50% less per instance from 4 fields; slower with 2)."""

_SET_CLASS = vars(object)["__class__"].__set__
"""Sets an instance's class, bypassing a frozen class's ``__setattr__``."""


def _building_twin(cls: type[Any]) -> type[Any] | None:
    """A class with the same slots and bases as `cls` but plain attribute setting: an
    instance is built as one (each ``self.field = value`` a specialised slot store, where a
    frozen class's would raise), then made a `cls`. None when the interpreter refuses
    the class swap (a layout it does not consider the same). Made once per class (its
    `direct_init`, `direct_new` and `direct_maker` constructors share it)."""
    if "__direct_twin__" in vars(cls):
        kept: type[Any] | None = vars(cls)["__direct_twin__"]
        return kept
    twin = _made_twin(cls)
    setattr(cls, "__direct_twin__", twin)  # noqa: B010  (a class attribute, not a field)
    return twin


def _made_twin(cls: type[Any]) -> type[Any] | None:
    namespace: dict[str, Any] = {
        "__slots__": vars(cls).get("__slots__", ()),
        "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__,
        "__module__": cls.__module__,
        "__qualname__": f"{cls.__qualname__}.<building>",
    }
    if "__orig_bases__" in vars(cls):  # a Generic subclass must name its parameters
        namespace["__orig_bases__"] = vars(cls)["__orig_bases__"]
    try:
        twin = type(f"{cls.__name__}Building", cls.__bases__, namespace)
        probe: Any = object.__new__(twin)
        probe.__class__ = cls
    except Exception:  # a base's __init_subclass__ or metaclass refusing it, a layout
        return None
    return twin


def _argument(
    item: dataclasses.Field[Any], params: dict[str, Any], signature: list[str]
) -> str | None:
    """How the generated function gets the field's value (adding its parameter to
    `signature` and its default to `params`); None for a field ``__post_init__`` sets."""
    default = f"_default_{item.name}"
    factory = item.default_factory is not dataclasses.MISSING
    if not item.init:
        if item.default is dataclasses.MISSING and not factory:
            return None
        params[default] = item.default_factory if factory else item.default
        return f"{default}()" if factory else default
    if item.default is not dataclasses.MISSING:
        params[default] = item.default
        signature.append(f"{item.name}={default}")
    elif factory:
        params[default] = item.default_factory
        signature.append(f"{item.name}=_missing")
        return f"{default}() if {item.name} is _missing else {item.name}"
    else:
        signature.append(item.name)
    return item.name


def _check_generatable(cls: type[Any]) -> None:
    """Refuse, now rather than at its first instance, a class that a generated constructor
    cannot build: one without slots, or with an ``InitVar`` (it would not be passed on)."""
    for name in (item.name for item in dataclasses.fields(cls)):
        _slot(cls, name)
    if any(_is_init_var(item) for item in vars(cls)["__dataclass_fields__"].values()):
        raise TypeError(
            f"{cls.__name__} has an InitVar: a generated constructor would not pass it on"
        )


def _is_init_var(item: dataclasses.Field[Any]) -> bool:
    kind = item.type
    return isinstance(kind, dataclasses.InitVar) or (
        isinstance(kind, str) and kind.startswith(("InitVar", "dataclasses.InitVar"))
    )


def _slot(cls: type[Any], name: str) -> Any:
    """The descriptor of the slot `name` (on the class or a base; under `defer_fields`,
    the slot's own)."""
    for klass in cls.__mro__:
        found = vars(klass).get(name)
        if isinstance(found, _DeferringSlot):
            return found.slot
        if isinstance(found, MemberDescriptorType):
            return found
    raise TypeError(f"{cls.__name__}.{name} is not a slot: direct_init needs slots=True")


class Deferred:
    """A field's value not made yet, in a field that `defer_fields` set up: the field's
    first reading makes the value (`made`) and keeps it in the field instead."""

    __slots__ = ()

    def made(self) -> Any:
        """The value (made by the first call; a subclass says how)."""
        raise TypeError(f"{type(self).__name__} does not say how its value is made")


class _DeferringSlot:
    """The descriptor of a field under `defer_fields`: its slot's own, except that reading
    a `Deferred` there makes the value and puts it in the slot in the `Deferred`'s place."""

    __slots__ = ("slot",)

    def __init__(self, slot: MemberDescriptorType) -> None:
        self.slot = slot

    def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
        if instance is None:
            return self
        value = self.slot.__get__(instance, owner)
        if isinstance(value, Deferred):
            value = value.made()
            self.slot.__set__(instance, value)
        return value

    def __set__(self, instance: object, value: Any) -> None:
        self.slot.__set__(instance, value)

    def __delete__(self, instance: object) -> None:
        self.slot.__delete__(instance)


def defer_fields(*names: str) -> Callable[[C], C]:
    """Let the fields `names` of a frozen, slotted dataclass hold a `Deferred` (given to its
    constructor in place of the value), made into the value when the field is first read,
    by anyone: `dataclasses.replace`, equality and pickling read fields too, so they see
    the value, as the instance's users do. For a part of a result that most callers never
    read and that costs much to make (a task's trace). Apply it above ``@dataclass`` (and
    `direct_init`)."""

    def deferring(cls: C) -> C:
        for name in names:
            setattr(cls, name, _DeferringSlot(_slot(cls, name)))
        return cls

    return deferring
