"""`UNSET`: the one "not given" of settings.

A setting whose default must not be mistaken for a choice (HIERARCHICAL-only settings on a
SEQUENTIAL run are errors, but only when the user set them) defaults to `UNSET`, never to a
copy of its value that is compared later. Its owner resolves it when constructed with
`resolve_int`: the setting then reads as its documented value, yet `is_given` still says it
was not given, and so does a copy made with `dataclasses.replace` (which passes the value
back in).
"""

from __future__ import annotations

from enum import Enum
from typing import Final, TypeVar

__all__ = ["UNSET", "Unset", "is_given", "resolve_int", "resolved"]

T = TypeVar("T")


class Unset(Enum):
    """The type of `UNSET` (an enum of one, so a checker narrows ``value is UNSET``)."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
"""A setting that was not given."""


class _DefaultInt(int):
    """An int setting that was not given, standing as its default: equal to that int in
    every use, and still known as not given."""

    __slots__ = ()

    def __repr__(self) -> str:
        return int.__repr__(self)


def resolve_int(value: int | Unset, default: int) -> int:
    """`value` when given, else `default` (read as `default`, known as not given). Anything
    else passes through unchanged for its owner's checks to reject."""
    return _DefaultInt(default) if value is UNSET else value


def is_given(value: object) -> bool:
    """Whether a setting was given: neither `UNSET` nor a default `resolve_int` stood in
    for it."""
    return value is not UNSET and not isinstance(value, _DefaultInt)


def resolved(value: T | Unset) -> T:
    """A setting its owner resolved when constructed (still `UNSET` here is a bug)."""
    if isinstance(value, Unset):
        raise AssertionError("a setting was read before its owner resolved it")
    return value
