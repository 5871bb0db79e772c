"""Keywords from CrewAI (and misspelt ones) get a ValidationError naming ours."""

from __future__ import annotations

from typing import Any

import pytest

from agentensemble import Agent, Ensemble, ScriptedModel, Task, ValidationError


def build(cls: Any, *args: Any, **keywords: Any) -> Any:
    """`cls(...)` with keywords a type checker would (rightly) refuse."""
    return cls(*args, **keywords)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: build(Task, "x", output_pydantic=dict), "'output_pydantic' is output_type="),
        (lambda: build(Task, "x", human_input=True), "'human_input' is review=Review.required"),
        (lambda: build(Ensemble, tasks=[], process="x"), "CrewAI's 'process' is workflow"),
        (lambda: build(Agent, "A", "g", max_iter=3, llm=ScriptedModel([])), "is max_iterations"),
        (lambda: build(Task, "x", contxt=[]), "Task has no field 'contxt': did you mean 'context'"),
    ],
)
def test_an_unknown_keyword_names_the_field_to_use(make: Any, expected: str) -> None:
    with pytest.raises(ValidationError, match=expected):
        make()


def test_other_type_errors_are_left_alone() -> None:
    with pytest.raises(TypeError, match="missing"):
        build(Agent)


def test_construction_still_works_and_copies_too() -> None:
    task = Task("Research", name="research")
    assert task.copy(description="Write").description == "Write"
    assert Agent("A", "g", llm=ScriptedModel([])).role == "A"
