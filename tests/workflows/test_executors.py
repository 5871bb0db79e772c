"""Workflow executors behind one protocol: a running DAG that is given more tasks."""

from __future__ import annotations

import pytest

from agentensemble import HandlerContext, Task
from agentensemble.enums import ParallelErrorStrategy
from agentensemble.errors import ParallelExecutionError
from agentensemble.execution._context import RunContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.observability._listeners import EventDispatcher
from agentensemble.workflows._parallel import DagRun, ParallelExecutor

from .helpers import echo, planned


async def test_a_drained_graph_is_given_the_next_tasks() -> None:
    first, second = Task("map-1", handler=echo), Task("map-2", handler=echo)
    reduce = Task("reduce", handler=echo, context=[first, second])
    seen: list[list[str]] = []

    async def on_drained(dag: DagRun) -> list[PlannedTask]:
        seen.append(sorted(output.raw for output in dag.outputs))
        return [planned(reduce, 3)] if len(seen) == 1 else []

    run = RunContext(run_id="r", events=EventDispatcher([]))
    executor = ParallelExecutor(ParallelErrorStrategy.FAIL_FAST, on_drained=on_drained)
    outputs = await executor.execute([planned(first, 1), planned(second, 2)], run)
    assert seen == [["map-1()", "map-2()"], ["map-1()", "map-2()", "reduce(map-1()+map-2())"]]
    assert outputs[-1].raw == "reduce(map-1()+map-2())"
    assert run.outputs.get(reduce) is outputs[-1]


def fail(context: HandlerContext) -> str:
    raise ValueError(f"{context.description} broke")


async def test_partial_inputs_run_a_task_on_the_context_that_completed() -> None:
    good, bad, worse = (
        Task("good", handler=echo),
        Task("bad", handler=fail),
        Task("worse", handler=fail),
    )
    partial = Task("partial", handler=echo, context=[good, bad])
    orphan = Task("orphan", handler=echo, context=[bad, worse])
    plan = [planned(task, index) for index, task in enumerate([good, bad, worse, partial, orphan])]
    run = RunContext(run_id="r", events=EventDispatcher([]))
    executor = ParallelExecutor(ParallelErrorStrategy.CONTINUE_ON_ERROR, partial_inputs=True)
    with pytest.raises(ParallelExecutionError) as raised:
        await executor.execute(plan, run)
    assert {task.description for task in raised.value.failed_tasks} == {"bad", "worse"}
    assert run.outputs.get(partial) is not None
    assert run.outputs.get(partial).raw == "partial(good())"  # type: ignore[union-attr]
    assert run.outputs.get(orphan) is None  # every input failed: skipped


async def test_without_partial_inputs_one_failed_input_skips_the_task() -> None:
    good, bad = Task("good", handler=echo), Task("bad", handler=fail)
    partial = Task("partial", handler=echo, context=[good, bad])
    plan = [planned(task, index) for index, task in enumerate([good, bad, partial])]
    run = RunContext(run_id="r", events=EventDispatcher([]))
    with pytest.raises(ParallelExecutionError):
        await ParallelExecutor(ParallelErrorStrategy.CONTINUE_ON_ERROR).execute(plan, run)
    assert run.outputs.get(partial) is None
