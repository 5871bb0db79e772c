"""The readable schema shown to the model (BEHAVIOUR 5.2), for every shape of type."""

from __future__ import annotations

from typing import Any, Literal, Union

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypeAliasType

from agentensemble._output_types import output_spec, type_name

from .models import Author, Person, Sentiment


class Tagged(BaseModel):
    title: str = Field(description="The headline,\n  one line")
    tags: list[str]
    scores: dict[str, float]
    mood: Sentiment
    level: Literal["low", "high"]
    note: str | None = None
    count: int | str


# mypy cannot follow a recursive alias declared through typing_extensions on 3.11
JsonValue = TypeAliasType(  # type: ignore[misc]
    "JsonValue",
    Union[dict[str, "JsonValue"], list["JsonValue"], str, int, None],  # type: ignore[misc]  # noqa: UP007
)


class Envelope(BaseModel):
    payload: JsonValue


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_a_model_with_every_kind_of_field() -> None:
    assert output_spec(Tagged).prompt_schema == (
        "{\n"
        '  "title": "string (The headline, one line)",\n'
        '  "tags": ["string"],\n'
        '  "scores": {"string": "number"},\n'
        '  "mood": "enum: positive, negative, neutral",\n'
        '  "level": "enum: low, high",\n'
        '  "note": "string | null",\n'
        '  "count": "integer | string"\n'
        "}"
    )


def test_nested_objects_and_arrays_of_objects_are_indented_by_depth() -> None:
    assert output_spec(Person).prompt_schema == (
        "{\n"
        '  "name": "string",\n'
        '  "address": {\n'
        '    "city": "string",\n'
        '    "zip": "string"\n'
        "  },\n"
        '  "langs": [\n'
        "    {\n"
        '      "name": "string"\n'
        "    }\n"
        "  ]\n"
        "}"
    )


def test_a_recursive_model_is_expanded_one_level() -> None:
    assert output_spec(Node).prompt_schema == (
        "{\n"
        '  "name": "string",\n'
        '  "children": [\n'
        "    {\n"
        '      "name": "string",\n'
        '      "children": ["object"]\n'
        "    }\n"
        "  ]\n"
        "}"
    )


def test_a_recursive_type_alias_renders_without_blowing_up() -> None:
    schema = output_spec(Envelope).prompt_schema
    assert schema.startswith('{\n  "payload": {"string": {"string": "object"} | ["object"]')
    assert len(schema) < 300


def test_deeply_nested_models_stop_at_depth_five() -> None:
    class L5(BaseModel):
        x: int

    class L4(BaseModel):
        l5: L5

    class L3(BaseModel):
        l4: L4

    class L2(BaseModel):
        l3: L3

    class L1(BaseModel):
        l2: L2

    class L0(BaseModel):
        l1: L1

    schema = output_spec(L0).prompt_schema
    assert '"l5": "object"' in schema
    assert '"x"' not in schema


@pytest.mark.parametrize(
    ("output_type", "schema"),
    [
        (int, '"integer"'),
        (float, '"number"'),
        (bool, '"boolean"'),
        (str, '"string"'),
        (Sentiment, '"enum: positive, negative, neutral"'),
        (Literal["only"], '"enum: only"'),
        (list[int], '["integer"]'),
        (list[Author], '[\n  {\n    "name": "string"\n  }\n]'),
        (dict[str, int], '{"string": "integer"}'),
        (dict, '{"string": "any"}'),
        (tuple[int, str], '["integer", "string"]'),
        (list, '["any"]'),
    ],
)
def test_top_level_shapes(output_type: Any, schema: str) -> None:
    assert output_spec(output_type).prompt_schema == schema


@pytest.mark.parametrize(
    ("output_type", "name"),
    [
        (Author, "Author"),
        (list[Author], "list[Author]"),
        (dict[str, int], "dict[str, int]"),
        (Literal["a", "b"], "Literal['a', 'b']"),
        (int | None, "int | None"),
        (tuple[int, ...], "tuple[int, ...]"),
    ],
)
def test_type_names_in_messages(output_type: Any, name: str) -> None:
    assert type_name(output_type) == name


def test_specs_are_built_once_per_type() -> None:
    assert output_spec(list[Author]) is output_spec(list[Author])
    assert output_spec(Author).is_object
    assert not output_spec(list[Author]).is_object
    assert output_spec(Sentiment).text_is_value
