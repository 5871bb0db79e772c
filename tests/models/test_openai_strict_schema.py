"""The JSON Schema OpenAIChatModel sends as response_format (strict mode where it can)."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from agentensemble.models._openai import _response_format


class Inner(BaseModel):
    v: int


class Cat(BaseModel):
    kind: Literal["cat"]


class Dog(BaseModel):
    kind: Literal["dog"]


class Outer(BaseModel):
    inner: Inner = Field(description="the inner one")
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    note: str | None = None


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Loose(BaseModel):
    counts: dict[str, int]


def _objects(schema: object) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found += _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _objects(value)
    return found


def test_every_object_is_closed_and_requires_all_its_properties() -> None:
    sent = _response_format(Outer.model_json_schema())["json_schema"]
    assert sent["strict"] is True
    assert sent["name"] == "Outer"
    for obj in _objects(sent["schema"]):
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj.get("properties", {}))  # type: ignore[call-overload]
    assert "default" not in json.dumps(sent["schema"])


def test_a_ref_with_a_description_is_inlined_and_one_of_becomes_any_of() -> None:
    schema = _response_format(Outer.model_json_schema())["json_schema"]["schema"]
    inner = schema["properties"]["inner"]
    assert "$ref" not in inner
    assert inner["description"] == "the inner one"
    assert inner["properties"] == {"v": {"title": "V", "type": "integer"}}
    pet = schema["properties"]["pet"]
    assert "oneOf" not in pet
    assert "discriminator" not in pet
    assert pet["anyOf"] == [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]


def test_a_recursive_model_gets_an_object_at_the_root() -> None:
    sent = _response_format(Node.model_json_schema())["json_schema"]
    assert sent["name"] == "Node"
    assert sent["strict"] is True
    assert sent["schema"]["type"] == "object"
    assert sent["schema"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_a_free_form_mapping_is_sent_without_strict_mode() -> None:
    schema = Loose.model_json_schema()
    sent = _response_format(schema)["json_schema"]
    assert sent["strict"] is False
    assert sent["schema"] == schema


def test_the_callers_schema_is_never_changed_or_shared() -> None:
    schema = Outer.model_json_schema()
    before = json.dumps(schema)
    sent = _response_format(schema)["json_schema"]["schema"]
    assert json.dumps(schema) == before
    assert sent["$defs"] is not schema["$defs"]
