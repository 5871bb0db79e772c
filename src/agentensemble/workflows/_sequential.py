"""SEQUENTIAL: tasks one after another, each seeing its context tasks' outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentensemble.errors import OutputParsingError, TaskExecutionError
from agentensemble.execution._context import RunContext, TaskContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.execution._task_runner import context_outputs, run_task
from agentensemble.outputs import TaskOutput

__all__ = ["SequentialExecutor"]


class SequentialExecutor:
    """Runs tasks in order; a failure raises `TaskExecutionError` carrying every output the
    run completed before it, except an `OutputParsingError`, which is raised as it is
    (BEHAVIOUR 5.3) and carries them itself."""

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run `plan` in order; return its outputs."""
        outputs: list[TaskOutput[Any]] = []
        for planned in plan:
            context = context_outputs(planned, run.outputs, strict=True)
            try:
                async with run.task_slot():
                    output = await run_task(
                        TaskContext(run=run, planned=planned, context_outputs=context)
                    )
            except OutputParsingError as error:
                error.completed_outputs = run.outputs.completed()
                raise
            except Exception as error:
                raise TaskExecutionError.of(
                    error,
                    task_description=planned.description,
                    agent_role=planned.role,
                    completed_outputs=run.outputs.completed(),
                ) from error
            outputs.append(output)
        return tuple(outputs)
