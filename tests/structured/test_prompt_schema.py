"""The readable schema shown to the model (BEHAVIOUR 5.2), for every shape of type."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

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


def test_recursive_models_stop_at_depth_five() -> None:
    schema = output_spec(Node).prompt_schema
    assert schema.count('"name": "string"') == 3
    assert '"children": ["object"]' in schema


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
