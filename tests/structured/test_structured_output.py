"""Task(output_type=...): prompts, parsing, correction retries and their errors (BEHAVIOUR
3.2, 5.3), for every family of output type."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentensemble import (
    Agent,
    Ensemble,
    OutputParsingError,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolResult,
    ValidationError,
    Workflow,
)
from agentensemble.models import SystemMessage, UserMessage

from .models import Author, Report, Sentiment

REPORT = {"title": "Q3", "score": 8, "tags": ["a"]}
REPORT_JSON = '{"title": "Q3", "score": 8, "tags": ["a"]}'


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


def _writer(model: ScriptedModel) -> Agent:
    return Agent("Writer", "Write reports", llm=model)


def _run(task: Task[Any]) -> Any:
    return Ensemble(tasks=[task]).run().output_for(task)


FAMILIES: list[tuple[Any, str, Any]] = [
    (Report, REPORT_JSON, Report(title="Q3", score=8, tags=["a"])),
    (Point, '{"x": 1, "y": 2}', Point(1, 2)),
    (Movie, '{"title": "Heat", "year": 1995}', {"title": "Heat", "year": 1995}),
    (
        list[Author],
        '[{"name": "Ada"}, {"name": "Grace"}]',
        [Author(name="Ada"), Author(name="Grace")],
    ),
    (dict[str, int], '{"a": 1, "b": 2}', {"a": 1, "b": 2}),
    (Sentiment, '"positive"', Sentiment.POSITIVE),
    (Literal["calm", "tense"], "tense", "tense"),
    (int, "42", 42),
    (float, "2.5", 2.5),
    (bool, "false", False),
    (str, "Paris", "Paris"),
    (tuple[int, str], '[1, "a"]', (1, "a")),
]


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"), FAMILIES, ids=[str(f[0]) for f in FAMILIES]
)
def test_each_output_type_family_round_trips(output_type: Any, answer: str, expected: Any) -> None:
    model = ScriptedModel([answer])
    output = _run(Task("Produce it", agent=_writer(model), output_type=output_type))
    assert output.parsed_output == expected
    assert type(output.parsed_output) is type(expected)
    assert output.output_type is output_type
    assert output.raw == answer
    assert len(model.requests) == 1


def test_the_output_format_section_ends_the_user_prompt() -> None:
    model = ScriptedModel([REPORT_JSON])
    _run(Task("Write the Q3 report", "A short report", agent=_writer(model), output_type=Report))
    assert model.requests[0].messages[1].text == (
        "## Task\nWrite the Q3 report\n\n"
        "## Expected Output\nA short report\n\n"
        "## Output Format\n"
        "You MUST respond with ONLY valid JSON and nothing else. "
        "Do not include markdown fences, preamble, or explanation.\n"
        "Your response must be ONLY valid JSON matching this schema "
        "(object, array, or scalar as appropriate):\n\n"
        '{\n  "title": "string",\n  "score": "integer",\n  "tags": ["string"]\n}'
    )


def test_a_bad_answer_gets_a_fresh_two_message_correction_conversation() -> None:
    model = ScriptedModel(["Here you go: not json at all", f"```json\n{REPORT_JSON}\n```"])
    task = Task("Write the Q3 report", agent=_writer(model), output_type=Report)
    output = _run(task)

    assert output.parsed_output == Report.model_validate(REPORT)
    assert output.raw == f"```json\n{REPORT_JSON}\n```"  # the answer that parsed
    assert len(model.requests) == 2
    retry = model.requests[1]
    assert retry.tools == ()
    assert [type(m) for m in retry.messages] == [SystemMessage, UserMessage]
    assert retry.messages[0].text == model.requests[0].messages[0].text
    assert retry.messages[1].text == (
        "## Task\nWrite the Q3 report\n\n"  # restated: the retry is a fresh conversation
        "Your previous response could not be parsed as valid JSON.\n\n"
        "Error: Could not find valid JSON in response: Here you go: not json at all\n\n"
        "Your previous response was:\nHere you go: not json at all\n\n"
        "You MUST respond with ONLY valid JSON matching this schema (it may be an object, "
        "array, string, number, boolean, or null as required):\n"
        '{\n  "title": "string",\n  "score": "integer",\n  "tags": ["string"]\n}\n\n'
        "Do not include any explanation, markdown fences, or text before or after the JSON. "
        "Respond with only the JSON value."
    )
    assert output.metrics.llm_call_count == 2
    assert output.trace is not None
    assert len(output.trace.llm_interactions) == 2


def test_retries_are_counted_and_exhausted_into_an_output_parsing_error() -> None:
    answers = ["nope", '{"title": 1}', '{"title": "x", "score": "high", "tags": []}']
    model = ScriptedModel(answers)
    first = Task("Research", handler=lambda ctx: "kept")
    task = Task("Write it", agent=_writer(model), output_type=Report, max_output_retries=2)
    with pytest.raises(OutputParsingError) as raised:  # unwrapped, as BEHAVIOUR 5.3 says
        Ensemble(tasks=[first, task]).run()

    error = raised.value
    assert [o.raw for o in error.completed_outputs] == ["kept"]  # nothing completed is lost
    assert len(model.requests) == 3  # 1 + max_output_retries
    assert error.attempt_count == 3
    assert error.raw_output == answers[-1]
    assert error.output_type is Report
    assert error.parse_errors == (
        "Could not find valid JSON in response: nope",
        "JSON could not be deserialized as Report: title: Input should be a valid string; "
        "score: Field required; tags: Field required",
        "JSON could not be deserialized as Report: score: Input should be a valid integer, "
        "unable to parse string as an integer",
    )
    assert error.task_description == "Write it"
    assert error.agent_role == "Writer"
    assert str(error) == (
        "Structured output parsing failed for task 'Write it' after 3 attempt(s). "
        "Expected type: Report. Last error: JSON could not be deserialized as Report: score: "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    # each retry shows the previous answer and its own error
    assert 'Your previous response was:\n{"title": 1}' in str(model.requests[2].messages[1].text)


def test_zero_retries_means_one_attempt() -> None:
    model = ScriptedModel(["nope"])
    task = Task("Write it", agent=_writer(model), output_type=Report, max_output_retries=0)
    with pytest.raises(OutputParsingError) as raised:
        Ensemble(tasks=[task]).run()
    assert raised.value.attempt_count == 1
    assert len(model.requests) == 1


def test_a_parallel_parse_failure_is_a_task_failure_that_keeps_other_outputs() -> None:
    good = Task("Good", agent=_writer(ScriptedModel(["fine"])))
    bad = Task(
        "Bad", agent=_writer(ScriptedModel(["x", "y"])), output_type=int, max_output_retries=1
    )
    ensemble = Ensemble(tasks=[good, bad], workflow=Workflow.PARALLEL)
    with pytest.raises(TaskExecutionError) as raised:  # FAIL_FAST: the first failure
        ensemble.run()
    assert [o.raw for o in raised.value.completed_outputs] == ["fine"]
    cause = raised.value.__cause__
    assert isinstance(cause, OutputParsingError)
    assert cause.attempt_count == 2


def test_structured_context_reaches_the_next_task_as_clean_json_without_the_prose() -> None:
    writer = ScriptedModel(["Sure: " + REPORT_JSON + " Hope that helps."])
    reader = ScriptedModel(["done"])
    first = Task("Write it", agent=_writer(writer), output_type=Report)
    second = Task("Read it", agent=Agent("Reader", "Read", llm=reader), context=[first])
    Ensemble(tasks=[first, second]).run()
    prompt = str(reader.requests[0].messages[1].text)
    assert '### Writer: Write it\n{"title":"Q3","score":8,"tags":["a"]}\n---' in prompt
    assert "Hope that helps" not in prompt


def test_native_mode_sends_the_schema_to_models_that_support_it() -> None:
    native = ScriptedModel([REPORT_JSON], supports_output_schema=True)
    plain = ScriptedModel([REPORT_JSON])
    _run(Task("Write it", agent=_writer(native), output_type=Report))
    _run(Task("Write it", agent=_writer(plain), output_type=Report))

    settings = native.requests[0].settings
    assert settings is not None
    assert settings.output_schema == Report.model_json_schema()
    assert plain.requests[0].settings is None
    # the prompt path stays: both models get the same prompt
    assert native.requests[0].messages == plain.requests[0].messages


def test_native_mode_is_only_for_object_answers_and_never_overrides_a_set_schema() -> None:
    from agentensemble import ModelSettings

    native = ScriptedModel(["[]", "{}"], supports_output_schema=True)
    _run(Task("List", agent=_writer(native), output_type=list[Author]))
    mine = ModelSettings(output_schema={"type": "object"}, temperature=0.1)
    _run(Task("Mine", agent=_writer(native), output_type=dict[str, int], model_settings=mine))
    assert native.requests[0].settings is None
    assert native.requests[1].settings == mine


def test_a_handler_result_is_validated_as_the_output_type() -> None:
    structured = Task(
        "Make a point",
        handler=lambda ctx: ToolResult.success("1,2", structured={"x": 1, "y": 2}),
        output_type=Point,
    )
    textual = Task("Count", handler=lambda ctx: "42", output_type=int)
    wrong = Task("Oops", handler=lambda ctx: "forty-two", output_type=int)
    outputs = Ensemble(tasks=[structured, textual]).run()
    assert outputs.output_for(structured) is not None
    assert outputs.output_for(structured).parsed_output == Point(1, 2)  # type: ignore[union-attr]
    assert outputs.output_for(textual).parsed_output == 42  # type: ignore[union-attr]
    with pytest.raises(OutputParsingError) as raised:
        Ensemble(tasks=[wrong]).run()
    assert raised.value.attempt_count == 1


def test_parsed_checks_the_type() -> None:
    output = _run(Task("Write it", agent=_writer(ScriptedModel([REPORT_JSON])), output_type=Report))
    assert output.parsed(Report).title == "Q3"
    with pytest.raises(TypeError, match="not Author"):
        output.parsed(Author)


class Opaque:
    pass


@pytest.mark.parametrize(
    ("output_type", "message"),
    [
        (type(None), "Task output_type must not be NoneType"),
        (tuple, "Task output_type must not be a bare tuple"),
        (Opaque, "Task output_type Opaque is not supported: pydantic cannot"),
        (type, "Task output_type type is not supported"),
        (lambda: 1, "Task output_type must be a type"),
        (
            "Report",
            "Task output_type must be a type (a model, dataclass, list[X]...), got: 'Report'",
        ),
        (object, "Task output_type must be a concrete type such as a pydantic model, got: object"),
    ],
)
def test_unsupported_output_types_are_rejected_when_the_task_is_built(
    output_type: Any, message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Task("x", output_type=output_type)
    assert str(raised.value).startswith(message)


def test_max_output_retries_must_not_be_negative() -> None:
    with pytest.raises(ValidationError) as raised:
        Task("x", output_type=int, max_output_retries=-1)
    assert str(raised.value) == "Task max_output_retries must be >= 0, got: -1"


def test_unknown_fields_are_ignored_but_a_model_that_forbids_them_is_respected() -> None:
    class Strict(BaseModel, extra="forbid"):
        name: str

    loose = _run(
        Task("x", agent=_writer(ScriptedModel(['{"name": "a", "x": 1}'])), output_type=Author)
    )
    assert loose.parsed_output == Author(name="a")
    model = ScriptedModel(['{"name": "a", "x": 1}', '{"name": "a"}'])
    strict = _run(Task("x", agent=_writer(model), output_type=Strict))
    assert strict.parsed_output == Strict(name="a")
    assert len(model.requests) == 2


def test_a_rate_limited_model_keeps_its_native_mode() -> None:
    from agentensemble import RateLimit

    native = ScriptedModel([REPORT_JSON], supports_output_schema=True)
    agent = Agent("Writer", "Write", llm=native, rate_limit=RateLimit.per_second(100))
    _run(Task("Write it", agent=agent, output_type=Report))
    settings = native.requests[0].settings
    assert settings is not None
    assert settings.output_schema == Report.model_json_schema()


def test_a_parse_failure_in_a_phase_is_a_task_failure_of_that_task() -> None:
    from agentensemble import Phase

    done = Task("Collect", handler=lambda ctx: "kept")
    typed = Task(
        "Count", agent=_writer(ScriptedModel(["many"])), output_type=int, max_output_retries=0
    )
    one = Phase("one", [done])
    ensemble = Ensemble(phases=[one, Phase("two", [typed], after=[one])])
    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()
    assert raised.value.task_description == "Count"
    assert isinstance(raised.value.__cause__, OutputParsingError)
    assert [o.raw for o in raised.value.completed_outputs] == ["kept"]
