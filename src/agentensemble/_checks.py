"""Small validation helpers shared by the configuration classes."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agentensemble.errors import ValidationError

if TYPE_CHECKING:
    from decimal import Decimal

__all__ = [
    "as_tuple",
    "check_budget",
    "describe_validation_error",
    "is_blank",
    "items_of",
    "require_int",
    "require_seconds",
    "require_text",
    "unique_names",
    "unknown_methods",
]

T = TypeVar("T")


def is_blank(value: object) -> bool:
    """True for None and for strings that are empty or whitespace."""
    return value is None or (isinstance(value, str) and not value.strip())


def require_text(value: object, message: str) -> str:
    """Return `value` if it is non-blank text, else raise `ValidationError(message)`."""
    if is_blank(value):
        raise ValidationError(message)
    if not isinstance(value, str):
        raise ValidationError(f"{message.split(' must ')[0]} must be a string, got: {value!r}")
    return value


def require_int(value: object, field: str) -> int:
    """Return `value` if it is an int (not a bool), else raise naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer, got: {value!r}")
    return value


def check_budget(
    owner: str, max_tokens: object, max_cost: object, max_model_calls: object
) -> tuple[int | None, Decimal | None, int | None]:
    """The three budgets of `owner` (``RunOptions``, ``Task``), each None (no budget) or
    > 0: whole numbers of tokens and model calls, and a cost (an int, float or Decimal,
    kept as the Decimal written: ``0.1`` is exactly 0.1)."""
    return (
        _count(max_tokens, f"{owner} max_tokens"),
        None if max_cost is None else _amount(max_cost, f"{owner} max_cost"),
        _count(max_model_calls, f"{owner} max_model_calls"),
    )


def _count(value: object, field: str) -> int | None:
    if value is None:
        return None
    count = require_int(value, field)
    if count <= 0:
        raise ValidationError(f"{field} must be > 0 when set, got: {value}")
    return count


def _amount(value: object, field: str) -> Decimal:
    from decimal import Decimal  # with the first cost budget

    amount = value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        amount = Decimal(str(value))
    if not isinstance(amount, Decimal) or not amount.is_finite() or amount <= 0:
        raise ValidationError(f"{field} must be a positive number when set, got: {value!r}")
    return amount


def as_tuple(value: object, field: str) -> tuple[object, ...]:
    """A list-like setting as a tuple (None is empty); anything else names `field`."""
    if value is None:
        return ()
    if type(value) is tuple:  # as it is: the Iterable check below is an ABC's, and slow
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValidationError(f"{field} must be a list, got: {type(value).__name__}")
    return tuple(value)


def items_of(value: object, kind: type[T], field: str) -> tuple[T, ...]:
    """`as_tuple`, each item checked to be a `kind` (``Phase 'p' tasks[1] must be a Task,
    got: str``)."""
    items = as_tuple(value, field)
    article = "an" if kind.__name__[0] in "AEIOU" else "a"
    for index, item in enumerate(items):
        if not isinstance(item, kind):
            raise ValidationError(
                f"{field}[{index}] must be {article} {kind.__name__}, got: {type(item).__name__}"
            )
    return cast("tuple[T, ...]", items)


def unique_names(items: Iterable[Any], kind: str) -> None:
    """Raise when two of `items` (loops, phases) share a `name` within an ensemble."""
    names: set[str] = set()
    for item in items:
        if item.name in names:
            raise ValidationError(
                f"Duplicate {kind} name '{item.name}' detected. {kind.capitalize()} names must "
                "be unique within an ensemble."
            )
        names.add(item.name)


def require_seconds(value: object, field: str) -> float:
    """A duration (a timedelta, or seconds) as positive seconds, else a ValidationError."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValidationError(f"{field} must be a positive number of seconds, got: {value!r}")
    return float(seconds)


def describe_validation_error(error: Any, limit: int | None = None) -> str:
    """A pydantic ``ValidationError`` as ``field: problem; field: problem`` (at most `limit`
    problems, then how many more)."""
    items = error.errors(include_url=False)
    shown = items if limit is None else items[:limit]
    parts = []
    for item in shown:
        where = ".".join(str(part) for part in item["loc"])
        parts.append(f"{where}: {item['msg']}" if where else str(item["msg"]))
    if len(items) > len(shown):
        parts.append(f"and {len(items) - len(shown)} more")
    return "; ".join(parts)


def unknown_methods(obj: object, prefix: str, known: Collection[str]) -> list[str]:
    """The methods of `obj`'s class named `prefix...` that are not `known` (a misspelt hook
    or listener method, which would otherwise silently never run), sorted."""
    return sorted(name for name in dir(type(obj)) if name.startswith(prefix) and name not in known)
