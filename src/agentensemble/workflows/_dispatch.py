"""Pick the executor for a workflow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.outputs import TaskOutput
from agentensemble.task import Task
from agentensemble.workflows._parallel import run_parallel
from agentensemble.workflows._sequential import run_sequential

__all__ = ["ParallelSettings", "run_workflow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelSettings:
    """How parallel workflows handle failures and concurrency."""

    strategy: ParallelErrorStrategy = ParallelErrorStrategy.FAIL_FAST
    max_concurrency: int | None = None


async def run_workflow(
    plan: Sequence[PlannedTask],
    workflow: Workflow,
    ctx: ExecutionContext,
    settings: ParallelSettings,
    *,
    prior: Mapping[Task, TaskOutput] | None = None,
) -> dict[Task, TaskOutput]:
    """Run `plan` with the executor of `workflow` (validated to be SEQUENTIAL or PARALLEL)."""
    if workflow is Workflow.PARALLEL:
        return await run_parallel(
            plan,
            ctx,
            strategy=settings.strategy,
            max_concurrency=settings.max_concurrency,
            prior=prior,
        )
    return await run_sequential(plan, ctx, prior=prior)
