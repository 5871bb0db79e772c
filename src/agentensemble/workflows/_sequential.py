"""SEQUENTIAL: tasks one after another, each seeing its context tasks' outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentensemble._frozen import direct_new
from agentensemble.enums import Workflow
from agentensemble.execution._context import RunContext, TaskContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.execution._task_runner import context_outputs, run_in_turn
from agentensemble.outputs import TaskOutput
from agentensemble.workflows._executor import ExecutorRequest, WorkflowSpec

__all__ = ["SEQUENTIAL", "SequentialExecutor"]


class SequentialExecutor:
    """Runs tasks in order; a failure raises `TaskExecutionError` carrying every output the
    run completed before it, except an `OutputParsingError`, which is raised as it is
    (BEHAVIOUR 5.3) and carries them itself. A control-flow signal (a reviewer's exit)
    stops it before the next task and is left to the run (`RunContext.stop`)."""

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run `plan` in order; return its outputs."""
        outputs: list[TaskOutput[Any]] = []
        for planned in plan:
            if run.stop.requested:  # the run is ending early: start nothing more
                break
            context = context_outputs(planned, run.outputs, strict=True)
            async with run.task_slot():
                output = await run_in_turn(
                    direct_new(TaskContext)(run=run, planned=planned, context_outputs=context)
                )
            if output is not None:
                outputs.append(output)
        return tuple(outputs)


async def _build(request: ExecutorRequest) -> SequentialExecutor:
    return SequentialExecutor()


SEQUENTIAL = WorkflowSpec(name=Workflow.SEQUENTIAL.value, build=_build, ordered=True)
"""Tasks one after another, in declared order."""
