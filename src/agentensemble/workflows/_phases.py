"""Phases: a DAG of named task groups, each run with its own workflow's executor.

Every phase is started exactly once, as one coroutine that waits for its predecessors. A
failed phase skips its successors (transitively) while unrelated phases finish. The run's
`max_concurrency` bounds the tasks of all phases together. Each phase's executor is made
when the run is planned, by the registered workflow of the phase.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentensemble._logging import get_logger
from agentensemble.errors import OutputParsingError, TaskExecutionError
from agentensemble.execution._context import RunContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.outputs import TaskOutput
from agentensemble.phase import Phase
from agentensemble.workflows._executor import ExecutorRequest, WorkflowExecutor, WorkflowSpec

__all__ = ["PHASES", "PhaseExecutor", "PlannedPhase"]

logger = get_logger("agentensemble.phases")


@dataclass(frozen=True, slots=True)
class PlannedPhase:
    """A phase with its planned tasks and the executor of its workflow."""

    phase: Phase
    plan: tuple[PlannedTask, ...]
    executor: WorkflowExecutor


@dataclass(slots=True)
class _Progress:
    outputs: list[TaskOutput[Any]] = field(default_factory=list)
    failures: list[tuple[Phase, Exception]] = field(default_factory=list)
    broken: set[Phase] = field(default_factory=set)


class PhaseExecutor:
    """Runs the phase DAG, each phase with the executor of its workflow."""

    def __init__(self, phases: Sequence[PlannedPhase]) -> None:
        self.phases = tuple(phases)

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run every phase (`plan` is their tasks); raise the first phase failure once every
        runnable phase is done."""
        import asyncio

        progress = _Progress()
        done = {item.phase: asyncio.Event() for item in self.phases}

        async def start(item: PlannedPhase) -> None:
            for before in item.phase.after:
                await done[before].wait()
            try:
                if run.stop.requested:
                    logger.info("Phase '%s' skipped: the run is ending early", item.phase.name)
                    return
                if any(before in progress.broken for before in item.phase.after):
                    logger.info("Phase '%s' skipped: a phase it runs after failed", item.phase.name)
                    progress.broken.add(item.phase)
                    return
                await self._run_phase(item, run, progress)
            finally:
                done[item.phase].set()

        async with asyncio.TaskGroup() as group:
            for item in self.phases:
                group.create_task(start(item))
        _raise_first_failure(progress, run)
        return tuple(progress.outputs)

    async def _run_phase(self, item: PlannedPhase, run: RunContext, progress: _Progress) -> None:
        logger.info("Phase '%s' starting | %d tasks", item.phase.name, len(item.plan))
        try:
            outputs = await item.executor.execute(item.plan, run)
        except Exception as error:
            progress.failures.append((item.phase, error))
            progress.broken.add(item.phase)
            return
        progress.outputs.extend(outputs)
        run.outputs.by_phase[item.phase.name] = outputs


async def _build(request: ExecutorRequest) -> PhaseExecutor:
    """Each phase with the executor its own workflow makes for it."""
    phases = []
    for group in request.groups:
        if group.phase is None:  # the run plans a phased ensemble phase by phase
            raise AssertionError("a task group of a phased run without its phase")
        spec = request.workflows[group.workflow]
        executor = await spec.build(dataclasses.replace(request, groups=(group,)))
        phases.append(PlannedPhase(group.phase, group.tasks, executor))
    return PhaseExecutor(phases)


PHASES = WorkflowSpec(name="PHASES", build=_build)
"""Named groups of tasks as a DAG, each group under its own workflow."""


def _raise_first_failure(progress: _Progress, run: RunContext) -> None:
    if not progress.failures or run.stop.requested:  # an early end wins, as in PARALLEL
        return
    phase, error = progress.failures[0]
    completed = run.outputs.completed()
    if isinstance(error, TaskExecutionError):
        raise TaskExecutionError(
            str(error),
            task_description=error.task_description,
            agent_role=error.agent_role,
            completed_outputs=completed,
        ) from (error.__cause__ or error)
    if isinstance(error, OutputParsingError):  # a sequential phase raises it unwrapped
        raise TaskExecutionError.of(
            error,
            task_description=error.task_description,
            agent_role=error.agent_role,
            completed_outputs=completed,
        ) from error
    raise TaskExecutionError(
        f"Phase failed: {error}",
        task_description=phase.name,
        agent_role="",
        completed_outputs=completed,
    ) from error
