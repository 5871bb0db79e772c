"""How structured data is written into prompts: as it came (JSON) or re-encoded as TOON
(BEHAVIOUR 15).

TOON (Token-Oriented Object Notation) writes a list of uniform objects as one header and a
row per object, which takes far fewer tokens than JSON. The encoder is the official
`toon-format` package (extra ``toon``), imported only when TOON is used.
"""

from __future__ import annotations

import json
import math
from typing import Any

from agentensemble._extras import require
from agentensemble.enums import ContextFormat

__all__ = ["encode_toon", "format_json_text", "format_value", "require_toon"]


def require_toon() -> None:
    """Raise ImportError naming the extra when the TOON encoder is not installed."""
    require("toon_format", "toon")


def encode_toon(value: Any) -> str:
    """`value` (anything pydantic can serialise: models, dataclasses, dicts...) as TOON."""
    from pydantic_core import to_jsonable_python

    toon = require("toon_format", "toon")
    encoded: str = toon.encode(to_jsonable_python(value, fallback=str))
    return encoded


def format_value(value: Any, context_format: ContextFormat) -> str:
    """A structured value as prompt text: None is ``null``, a string is itself, anything
    else is compact JSON or TOON."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if context_format is ContextFormat.TOON:
        return encode_toon(value)
    from pydantic_core import to_json

    return to_json(value, fallback=str).decode()


def format_json_text(text: str, context_format: ContextFormat) -> str:
    """JSON text (a tool result, say) in the run's format: unchanged for JSON; for TOON,
    an object or array re-encoded, and anything that is not JSON left as it is."""
    if context_format is not ContextFormat.TOON:
        return text
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return text
    try:
        value = json.loads(stripped, parse_constant=_reject, parse_float=_finite)
    except ValueError:
        return text
    return encode_toon(value) or text  # TOON writes an empty object as nothing


def _reject(constant: str) -> float:
    raise ValueError(f"{constant} has no TOON form")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} has no TOON form")
    return number
