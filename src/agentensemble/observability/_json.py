"""`json_data`: a value's JSON form, the way events carry outputs and tool results."""

from __future__ import annotations

from typing import Any

__all__ = ["json_data"]


def json_data(value: object) -> Any:
    """`value` as plain JSON data (models, dataclasses, dates... converted; what cannot be
    converted becomes its repr; NaN and infinities become None)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=repr, inf_nan_mode="null", bytes_mode="base64")
