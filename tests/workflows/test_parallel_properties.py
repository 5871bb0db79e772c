"""Property tests of the DAG scheduler over random graphs, failures and concurrency limits."""

import asyncio
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentensemble import (
    Ensemble,
    FunctionModel,
    ParallelErrorStrategy,
    ParallelExecutionError,
    Task,
    TaskExecutionError,
    Workflow,
)
from agentensemble.models import Message, ToolSpec

from .test_parallel import task_name

Dependencies = Sequence[Sequence[int]]
"""Per task, the indexes of the tasks it depends on."""
Case = tuple[list[list[int]], set[int], int | None]
"""(dependencies per task, tasks that fail, max_concurrency)."""
RunError = TaskExecutionError | ParallelExecutionError


@st.composite
def dags(draw: st.DrawFn) -> Case:
    """(dependencies per task, tasks that fail, max_concurrency); edges point backwards."""
    count = draw(st.integers(min_value=1, max_value=14))
    dependencies = [
        sorted(draw(st.sets(st.integers(0, index - 1), max_size=3))) if index else []
        for index in range(count)
    ]
    failing = draw(st.sets(st.integers(0, count - 1), max_size=3))
    concurrency = draw(st.one_of(st.none(), st.integers(1, 4)))
    return dependencies, failing, concurrency


def build(dependencies: Dependencies) -> list[Task[Any]]:
    tasks: list[Task[Any]] = []
    for index, deps in enumerate(dependencies):
        tasks.append(Task(f"T{index}", context=[tasks[d] for d in deps]))
    return tasks


def run(
    dependencies: Dependencies,
    failing: AbstractSet[int],
    concurrency: int | None,
    strategy: ParallelErrorStrategy,
) -> tuple[list[int], list[str], list[bool], RunError | None]:
    finished: set[int] = set()
    started_after_deps: list[bool] = []
    calls: list[int] = []

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        index = int(task_name(messages)[1:])
        calls.append(index)
        started_after_deps.append(all(d in finished for d in dependencies[index]))
        await asyncio.sleep(0)  # let other admitted tasks interleave
        if index in failing:
            raise RuntimeError(f"T{index} failed")
        finished.add(index)
        return f"T{index}"

    tasks = build(dependencies)
    ensemble = Ensemble(
        tasks=list(reversed(tasks)),
        llm=FunctionModel(reply),
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=strategy,
        max_concurrency=concurrency,
    )
    completed: list[str]
    error: RunError | None
    try:
        output = ensemble.run()
        completed, error = [o.raw for o in output.task_outputs], None
    except (TaskExecutionError, ParallelExecutionError) as caught:
        completed, error = [o.raw for o in caught.completed_outputs], caught
    return calls, completed, started_after_deps, error


def downstream(dependencies: Dependencies, roots: AbstractSet[int]) -> set[int]:
    """Every task that depends, directly or not, on one of `roots`."""
    found: set[int] = set()
    for index, deps in enumerate(dependencies):
        if any(d in roots or d in found for d in deps):
            found.add(index)
    return found


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(dags())
def test_continue_on_error_runs_exactly_what_does_not_depend_on_a_failure(
    case: Case,
) -> None:
    dependencies, failing, concurrency = case
    calls, completed, ordered, error = run(
        dependencies, failing, concurrency, ParallelErrorStrategy.CONTINUE_ON_ERROR
    )
    blocked = downstream(dependencies, failing)
    expected_runs = set(range(len(dependencies))) - blocked
    assert sorted(calls) == sorted(expected_runs)  # each runnable task exactly once
    assert all(ordered)  # no task started before all its dependencies finished
    assert sorted(completed) == sorted(f"T{i}" for i in expected_runs - failing)
    ran_and_failed = failing - blocked
    if ran_and_failed:
        assert isinstance(error, ParallelExecutionError)
        assert sorted(error.failed_task_causes) == sorted(f"T{i}" for i in ran_and_failed)
    else:
        assert error is None


@FAST
@given(dags())
def test_fail_fast_never_starts_work_after_a_failure_and_loses_no_output(
    case: Case,
) -> None:
    dependencies, failing, concurrency = case
    calls, completed, ordered, error = run(
        dependencies, failing, concurrency, ParallelErrorStrategy.FAIL_FAST
    )
    assert len(calls) == len(set(calls))
    assert all(ordered)
    failed_runs = [i for i in calls if i in failing]
    if not failed_runs:
        assert error is None
        assert sorted(calls) == list(range(len(dependencies)))
        return
    assert isinstance(error, TaskExecutionError)
    assert sorted(completed) == sorted(f"T{i}" for i in calls if i not in failing)
    assert not downstream(dependencies, set(failed_runs)) & set(calls)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_long_chain_does_not_overflow_the_stack(concurrency: int) -> None:
    chain = [[index - 1] if index else [] for index in range(3000)]
    calls, completed, _, error = run(
        chain, {0}, concurrency, ParallelErrorStrategy.CONTINUE_ON_ERROR
    )
    assert calls == [0]  # 2,999 skips cascade through a work list, not recursion
    assert completed == []
    assert isinstance(error, ParallelExecutionError)
