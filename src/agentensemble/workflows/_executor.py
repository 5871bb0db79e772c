"""The protocol every workflow executor implements, and the executor for each workflow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.workflows._parallel import ParallelExecutor
from agentensemble.workflows._sequential import SequentialExecutor

if TYPE_CHECKING:
    from agentensemble.execution._context import RunContext
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.observability._trace import ExecutionTrace
    from agentensemble.outputs import TaskOutput
    from agentensemble.task import Task

__all__ = ["ComposedExecutor", "Planner", "WorkflowExecutor", "executor_for"]


class WorkflowExecutor(Protocol):
    """Runs planned tasks within one run.

    Every output is recorded in ``run.outputs`` as its task completes (context is read from
    there too), so whatever stops the executor (a failure, a cancellation, the run's
    deadline, an exit-early signal) loses nothing that completed. Task failures raise
    `TaskExecutionError` or `ParallelExecutionError` once running tasks have settled.
    """

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run `plan`; return its outputs in completion order."""
        ...


class Planner(Protocol):
    """Plans tasks added to a run while it runs (checked as the run's own tasks are,
    templates resolved with the run's inputs, agents given)."""

    async def __call__(self, tasks: Sequence[Task[Any]]) -> tuple[PlannedTask, ...]:
        """Check and plan `tasks`; they become part of the run."""
        ...

    async def check(self, tasks: Sequence[Task[Any]]) -> None:
        """Check `tasks` as `__call__` would, without planning them."""
        ...


class ComposedExecutor(WorkflowExecutor, Protocol):
    """The executor of a run a composite shapes (`MapReduceEnsemble`): it names the run's
    workflow and adds what it knows to the run's trace."""

    @property
    def workflow_label(self) -> str:
        """The trace's and events' workflow name (``MAP_REDUCE_STATIC``, say)."""
        ...

    def finish_trace(self, trace: ExecutionTrace) -> ExecutionTrace:
        """`trace` completed with what the executor knows (node types, levels, ...)."""
        ...


def executor_for(workflow: Workflow, strategy: ParallelErrorStrategy) -> WorkflowExecutor:
    """The executor of a flat workflow (validated to be SEQUENTIAL or PARALLEL)."""
    if workflow is Workflow.PARALLEL:
        return ParallelExecutor(strategy)
    return SequentialExecutor()
