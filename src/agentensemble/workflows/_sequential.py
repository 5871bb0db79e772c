"""SEQUENTIAL: tasks one after another, each seeing its context tasks' outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentensemble.errors import TaskExecutionError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.execution._task_runner import context_outputs, run_task
from agentensemble.outputs import TaskOutput
from agentensemble.task import Task

__all__ = ["run_sequential"]


async def run_sequential(
    plan: Sequence[PlannedTask],
    ctx: ExecutionContext,
    *,
    prior: Mapping[Task, TaskOutput] | None = None,
) -> dict[Task, TaskOutput]:
    """Run `plan` in order; return outputs keyed by source task, in completion order.

    `prior` seeds outputs of tasks that ran earlier (other phases) for context lookups.
    A failure raises `TaskExecutionError` carrying every output completed before it.
    """
    known: dict[Task, TaskOutput] = dict(prior or {})
    completed: dict[Task, TaskOutput] = {}
    for planned in plan:
        context = context_outputs(planned, known, strict=True)
        try:
            output = await run_task(planned, context, ctx)
        except Exception as error:
            raise TaskExecutionError(
                f"Task failed: {planned.description}",
                task_description=planned.description,
                agent_role=planned.role,
                completed_outputs=tuple(completed.values()),
            ) from error
        completed[planned.source] = output
        known[planned.source] = output
    return completed
