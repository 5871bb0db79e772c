"""`direct_init`: a faster ``__init__`` for the frozen slotted dataclasses built on every run.

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__``;
setting each slot through its own descriptor does the same in half the time. The engine
builds several such objects for every fact of every run (events, trace records, metrics,
contexts), so the difference is a large part of its own cost per task.
"""

from __future__ import annotations

import dataclasses
from types import MemberDescriptorType
from typing import Any, TypeVar

__all__ = ["direct_init"]

C = TypeVar("C", bound=type)


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
    for name in (item.name for item in dataclasses.fields(cls)):
        _slot(cls, name)  # refuse a class without slots now, not at its first instance
    if any(_is_init_var(item) for item in vars(cls)["__dataclass_fields__"].values()):
        raise TypeError(f"{cls.__name__} has an InitVar: direct_init would not pass it on")

    def first_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if type(self) is not cls:
            original(self, *args, **kwargs)
            return
        fast = _fast_init(cls)
        fast.__wrapped__ = original
        setattr(cls, "__init__", fast)  # noqa: B010  (mypy refuses a plain assignment to __init__)
        fast(self, *args, **kwargs)

    first_init.__qualname__ = f"{cls.__qualname__}.__init__"
    first_init.__wrapped__ = original  # type: ignore[attr-defined]  # the signature to show
    setattr(cls, "__init__", first_init)  # noqa: B010
    return cls


def _fast_init(cls: type[Any]) -> Any:
    """The ``__init__`` of `cls` that sets each slot through its descriptor."""
    params: dict[str, Any] = {"_missing": dataclasses.MISSING}
    positional: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    for item in dataclasses.fields(cls):
        signature = keywords if item.kw_only else positional
        setter, default = f"_set_{item.name}", f"_default_{item.name}"
        params[setter] = _slot(cls, item.name).__set__
        value = item.name
        if not item.init:
            if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                continue  # set later (by __post_init__, say)
            factory = item.default_factory is not dataclasses.MISSING
            params[default] = item.default_factory if factory else item.default
            value = f"{default}()" if factory else default
        elif item.default is not dataclasses.MISSING:
            params[default] = item.default
            signature.append(f"{item.name}={default}")
        elif item.default_factory is not dataclasses.MISSING:
            params[default] = item.default_factory
            signature.append(f"{item.name}=_missing")
            value = f"{default}() if {item.name} is _missing else {item.name}"
        else:
            signature.append(item.name)
        body.append(f"    {setter}(self, {value})\n")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    arguments = ["self", *positional, *(["*", *keywords] if keywords else [])]
    lines = [f"def __init__({', '.join(arguments)}):\n", *(body or ["    pass\n"])]
    exec("".join(lines), params)  # generated from the class's own fields, as dataclasses does
    init = params["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


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
