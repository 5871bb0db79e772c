"""What a task's ``output_type`` means to the engine: a pydantic adapter, its JSON Schema
and the readable schema shown to the model (BEHAVIOUR 5.2).

`output_spec` checks a type once, when the task is built, and caches the result per type:
building a pydantic adapter and a schema costs milliseconds, a task run must not.
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentensemble.errors import ValidationError

__all__ = ["OutputSpec", "output_spec", "type_name"]

_MAX_DEPTH = 5
"""Objects nested deeper than this are shown as "object" in the prompt schema."""
_RECURSION_SHOWN = 2
"""How many times a recursive definition is expanded on one path of the prompt schema."""


@dataclass(frozen=True, slots=True, eq=False)
class OutputSpec:
    """A checked output type and everything derived from it."""

    type_: Any
    name: str
    """How messages name the type: ``Report``, ``list[Report]``, ``Literal['a', 'b']``."""
    adapter: Any
    """The pydantic ``TypeAdapter`` that validates answers."""
    json_schema: Mapping[str, Any]
    """The type's JSON Schema (what native structured output sends)."""
    prompt_schema: str
    """The readable schema of the ``## Output Format`` prompt section and retries."""
    text_is_value: bool
    """True when the type is a string: a bare-text answer is the value itself."""

    @property
    def is_object(self) -> bool:
        """True when answers are JSON objects (the only shape native modes accept)."""
        return _resolve(self.json_schema, self.json_schema).get("type") == "object"

    @property
    def is_array(self) -> bool:
        """True when answers are JSON arrays."""
        return _resolve(self.json_schema, self.json_schema).get("type") == "array"


def output_spec(output_type: Any, field: str = "Task output_type") -> OutputSpec:
    """The spec of `output_type`; raises `ValidationError` naming the type when pydantic
    cannot validate it or build a JSON Schema for it, and for None, bare tuples and Any."""
    try:
        # keyed by the repr too: A | B and B | A are equal but validate in their own order
        return _cached_spec(output_type, repr(output_type), field)
    except TypeError as error:  # an unhashable type form: not cached
        if "unhashable" not in str(error):
            raise
        return _build_spec(output_type, field)


@functools.lru_cache(maxsize=256)
def _cached_spec(output_type: Any, shown: str, field: str) -> OutputSpec:
    return _build_spec(output_type, field)


def _build_spec(output_type: Any, field: str) -> OutputSpec:
    import pydantic

    name = type_name(output_type)
    _reject_shapeless(output_type, name, field)
    try:
        adapter = pydantic.TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as error:
        raise _unsupported(name, field, error) from None
    except (TypeError, ValueError, AttributeError) as error:  # not a type form at all
        raise _unsupported(name, field, error) from None
    resolved = _resolve(schema, schema)
    return OutputSpec(
        type_=output_type,
        name=name,
        adapter=adapter,
        json_schema=schema,
        prompt_schema=_Renderer(schema).render(schema, 0),
        text_is_value=resolved.get("type") == "string",
    )


def _reject_shapeless(output_type: Any, name: str, field: str) -> None:
    if output_type is type(None):
        raise ValidationError(
            f"{field} must not be NoneType: a task with no structured result needs no output_type"
        )
    if output_type is tuple or output_type is typing.Tuple:  # noqa: UP006
        raise ValidationError(
            f"{field} must not be a bare tuple: use tuple[X, ...], list[X] or a model"
        )
    is_type_form = isinstance(output_type, type) or typing.get_origin(output_type) is not None
    if not is_type_form and output_type is not Any:
        raise ValidationError(
            f"{field} must be a type (a model, dataclass, list[X]...), got: {output_type!r}"
        )
    if output_type is Any or output_type is object:
        raise ValidationError(
            f"{field} must be a concrete type such as a pydantic model, got: {name}"
        )


def _unsupported(name: str, field: str, error: Exception) -> ValidationError:
    detail = str(error).splitlines()[0] if str(error) else type(error).__name__
    return ValidationError(
        f"{field} {name} is not supported: pydantic cannot validate it or build a JSON "
        f"Schema for it ({detail})"
    )


