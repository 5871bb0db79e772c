"""Phases: a DAG of named task groups, each run with its own workflow.

Every phase is started exactly once, as one coroutine that waits for its predecessors. A
failed phase skips its successors (transitively) while unrelated phases finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agentensemble._logging import get_logger
from agentensemble.enums import Workflow
from agentensemble.errors import ParallelExecutionError, TaskExecutionError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.outputs import TaskOutput
from agentensemble.phase import Phase
from agentensemble.task import Task
from agentensemble.workflows._dispatch import ParallelSettings, run_workflow

__all__ = ["PhaseResults", "PlannedPhase", "run_phases"]

logger = get_logger("agentensemble.phases")


@dataclass(frozen=True, slots=True)
class PlannedPhase:
    """A phase with its planned tasks and the workflow to run them with."""

    phase: Phase
    plan: tuple[PlannedTask, ...]
    workflow: Workflow


@dataclass(slots=True)
class PhaseResults:
    """Outputs of a phased run."""

    outputs: dict[Task, TaskOutput] = field(default_factory=dict)
    """Every task output, in completion order."""
    by_phase: dict[str, tuple[TaskOutput, ...]] = field(default_factory=dict)
    failures: list[tuple[Phase, Exception]] = field(default_factory=list)
    partial: list[TaskOutput] = field(default_factory=list)
    """Outputs completed inside phases that then failed."""
    broken: set[Phase] = field(default_factory=set)


async def run_phases(
    phases: Sequence[PlannedPhase], ctx: ExecutionContext, settings: ParallelSettings
) -> PhaseResults:
    """Run the phase DAG; raise the first phase failure once every runnable phase is done."""
    import asyncio

    results = PhaseResults()
    done = {item.phase: asyncio.Event() for item in phases}

    async def run(item: PlannedPhase) -> None:
        for before in item.phase.after:
            await done[before].wait()
        try:
            if any(before in results.broken for before in item.phase.after):
                logger.info("Phase '%s' skipped: a phase it runs after failed", item.phase.name)
                results.broken.add(item.phase)
                return
            await _run_phase(item, ctx, settings, results)
        finally:
            done[item.phase].set()

    async with asyncio.TaskGroup() as group:
        for item in phases:
            group.create_task(run(item))
    _raise_first_failure(results)
    return results


async def _run_phase(
    item: PlannedPhase, ctx: ExecutionContext, settings: ParallelSettings, results: PhaseResults
) -> None:
    logger.info("Phase '%s' starting | %d tasks", item.phase.name, len(item.plan))
    try:
        outputs = await run_workflow(
            item.plan, item.workflow, ctx, settings, prior=dict(results.outputs)
        )
    except Exception as error:
        results.failures.append((item.phase, error))
        results.broken.add(item.phase)
        if isinstance(error, (TaskExecutionError, ParallelExecutionError)):
            results.partial.extend(error.completed_outputs)
        return
    results.outputs.update(outputs)
    results.by_phase[item.phase.name] = tuple(outputs.values())


def _raise_first_failure(results: PhaseResults) -> None:
    if not results.failures:
        return
    phase, error = results.failures[0]
    completed = (*results.outputs.values(), *results.partial)
    if isinstance(error, TaskExecutionError):
        raise TaskExecutionError(
            str(error),
            task_description=error.task_description,
            agent_role=error.agent_role,
            completed_outputs=completed,
        ) from (error.__cause__ or error)
    raise TaskExecutionError(
        f"Phase failed: {error}",
        task_description=phase.name,
        agent_role="",
        completed_outputs=completed,
    ) from error
