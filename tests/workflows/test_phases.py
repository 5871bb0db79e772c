"""Phases (BEHAVIOUR §9.7): a DAG of task groups."""

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentensemble import (
    Ensemble,
    FunctionModel,
    Phase,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ValidationError,
    Workflow,
)
from agentensemble.models import Message, ToolSpec, UserMessage

from .test_parallel import TIMEOUT, Gates


def ok_model() -> FunctionModel:
    return FunctionModel(lambda messages, tools: "ok")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Phase(" ", [Task("x")]), "Phase name must not be null or blank"),
        (lambda: Phase("empty", []), "Phase 'empty' must contain at least one task"),
        (lambda: Phase("p", ["task"]), "Phase 'p' tasks[0] must be a Task, got: str"),  # type: ignore[list-item]
        (
            lambda: Phase("p", [Task("x")], workflow=Workflow.HIERARCHICAL),
            "Phase 'p': Workflow.HIERARCHICAL is not supported at the phase level. Use "
            "HIERARCHICAL at the ensemble level (without phases) for hierarchical delegation.",
        ),
        (lambda: Phase("p", [Task("x")], after=["q"]), "Phase 'p' after[0] must be a Phase"),  # type: ignore[list-item]
    ],
)
def test_phase_construction_errors(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make()
    assert str(caught.value).startswith(message)


def ensemble_error(**kwargs: Any) -> str:
    llm = kwargs.pop("llm", ok_model())
    with pytest.raises(ValidationError) as caught:
        Ensemble(llm=llm, **kwargs).run()
    if llm is not None:
        assert llm.requests == []
    return str(caught.value)


def test_ensemble_phase_validation() -> None:
    a = Phase.of("a", Task("x"))
    assert ensemble_error(tasks=[Task("y")], phases=[a]).startswith(
        "Cannot mix tasks and phases on the same Ensemble."
    )
    assert ensemble_error(phases=[a, Phase.of("a", Task("z"))]) == (
        "Duplicate phase name 'a' detected. Phase names must be unique within an ensemble."
    )
    assert ensemble_error(phases=[Phase("b", [Task("z")], after=[a])]) == (
        "Phase 'b' runs after phase 'a', which is not in the ensemble's phases"
    )
    shared = Task("shared")
    assert ensemble_error(phases=[Phase.of("p", shared), Phase.of("q", shared)]) == (
        "Task 'shared' appears in phase 'p' and in phase 'q'. A task belongs to exactly one phase."
    )
    assert ensemble_error(
        phases=[Phase.of("p", Task("x"))], workflow=Workflow.HIERARCHICAL
    ).startswith("Phase 'p': Workflow.HIERARCHICAL is not supported")
    assert ensemble_error(phases=[Phase.of("p", Task("lonely"))], llm=None) == (
        "Task 'lonely' in phase 'p' has no LLM available. Provide an explicit agent, a "
        "task-level llm, an ensemble-level llm, or configure a deterministic handler."
    )


def test_circular_phase_dependency() -> None:
    a = Phase.of("a", Task("x"))
    b = Phase("b", [Task("y")], after=[a])
    object.__setattr__(a, "after", (b,))  # a cycle cannot be built through the constructor
    assert ensemble_error(phases=[a, b]).startswith(
        "Circular phase dependency detected involving phase '"
    )


def test_context_must_come_from_the_same_phase_or_one_it_runs_after() -> None:
    left_task, right_task = Task("Left"), Task("Right")
    left, right = Phase.of("left", left_task), Phase.of("right", right_task)
    reader = Phase("reader", [Task("Reads right", context=[right_task])], after=[left])
    assert ensemble_error(phases=[left, right, reader]) == (
        "Task 'Reads right' in phase 'reader' references context task 'Right', which is "
        "neither in phase 'reader' nor in a phase it runs after."
    )


def test_forward_reference_inside_a_sequential_phase() -> None:
    later = Task("Later")
    phase = Phase.of("p", Task("Early", context=[later]), later)
    assert "which appears later in the task list" in ensemble_error(phases=[phase])


async def test_root_phases_run_concurrently_and_successors_wait_for_all_predecessors() -> None:
    gates = Gates()
    research_a, research_b = Task("Research A"), Task("Research B")
    a, b = Phase.of("a", research_a), Phase.of("b", research_b)
    write = Task("Write", context=[research_a, research_b])
    final = Phase("final", [write], after=[a, b])
    run = asyncio.create_task(Ensemble(phases=[final, a, b], llm=gates.model()).arun())

    await asyncio.wait_for(gates.started["Research A"].wait(), TIMEOUT)
    await asyncio.wait_for(gates.started["Research B"].wait(), TIMEOUT)  # both roots at once
    gates.open("Research B")
    gates.open("Research A", "Write")
    output = await run

    assert gates.calls[-1] == "Write"
    assert [o.raw for o in output.task_outputs][-1] == "Write done"
    assert {name: [o.raw for o in outs] for name, outs in output.phase_outputs.items()} == {
        "a": ["Research A done"],
        "b": ["Research B done"],
        "final": ["Write done"],
    }
    assert "### Researcher: Research A\nResearch A done" in gates.prompts["Write"]
    write_output = output.output_for(write)
    assert write_output is not None
    assert write_output.raw == "Write done"


async def test_a_failed_phase_skips_its_successors_while_unrelated_phases_finish() -> None:
    gates = Gates(fail={"Broken"})
    first = Phase.of("first", Task("Fine"), Task("Broken"))
    after_first = Phase("after_first", [Task("Never")], after=[first])
    after_that = Phase("after_that", [Task("Never either")], after=[after_first])
    unrelated = Phase.of("unrelated", Task("Independent"))
    gates.open("Fine", "Broken", "Independent")

    with pytest.raises(TaskExecutionError) as caught:
        await Ensemble(phases=[first, after_first, after_that, unrelated], llm=gates.model()).arun()

    error = caught.value
    assert str(error) == "Task 'Broken' failed: Agent 'Agent' failed: Broken broke"
    assert str(error.__cause__) == "Agent 'Agent' failed: Broken broke"
    assert sorted(o.raw for o in error.completed_outputs) == ["Fine done", "Independent done"]
    assert "Never" not in gates.calls
    assert "Never either" not in gates.calls


async def test_a_phase_failing_in_parallel_mode_is_wrapped() -> None:
    gates = Gates(fail={"X"})
    gates.open("X", "Y")
    phase = Phase("p", [Task("X"), Task("Y")], workflow=Workflow.PARALLEL)
    from agentensemble import ParallelErrorStrategy

    with pytest.raises(TaskExecutionError) as caught:
        await Ensemble(
            phases=[phase],
            llm=gates.model(),
            parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
        ).arun()
    assert str(caught.value) == (
        "Phase failed: 1 of 2 tasks failed: 'X': Agent 'Agent' failed: X broke"
    )
    assert [o.raw for o in caught.value.completed_outputs] == ["Y done"]


def test_diamond_phases_run_each_phase_exactly_once() -> None:
    runs: list[str] = []

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        prompt = messages[1]
        assert isinstance(prompt, UserMessage)
        runs.append(prompt.text.split("\n")[1])
        return "ok"

    top = Phase.of("top", Task("Top"))
    left = Phase("left", [Task("Left")], after=[top])
    right = Phase("right", [Task("Right")], after=[top])
    bottom = Phase("bottom", [Task("Bottom")], after=[left, right])
    output = Ensemble(phases=[bottom, right, left, top], llm=FunctionModel(model)).run()
    assert sorted(runs) == ["Bottom", "Left", "Right", "Top"]
    assert runs[0] == "Top"
    assert runs[-1] == "Bottom"
    assert len(output.task_outputs) == 4


def test_phase_workflow_and_templates() -> None:
    llm = ScriptedModel(["one", "two"])
    phase = Phase("p", [Task("Do {thing}"), Task("Check {thing}")], workflow=Workflow.SEQUENTIAL)
    output = Ensemble(phases=[phase], llm=llm).run(inputs={"thing": "X"})
    assert [o.task_description for o in output.task_outputs] == ["Do X", "Check X"]


def test_phase_lists_must_be_lists() -> None:
    with pytest.raises(ValidationError, match="Phase 'p' tasks must be a list, got: int"):
        Phase("p", 5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="Phase 'p' after must be a list, got: Phase"):
        Phase("p", [Task("x")], after=Phase.of("q", Task("y")))  # type: ignore[arg-type]
