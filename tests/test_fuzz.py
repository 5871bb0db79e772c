"""Fuzzing the parsers that read what models, users and files write (issue 27): arbitrary
input gives a result or one of the documented errors, never another exception and never a
hang. Each property has a fixed budget of examples so that the suite's time stays bounded;
hypothesis's deadline fails any single input that takes over a second."""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agentensemble import PromptTemplateError, ValidationError, tool
from agentensemble._output_types import output_spec
from agentensemble.execution._output_parsing import ParseFailure, parse_answer
from agentensemble.execution._templates import resolve_template
from agentensemble.observability import parse_event
from agentensemble.tools._calculator import CalculationError, evaluate
from agentensemble.tools._files import PathRefused, Sandbox
from agentensemble.tools._json_parser import JsonPathError, extract

BUDGET = settings(
    max_examples=300,
    deadline=timedelta(seconds=1),
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same inputs every run: CI stays reproducible
    database=None,  # and nothing is written beside the tests
)

JSONISH = st.text(alphabet=st.sampled_from(list('{}[]":,.0123456789-+eE tnrufalsTFN\\x\n')))
TEXT = st.one_of(st.text(max_size=200), JSONISH)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


class Report(BaseModel):
    title: str
    score: int
    tags: list[str]


def outcome(call: Any, *documented: type[Exception]) -> Any:
    """`call()`'s result, or the documented error it raised (any other propagates)."""
    try:
        return call()
    except documented as error:
        return error


REPORT = output_spec(Report)
NUMBERS = output_spec(list[float])


@BUDGET
@given(template=TEXT, inputs=st.dictionaries(st.text(max_size=8), st.text(max_size=8)))
def test_template_resolution(template: str, inputs: dict[str, str]) -> None:
    resolved = outcome(lambda: resolve_template(template, inputs), PromptTemplateError)
    if isinstance(resolved, PromptTemplateError):
        assert resolved.missing_variables
    else:
        assert isinstance(resolved, str)


@BUDGET
@given(answer=st.one_of(TEXT, JSON_VALUES.map(json.dumps)))
def test_the_structured_output_parser(answer: str) -> None:
    for spec in (REPORT, NUMBERS):
        try:
            value = parse_answer(answer, spec)
        except ParseFailure:
            continue
        assert isinstance(value, Report | list)


@tool
def book(city: str, nights: int, flexible: bool = False) -> str:
    """Book a stay."""
    return f"{city} x{nights}"


@BUDGET
@given(arguments=st.one_of(TEXT, JSON_VALUES.map(json.dumps)))
def test_tool_argument_parsing(arguments: str) -> None:
    result = asyncio.run(book.invoke(arguments))  # invalid arguments: a failed result
    assert result.is_success or result.error_message


@BUDGET
@given(expression=st.text(alphabet=st.sampled_from(list("0123456789+-*/%^().e x")), max_size=60))
def test_the_calculator(expression: str) -> None:
    try:
        value = evaluate(expression)
    except CalculationError:
        return
    assert isinstance(value, float)


@BUDGET
@given(path=st.text(max_size=30), document=st.one_of(TEXT, JSON_VALUES.map(json.dumps)))
def test_the_json_path_tool(path: str, document: str) -> None:
    found = outcome(lambda: extract(path, document), JsonPathError)
    assert not isinstance(found, JsonPathError) or str(found)


SANDBOX_ROOT = tempfile.mkdtemp(prefix="agentensemble-fuzz-")
PATH_PARTS = st.sampled_from(["..", ".", "a", "b.txt", "/", "~", "\x00", "//", "a/../..", "é"])


@BUDGET
@given(path=st.one_of(st.text(max_size=40), st.lists(PATH_PARTS, max_size=6).map("/".join)))
def test_the_file_sandbox_path_checks(path: str) -> None:
    sandbox = Sandbox.of(SANDBOX_ROOT)
    try:
        resolved = sandbox.resolve(path, "Path must not be blank")
    except PathRefused:
        return
    assert resolved == sandbox.real_root or resolved.startswith(sandbox.real_root + "/")


@BUDGET
@given(
    data=st.dictionaries(
        st.sampled_from(["type", "ensembleId", "seq", "timestamp", "taskId", "raw", "x"]),
        JSON_VALUES,
        max_size=7,
    )
    | st.fixed_dictionaries({"type": st.sampled_from(["task_completed", "token", "run_warning"])})
)
def test_parse_event_on_arbitrary_json(data: dict[str, Any]) -> None:
    event = outcome(lambda: parse_event(data), ValidationError)
    assert not isinstance(event, ValidationError) or str(event)
