"""Finding and validating JSON in model answers (BEHAVIOUR 5.1, 5.2), on a corpus of the
ways real models answer."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import pytest

from agentensemble._output_types import output_spec
from agentensemble.execution._output_parsing import ParseFailure, json_candidates, parse_answer

from .models import Author, Person, Report, Sentiment

CORPUS = json.loads((Path(__file__).parent.parent / "data" / "model_replies.json").read_text())
TYPES: dict[str, Any] = {
    "report": Report,
    "nested": Person,
    "authors": list[Author],
    "int": int,
    "bool": bool,
    "str": str,
    "float": float,
    "sentiment": Sentiment,
    "scores": dict[str, int],
}


def _plain(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


def test_the_corpus_is_large_and_mixed() -> None:
    assert len(CORPUS) >= 100  # drafts, reasoning blocks, examples, placeholders, literals...
    assert sum(case["expected"] is None for case in CORPUS) >= 25  # failures are covered too
    assert {case["type"] for case in CORPUS} == set(TYPES)


@pytest.mark.parametrize("case", CORPUS, ids=[case["name"] for case in CORPUS])
def test_corpus_reply(case: dict[str, Any]) -> None:
    spec = output_spec(TYPES[case["type"]])
    if case["expected"] is not None:
        assert _plain(parse_answer(case["reply"], spec)) == case["expected"]
    else:
        with pytest.raises(ParseFailure) as failure:
            parse_answer(case["reply"], spec)
        assert case["error"] in str(failure.value)


def test_extraction_tries_fences_then_the_whole_text_then_spans_in_prose_last_first() -> None:
    text = 'Before {"a": 1} ```json\n{"b": 2}\n``` after [3]'
    assert list(json_candidates(text)) == ['{"b": 2}', "[3]", '{"a": 1}']


def test_a_nested_object_in_prose_is_kept_whole() -> None:
    # the reference's non-greedy scan would stop at the first "}" and fail
    assert list(json_candidates('Here: {"a": {"b": [1, {"c": 2}]}} ok')) == [
        '{"a": {"b": [1, {"c": 2}]}}'
    ]


def test_the_last_of_two_objects_in_prose_comes_first() -> None:
    # the reference takes the first ("Here is data: {"x": 1} and more: {"y": 2}" -> x);
    # models write drafts and then the final object, so the last one is tried first
    # (issue 27, item 22); an earlier one is still tried when the last does not validate
    candidates = list(json_candidates('Here is data: {"x": 1} and more: {"y": 2}'))
    assert candidates == ['{"y": 2}', '{"x": 1}']


def test_an_answer_that_never_closes_is_offered_once_for_its_error() -> None:
    assert list(json_candidates('Result: {"a": [1, 2')) == ['{"a": [1, 2']


def test_mismatched_brackets_are_skipped() -> None:
    assert list(json_candidates('odd (] text {"a": 1]} then {"b": 2}')) == ['{"b": 2}']


def test_no_json_message_shows_at_most_200_characters() -> None:
    spec = output_spec(Report)
    with pytest.raises(ParseFailure) as failure:
        parse_answer("x" * 300, spec)
    assert str(failure.value) == f"Could not find valid JSON in response: {'x' * 200}..."


def test_a_deserialisation_error_names_the_type_and_the_fields() -> None:
    with pytest.raises(ParseFailure) as failure:
        parse_answer('{"title": 1}', output_spec(Report))
    assert str(failure.value) == (
        "JSON could not be deserialized as Report: title: Input should be a valid string; "
        "score: Field required; tags: Field required"
    )


def test_prose_with_hundreds_of_brackets_stays_bounded() -> None:
    text = "[x] " * 500 + '{"title": "t", "score": 1, "tags": []}'
    with pytest.raises(ParseFailure):  # only the first spans are tried
        parse_answer(text, output_spec(Report))


class Priority(enum.Enum):
    HIGH = "high"
    LOW = "low"


@pytest.mark.parametrize(
    "answer", ["high", "HIGH", "High", "**high**", "`high`", '"High"', "Priority: high."]
)
def test_an_enum_is_read_as_people_write_it(answer: str) -> None:
    assert parse_answer(answer, output_spec(Priority)) is Priority.HIGH


def test_an_enum_answer_naming_two_members_is_not_guessed() -> None:
    with pytest.raises(ParseFailure, match="Input should be 'high' or 'low'"):
        parse_answer("high or low, hard to say", output_spec(Priority))


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("true", True), ("True", True), ("yes", True), ("Yes.", True), ("no", False), ("NO", False)],
)
def test_a_bool_is_read_as_people_write_it(answer: str, expected: bool) -> None:
    assert parse_answer(answer, output_spec(bool)) is expected


def test_a_bool_that_is_not_one_still_fails() -> None:
    with pytest.raises(ParseFailure):
        parse_answer("perhaps", output_spec(bool))
