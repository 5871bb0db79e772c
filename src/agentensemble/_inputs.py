"""Checking template inputs."""

from __future__ import annotations

from collections.abc import Mapping

from agentensemble.errors import ValidationError

__all__ = ["check_inputs"]


def check_inputs(inputs: object, field: str) -> dict[str, str]:
    """Template inputs must be a mapping of names to strings."""
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        raise ValidationError(f"{field} must be a mapping of names to strings, got: {inputs!r}")
    for key, value in inputs.items():
        if not isinstance(key, str):
            raise ValidationError(f"{field} key must be a string, got: {key!r}")
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"{field}['{key}'] must be a string, got: {value!r}")
    return dict(inputs)
