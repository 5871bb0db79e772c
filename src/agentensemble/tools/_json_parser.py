"""`JsonParserTool` (``json_parser``): pick one value out of a JSON document by a path
(BEHAVIOUR 7.7).

Paths are dot-separated keys with ``[i]`` array indices: ``user.address.city``,
``items[0].title``, ``[0].name`` (an array at the root), ``matrix[0][1]``. A leading ``$``
(``$.user.name``) is accepted and means the root. Keys are taken literally between the dots
and brackets, so a key that contains ``.``, ``[`` or ``]`` cannot be addressed.

The value is returned as text: strings unquoted, integers as integers, other numbers as
Python's float text (``2.5``, ``1e+20``), ``true``/``false``, ``null``, and objects and arrays
as compact JSON. The parsed value itself is the result's structured output. JSON that Python
would accept but JSON does not (``NaN``, ``Infinity``, numbers beyond a double's range) is
invalid here.
"""

from __future__ import annotations

import json as jsonlib
from typing import Annotated, Any

from pydantic import Field

from agentensemble.tools._function import tool
from agentensemble.tools._result import ToolResult

__all__ = ["JsonParserTool"]

MAX_PATH_LENGTH = 1_000

PathStep = str | int
"""A key of an object or an index of an array."""


class JsonPathError(Exception):
    """A path that cannot be followed or JSON that cannot be read; shown to the model."""


class JsonParserTool:
    """Give it to an agent (``tools=[JsonParserTool()]``) so that it reads values out of
    JSON exactly instead of by eye.

    ``json_parser(json_path="items[0].title", json='{"items": [{"title": "A"}]}')``
    returns ``"A"``. See the module documentation for paths and output formats.
    """

    @tool(name="json_parser")
    def json_parser(
        self,
        json_path: Annotated[
            str,
            Field(description="Path to the value, e.g. 'user.address.city' or 'items[0].title'"),
        ],
        json: Annotated[str, Field(description="The JSON document, as a string")],
    ) -> ToolResult:
        """Extract one value from a JSON document by a dot path with [index] array
        access. Strings come back unquoted, objects and arrays as compact JSON."""
        try:
            value = extract(json_path, json)
        except JsonPathError as error:
            return ToolResult.failure(str(error))
        structured = value if _depth_at_most(value, MAX_STRUCTURED_DEPTH) else None
        return ToolResult.success(as_text(value), structured=structured)

    def __repr__(self) -> str:
        return "JsonParserTool()"


MAX_STRUCTURED_DEPTH = 64
"""Values nested deeper go back as text only: traces and events could not serialise them."""


def _depth_at_most(value: Any, limit: int) -> bool:
    """Whether `value` nests lists and objects no deeper than `limit`."""
    if not isinstance(value, (dict, list)):
        return True
    if limit == 0:
        return False
    children = value.values() if isinstance(value, dict) else value
    return all(_depth_at_most(child, limit - 1) for child in children)


def extract(path: str, document: str) -> Any:
    """The value at `path` in the JSON text `document`; raises `JsonPathError`."""
    path = path.strip()
    if not path:
        raise JsonPathError("Path expression must not be blank")
    if not document.strip():
        raise JsonPathError("JSON content must not be blank")
    steps = parse_path(path)
    return _follow(_load(document), steps, path)


def parse_path(path: str) -> list[PathStep]:
    """The keys and indices of a path such as ``a.b[0][1].c``; raises `JsonPathError`."""
    if len(path) > MAX_PATH_LENGTH:
        raise JsonPathError(
            f"Path expression is too long ({len(path)} characters; the limit is {MAX_PATH_LENGTH})"
        )
    text = _without_root_marker(path)
    steps: list[PathStep] = []
    position = 0
    while text:
        key_end = _key_end(text, position)
        key = text[position:key_end]
        if key:
            steps.append(key)
        elif not (position == 0 and text.startswith("[")):
            raise _invalid_path("empty key", path)
        position = _read_indices(text, key_end, steps, path)
        if position == len(text):
            return steps
        if text[position] != ".":
            where = len(path) - len(text) + position
            raise _invalid_path(f"unexpected '{text[position]}' at position {where}", path)
        position += 1
    return steps


def as_text(value: Any) -> str:
    """The text a model sees for a JSON value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return jsonlib.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _without_root_marker(path: str) -> str:
    if path == "$":
        return ""
    if path.startswith("$."):
        return path[2:]
    if path.startswith("$["):
        return path[1:]
    return path


def _key_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] not in ".[]":
        end += 1
    return end


def _read_indices(text: str, position: int, steps: list[PathStep], path: str) -> int:
    """Append the ``[i]`` indices starting at `position`; the position after them."""
    while position < len(text) and text[position] == "[":
        close = text.find("]", position)
        if close < 0:
            raise _invalid_path("'[' without a closing ']'", path)
        digits = text[position + 1 : close]
        if not (digits.isascii() and digits.isdigit()):
            raise _invalid_path(
                f"array index must be a non-negative integer, got '[{digits}]'", path
            )
        steps.append(int(digits))
        position = close + 1
    return position


def _invalid_path(detail: str, path: str) -> JsonPathError:
    return JsonPathError(f"Invalid path expression: {detail} in '{path}'")


def _load(document: str) -> Any:
    try:
        return jsonlib.loads(document, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise JsonPathError("Invalid JSON: nested too deeply") from None
    except ValueError as error:  # JSONDecodeError and the rejections below
        raise JsonPathError(f"Invalid JSON: {error}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return number


def _follow(node: Any, steps: list[PathStep], path: str) -> Any:
    for step in steps:
        if isinstance(step, str):
            if not isinstance(node, dict):
                raise JsonPathError(f"Path not found: '{path}'")
            if step not in node:
                raise JsonPathError(f"Path not found: '{step}'")
            node = node[step]
        else:
            if not isinstance(node, list):
                raise JsonPathError(f"Path not found: '{path}'")
            if step >= len(node):
                raise JsonPathError(
                    f"Array index out of bounds: index {step} is out of bounds for array of "
                    f"size {len(node)}"
                )
            node = node[step]
    return node
