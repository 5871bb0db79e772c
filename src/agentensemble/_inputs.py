"""Checking template inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from agentensemble.errors import ValidationError

__all__ = ["Inputs", "check_inputs", "input_text"]

Inputs: TypeAlias = Mapping[str, str | int | float | bool | None]
"""Template inputs as callers give them: numbers and booleans are used as text."""


def check_inputs(inputs: object, field: str) -> dict[str, str]:
    """Template inputs: a mapping of names to strings, numbers or booleans (used as text:
    ``31``, ``2.5``, ``true``); None values stay None (BEHAVIOUR 5: replaced by "")."""
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        raise ValidationError(f"{field} must be a mapping of names to strings, got: {inputs!r}")
    checked: dict[str, Any] = {}  # None values stay None
    for key, value in inputs.items():
        if not isinstance(key, str):
            raise ValidationError(f"{field} key must be a string, got: {key!r}")
        if value is not None and not isinstance(value, str | int | float):
            raise ValidationError(
                f"{field}['{key}'] must be a string, number or boolean, got: {value!r}"
            )
        checked[key] = value if value is None or isinstance(value, str) else input_text(value)
    return checked


def input_text(value: int | float | bool) -> str:
    """A number or boolean as a template input's text: ``31``, ``2.5``, ``true``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