def type_name(type_: Any) -> str:
    """A short, readable name: ``Report``, ``list[Report]``, ``dict[str, int]``."""
    if type_ is type(None):
        return "None"
    if type_ is Ellipsis:
        return "..."
    if typing.get_origin(type_) is typing.Annotated:
        return type_name(typing.get_args(type_)[0])
    if isinstance(type_, type) and not typing.get_args(type_):
        return type_.__name__
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(arg) for arg in args)}]"
    if origin is not None and args:
        base = getattr(origin, "__name__", None) or str(origin).replace("typing.", "")
        if origin is typing.Union or base == "UnionType":
            return " | ".join(type_name(arg) for arg in args)
        return f"{base}[{', '.join(type_name(arg) for arg in args)}]"
    return str(type_).replace("typing.", "")


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """`node` with a ``$ref`` (or a single ``allOf``) followed to its definition."""
    for _ in range(32):  # bounded: a $ref chain cannot loop forever
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            node = root.get("$defs", {}).get(name, {})
        elif "allOf" in node and len(node["allOf"]) == 1:
            node = node["allOf"][0]
        else:
            break
    return node


class _Renderer:
    """Renders a JSON Schema as the readable pseudo-schema of BEHAVIOUR 5.2::

    {
      "title": "string",
      "tags": ["string"],
      "count": "integer"
    }
    """

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.path: list[str] = []
        """The definitions being rendered: a recursive type is shown to one level."""

    def render(self, node: Mapping[str, Any], depth: int) -> str:
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return self._render(_resolve(node, self.root), depth)
        if self.path.count(ref) >= _RECURSION_SHOWN:
            return _quoted("object")
        self.path.append(ref)
        try:
            return self._render(_resolve(node, self.root), depth)
        finally:
            self.path.pop()

    def _render(self, node: Mapping[str, Any], depth: int) -> str:
        if depth > _MAX_DEPTH + 2:  # deep maps and lists
            return _quoted("any")
        variants = node.get("anyOf") or node.get("oneOf")
        if variants:
            return self._union(variants, depth)
        if "enum" in node:
            return _quoted("enum: " + ", ".join(_plain(value) for value in node["enum"]))
        if "const" in node:
            return _quoted("enum: " + _plain(node["const"]))
        kind = node.get("type")
        if isinstance(kind, list):
            return _quoted(" | ".join(str(item) for item in kind))
        if kind == "object":
            return self._object(node, depth)
        if kind == "array":
            return self._array(node, depth)
        if kind is None:
            return _quoted("any")
        return _quoted(_scalar(node))

    def _union(self, variants: list[Mapping[str, Any]], depth: int) -> str:
        shown = [self.render(v, depth) for v in variants if _resolve(v, self.root) != _NULL]
        nullable = len(shown) < len(variants)
        if len(shown) == 1 and not nullable:
            return shown[0]
        if all(text.startswith('"') for text in shown):  # scalars: one "a | b | null" string
            parts = [json.loads(text) for text in shown] + (["null"] if nullable else [])
            return _quoted(" | ".join(parts))
        return " | ".join(shown)  # a structure, possibly null: the structure is what matters

    def _object(self, node: Mapping[str, Any], depth: int) -> str:
        properties: Mapping[str, Any] = node.get("properties") or {}
        if not properties:
            values = node.get("additionalProperties")
            if isinstance(values, Mapping):
                return f'{{"string": {self.render(values, depth + 1)}}}'
            return '{"string": "any"}' if values is True else "{}"
        if depth >= _MAX_DEPTH:
            return _quoted("object")
        inner, outer = "  " * (depth + 1), "  " * depth
        lines = [
            f"{inner}{json.dumps(name)}: {self._field(schema, depth + 1)}"
            for name, schema in properties.items()
        ]
        return "{\n" + ",\n".join(lines) + f"\n{outer}}}"

    def _field(self, schema: Mapping[str, Any], depth: int) -> str:
        text = self.render(schema, depth)
        description = schema.get("description") or _resolve(schema, self.root).get("description")
        if description and text.startswith('"') and not text.startswith('"enum'):
            return _quoted(f"{json.loads(text)} ({' '.join(str(description).split())})")
        return text

    def _array(self, node: Mapping[str, Any], depth: int) -> str:
        prefix = node.get("prefixItems")
        if prefix:
            return "[" + ", ".join(self.render(item, depth) for item in prefix) + "]"
        items = node.get("items")
        item = self.render(items, depth + 1) if isinstance(items, Mapping) else '"any"'
        if "\n" not in item:
            return f"[{item}]"
        inner, outer = "  " * (depth + 1), "  " * depth
        return f"[\n{inner}{item}\n{outer}]"


_NULL = {"type": "null"}


def _scalar(node: Mapping[str, Any]) -> str:
    kind = str(node["type"])
    form = node.get("format")
    return f"{kind} ({form})" if form else kind


def _quoted(text: str) -> str:
    return json.dumps(text)


def _plain(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)
