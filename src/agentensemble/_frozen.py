"""`direct_init`: a faster ``__init__`` for the frozen slotted dataclasses built on every run
(and `direct_maker`, a faster constructor still, for the events of a task).

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__``;
setting each slot through its own descriptor does the same in half the time. The engine
builds several such objects for every fact of every run (events, trace records, metrics,
contexts), so the difference is a large part of its own cost per task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, TypeVar

__all__ = ["direct_init", "direct_maker"]

C = TypeVar("C", bound=type)
T = TypeVar("T")


def direct_init(cls: C) -> C:
    """Give a frozen, slotted dataclass an ``__init__`` with the same arguments and defaults
    (factories included) that sets each slot through its descriptor, then calls
    ``__post_init__`` if the class has one. The class stays frozen for everyone else, and
    `dataclasses.replace` works as before. Apply it above ``@dataclass``, on classes without
    ``InitVar`` pseudo-fields (they would not be passed on).

    The new ``__init__`` is written when the first instance is made, so importing the class
    costs nothing more. It keeps the original's signature for `inspect` and ``help()``; a
    subclass made before that first instance keeps the dataclass's own."""
    original = vars(cls)["__init__"]
    _check_generatable(cls)

    def first_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if type(self) is not cls:
            original(self, *args, **kwargs)
            return
        fast = _generated(cls)
        fast.__wrapped__ = original
        setattr(cls, "__init__", fast)  # noqa: B010  (mypy refuses a plain assignment to __init__)
        fast(self, *args, **kwargs)

    first_init.__qualname__ = f"{cls.__qualname__}.__init__"
    first_init.__wrapped__ = original  # type: ignore[attr-defined]  # the signature to show
    setattr(cls, "__init__", first_init)  # noqa: B010
    return cls


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
    cls: type[Any], *, packed: tuple[str, ...] | None = None, leading: tuple[str, ...] = ()
) -> Any:
    """The ``__init__`` of `cls` that sets each slot through its descriptor; with `packed`,
    the `direct_maker` constructor instead (every other field keyword-only)."""
    params: dict[str, Any] = {"_missing": dataclasses.MISSING, "_cls": cls, "_new": object.__new__}
    positional: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    given = {*(packed or ()), *leading}
    for item in dataclasses.fields(cls):
        setter = f"_set_{item.name}"
        params[setter] = _slot(cls, item.name).__set__
        if item.name in given:
            value: str | None = item.name
        else:
            signature = keywords if item.kw_only or packed is not None else positional
            value = _argument(item, params, signature)
        if value is not None:
            body.append(f"    {setter}(self, {value})\n")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    if packed is None:
        name, head = "__init__", ["self"]
    else:
        name, head = "make", ["values", *leading]
        unpack = [f"    ({', '.join(packed)},) = values\n"] if packed else []
        body = ["    self = _new(_cls)\n", *unpack, *body, "    return self\n"]
    arguments = [*head, *positional, *(["*", *keywords] if keywords else [])]
    lines = [f"def {name}({', '.join(arguments)}):\n", *(body or ["    return None\n"])]
    exec("".join(lines), params)  # generated from the class's own fields, as dataclasses does
    made = params[name]
    made.__qualname__ = f"{cls.__qualname__}.{name}"
    return made


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
    """The descriptor of the slot `name` (on the class or a base)."""
    for klass in cls.__mro__:
        found = vars(klass).get(name)
        if isinstance(found, MemberDescriptorType):
            return found
    raise TypeError(f"{cls.__name__}.{name} is not a slot: direct_init needs slots=True")
