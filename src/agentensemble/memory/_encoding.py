"""JSON text of what entries carry, for the SQLite stores."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

__all__ = ["json_text"]


def json_text(value: Any) -> str:
    """JSON text of `value`. Plain JSON data is encoded as is; anything else (a pydantic
    model, a dataclass, a datetime, a set) through pydantic's conversion, with ``str`` for
    what that cannot convert, so that storing never fails on the value's type."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        plain = to_jsonable_python(value, fallback=str)
    try:
        return json.dumps(plain, ensure_ascii=False)
    except (TypeError, ValueError):  # a circular structure, say
        return json.dumps(str(value), ensure_ascii=False)
