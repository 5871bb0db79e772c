"""Run-time validation: every rule raises before any model call."""

from collections.abc import Callable
from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    PromptTemplateError,
    RunOptions,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
)
from agentensemble import run as quick_run


def model() -> ScriptedModel:
    return ScriptedModel(["unused"])


def assert_fails_before_any_model_call(
    ensemble: Ensemble, llm: ScriptedModel, message: str, error: type[Exception] = ValidationError
) -> None:
    with pytest.raises(error) as caught:
        ensemble.run()
    assert str(caught.value).startswith(message), str(caught.value)
    assert llm.requests == []


def test_no_tasks() -> None:
    llm = model()
    assert_fails_before_any_model_call(
        Ensemble(llm=llm), llm, "Ensemble must have at least one task"
    )


def test_task_without_any_model() -> None:
    llm = model()
    agent = Agent("Writer", "Write", llm=llm)
    ensemble = Ensemble(tasks=[Task("Write", agent=agent), Task("Orphan task")])
    assert_fails_before_any_model_call(
        ensemble,
        llm,
        "Task 'Orphan task' has no LLM available. Provide an explicit agent, a task-level llm, "
        "an ensemble-level llm, or configure a deterministic handler.",
    )


def test_circular_context() -> None:
    llm = model()
    a = Task("A")
    b = Task("B", context=[a])
    object.__setattr__(a, "context", (b,))  # a cycle cannot be built through the constructor
    assert_fails_before_any_model_call(
        Ensemble(tasks=[a, b], llm=llm, workflow=Workflow.SEQUENTIAL),
        llm,
        "Circular context dependency detected involving task: ",
    )


def test_forward_reference_under_sequential() -> None:
    llm = model()
    later = Task("Later")
    ensemble = Ensemble(
        tasks=[Task("Early", context=[later]), later], llm=llm, workflow=Workflow.SEQUENTIAL
    )
    assert_fails_before_any_model_call(
        ensemble,
        llm,
        "Task 'Early' references context task 'Later' which appears later in the task list. "
        "Context tasks must be executed before the tasks that reference them.",
    )


def test_context_task_missing_from_the_ensemble_under_sequential() -> None:
    llm = model()
    outside = Task("Outside")
    ensemble = Ensemble(
        tasks=[Task("Inside", context=[outside])], llm=llm, workflow=Workflow.SEQUENTIAL
    )
    assert_fails_before_any_model_call(
        ensemble,
        llm,
        "Task 'Inside' references context task 'Outside' which is not in the ensemble's task "
        "list. All context tasks must be included in the ensemble before they can be referenced.",
    )


def test_element_that_is_not_a_task() -> None:
    llm = model()
    assert_fails_before_any_model_call(
        Ensemble(tasks=[Task("ok"), "Write a poem"], llm=llm),  # type: ignore[list-item]
        llm,
        "Ensemble tasks[1] must be a Task, got: str",
    )


def test_validation_errors_win_over_template_errors() -> None:
    llm = model()
    ensemble = Ensemble(tasks=[Task("About {topic}", agent=None)])
    assert_fails_before_any_model_call(ensemble, llm, "Task 'About {topic}' has no LLM")


def test_missing_template_variables_fail_before_any_model_call() -> None:
    llm = model()
    ensemble = Ensemble(tasks=[Task("Write about {topic}"), Task("Then {a} and {b}")], llm=llm)
    assert_fails_before_any_model_call(
        ensemble, llm, "Missing template variables: [topic, a, b]", PromptTemplateError
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_tool_output_length": -2},
            "Ensemble max_tool_output_length must be -1 (unlimited) or >= 0, got: -2",
        ),
        (
            {"tool_log_truncate_length": "all"},
            "Ensemble tool_log_truncate_length must be an integer, got: 'all'",
        ),
        (
            {"workflow": "ROUND_ROBIN"},
            "Ensemble workflow must be one of [SEQUENTIAL, PARALLEL, HIERARCHICAL], "
            "got: 'ROUND_ROBIN'",
        ),
        (
            {"inputs": {"topic": [3]}},
            "Ensemble inputs['topic'] must be a string, number or boolean, got: [3]",
        ),
        ({"inputs": ["topic"]}, "Ensemble inputs must be a mapping of names to strings"),
        ({"tasks": Task("x")}, "Ensemble tasks must be a list of tasks, got a single Task"),
        ({"llm": 3.5}, "Ensemble llm must be a ChatModel"),
    ],
)
def test_field_errors_name_the_field_and_value(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Ensemble(**kwargs)
    assert str(caught.value).startswith(message)


def test_workflow_accepts_its_name_case_insensitively() -> None:
    # Ensemble.workflow is annotated `Workflow | None`, but names are accepted at run time.
    assert Ensemble(workflow="sequential").workflow is Workflow.SEQUENTIAL  # type: ignore[arg-type]


def test_run_options_are_validated() -> None:
    with pytest.raises(ValidationError, match="RunOptions max_tool_output_length must be -1"):
        RunOptions(max_tool_output_length=-7)


def test_run_inputs_are_validated() -> None:
    llm = model()
    with pytest.raises(ValidationError, match=r"run inputs\['x'\] must be a string, number"):
        Ensemble(tasks=[Task("t")], llm=llm).run(inputs={"x": {"y": 1}})  # type: ignore[dict-item]
    assert llm.requests == []


def test_numbers_and_booleans_are_inputs_as_text() -> None:
    llm = model()
    ensemble = Ensemble(
        tasks=[Task("Greet a {age}-year-old ({member}) at {height} m")],
        llm=llm,
        inputs={"age": 31, "member": True},
    )
    ensemble.run(inputs={"height": 1.8})
    assert "Greet a 31-year-old (true) at 1.8 m" in str(llm.requests[0])


def test_quick_run_arguments() -> None:
    with pytest.raises(ValidationError, match="model must not be null"):
        quick_run(None, "task")
    with pytest.raises(ValidationError, match="tasks must not be null or empty"):
        quick_run(model())


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Task("x", context=5), "Task context must be a list, got: int"),  # type: ignore[call-overload]
        (lambda: Ensemble(tasks=5), "Ensemble tasks must be a list, got: int"),  # type: ignore[arg-type]
        (lambda: Ensemble(listeners="progress"), "Ensemble listeners must be a list, got: str"),
        (lambda: Ensemble(on_task_start=5), "Ensemble on_task_start must be callable, got: 5"),  # type: ignore[arg-type]
        (
            lambda: Ensemble(agent_synthesizer=object()),  # type: ignore[arg-type]
            "Ensemble agent_synthesizer must have an async synthesize(description, llm) method",
        ),
    ],
)
def test_wrong_types_are_validation_errors(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make()
    assert str(caught.value).startswith(message)
