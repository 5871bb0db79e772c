"""Workflows register their executors; the run asks the registry (DESIGN 4b, STYLE 20)."""

from __future__ import annotations

import dataclasses

import pytest

from agentensemble import (
    Ensemble,
    Phase,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
)
from agentensemble.enums import ParallelErrorStrategy
from agentensemble.execution._context import RunContext
from agentensemble.observability._listeners import EventDispatcher
from agentensemble.workflows._executor import (
    ExecutorRequest,
    PlannedGroup,
    WorkflowSettings,
)
from agentensemble.workflows._hierarchical import HIERARCHICAL
from agentensemble.workflows._parallel import PARALLEL, ParallelExecutor
from agentensemble.workflows._phases import PHASES, PhaseExecutor
from agentensemble.workflows._registry import GRAPH, WORKFLOWS, workflow_spec
from agentensemble.workflows._sequential import SEQUENTIAL, SequentialExecutor

from .helpers import echo, planned


def request(
    *groups: PlannedGroup,
    strategy: ParallelErrorStrategy | None = ParallelErrorStrategy.FAIL_FAST,
) -> ExecutorRequest:
    settings = WorkflowSettings(
        parallel_error_strategy=strategy,
        llm=None,
        limiter=None,
        manager_llm=None,
        manager_max_iterations=20,
        manager_prompt_strategy=None,
    )
    return ExecutorRequest(groups=groups, settings=settings, team=None, workflows=WORKFLOWS)


def test_every_workflow_and_phases_are_registered_under_their_names() -> None:
    assert dict(WORKFLOWS) == {
        "SEQUENTIAL": SEQUENTIAL,
        "PARALLEL": PARALLEL,
        "HIERARCHICAL": HIERARCHICAL,
        "PHASES": PHASES,
        "GRAPH": GRAPH,
    }
    for workflow in Workflow:
        assert workflow_spec(workflow) is WORKFLOWS[workflow.value]
        assert type(workflow_spec(workflow).name) is str  # the trace's label is plain text


def test_the_registry_cannot_be_changed() -> None:
    with pytest.raises(TypeError):
        WORKFLOWS["CUSTOM"] = SEQUENTIAL  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SEQUENTIAL.ordered = False  # type: ignore[misc]


def test_an_unknown_name_is_a_lookup_error_naming_the_registered_ones() -> None:
    with pytest.raises(LookupError, match=r"'CUSTOM'.*'HIERARCHICAL'"):
        workflow_spec("CUSTOM")


def test_each_workflow_says_what_it_asks_of_the_run() -> None:
    assert [spec.name for spec in WORKFLOWS.values() if spec.ordered] == ["SEQUENTIAL"]
    assert [spec.name for spec in WORKFLOWS.values() if spec.has_manager] == ["HIERARCHICAL"]
    assert HIERARCHICAL.own_settings == (
        "manager_max_iterations",
        "manager_llm",
        "manager_prompt_strategy",
        "hierarchical_constraints",
    )
    ensemble_fields = {setting.name for setting in dataclasses.fields(Ensemble)}
    for spec in WORKFLOWS.values():
        assert set(spec.own_settings) <= ensemble_fields, spec.name


async def test_flat_workflows_build_their_executors() -> None:
    group = PlannedGroup(tasks=(planned(Task("a", handler=echo), 1),), workflow="SEQUENTIAL")
    assert isinstance(await SEQUENTIAL.build(request(group)), SequentialExecutor)
    strategy = ParallelErrorStrategy.CONTINUE_ON_ERROR
    executor = await PARALLEL.build(request(group, strategy=strategy))
    assert isinstance(executor, ParallelExecutor)
    assert executor.strategy is strategy


async def test_phases_build_each_phase_with_its_own_registered_workflow() -> None:
    first, second = Task("first", handler=echo), Task("second", handler=echo)
    later = Task("later", handler=echo, context=[first, second])
    one = Phase("one", [first, second], workflow=Workflow.PARALLEL)
    two = Phase("two", [later], after=[one])
    groups = (
        PlannedGroup(tasks=(planned(first, 1), planned(second, 2)), workflow="PARALLEL", phase=one),
        PlannedGroup(tasks=(planned(later, 3),), workflow="SEQUENTIAL", phase=two),
    )
    executor = await PHASES.build(request(*groups))
    assert isinstance(executor, PhaseExecutor)
    assert [(item.phase, type(item.executor)) for item in executor.phases] == [
        (one, ParallelExecutor),
        (two, SequentialExecutor),
    ]
    run = RunContext(run_id="r", events=EventDispatcher([]))
    outputs = await executor.execute([task for group in groups for task in group.tasks], run)
    assert outputs[-1].raw == "later(first()+second())"
    assert list(run.outputs.by_phase) == ["one", "two"]


def test_a_hierarchical_setting_on_another_workflow_names_that_workflow() -> None:
    task = Task("a", handler=echo)
    with pytest.raises(
        ValidationError, match=r"manager_llm applies only to Workflow\.HIERARCHICAL,"
    ):
        Ensemble(tasks=[task], manager_llm=ScriptedModel([])).run()
    with pytest.raises(
        ValidationError, match=r"iterations applies only to Workflow\.HIERARCHICAL, which"
    ):
        Ensemble(phases=[Phase("p", [task])], manager_max_iterations=5).run()


def test_the_trace_names_the_registered_workflow() -> None:
    task = Task("a", handler=echo)
    flat = Ensemble(tasks=[task], workflow=Workflow.PARALLEL).run()
    phased = Ensemble(phases=[Phase("p", [Task("b", handler=echo)])]).run()
    assert flat.trace is not None
    assert phased.trace is not None
    assert (flat.trace.workflow, phased.trace.workflow) == ("PARALLEL", "PHASES")
