"""Workflow executors behind one protocol: a running DAG that is given more tasks."""

from __future__ import annotations

from typing import Any

from agentensemble import HandlerContext, Task
from agentensemble.enums import ParallelErrorStrategy
from agentensemble.execution._context import RunContext
from agentensemble.execution._planning import PlannedTask, task_steps
from agentensemble.observability._listeners import EventDispatcher
from agentensemble.outputs import TaskOutput
from agentensemble.workflows._parallel import DagRun, ParallelExecutor


def planned(task: Task[Any], index: int) -> PlannedTask:
    return PlannedTask(
        source=task,
        index=index,
        total=3,
        description=task.description,
        expected_output=task.expected_output,
        agent=None,
        steps=task_steps(task, None),
    )


def echo(context: HandlerContext) -> str:
    inputs = "+".join(output.raw for output in context.context_outputs)
    return f"{context.description}({inputs})"


async def test_a_running_graph_takes_new_tasks_that_depend_on_finished_ones() -> None:
    first, second = Task("map-1", handler=echo), Task("map-2", handler=echo)
    reduce = Task("reduce", handler=echo, context=[first, second])
    added: list[str] = []

    def on_done(dag: DagRun, done: PlannedTask, output: TaskOutput[Any]) -> None:
        added.append(done.description)
        if len(added) == 2:  # both map tasks finished: add the reduction
            dag.add([planned(reduce, 3)])

    run = RunContext(run_id="r", events=EventDispatcher([]))
    executor = ParallelExecutor(ParallelErrorStrategy.FAIL_FAST, on_task_done=on_done)
    outputs = await executor.execute([planned(first, 1), planned(second, 2)], run)
    assert [o.raw for o in outputs][:2] == ["map-1()", "map-2()"]
    assert outputs[-1].raw == "reduce(map-1()+map-2())"
    assert run.outputs.get(reduce) is outputs[-1]
