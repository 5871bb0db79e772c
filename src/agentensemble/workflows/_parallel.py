"""PARALLEL: the tasks as a dependency graph, each started the moment its last dependency ends.

Running tasks are never interrupted. Under FAIL_FAST a failure stops anything new from
starting; under CONTINUE_ON_ERROR only the dependents of a failure (transitively) are
skipped. Outputs come back in completion order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agentensemble._logging import get_logger
from agentensemble.enums import ParallelErrorStrategy
from agentensemble.errors import ParallelExecutionError, TaskExecutionError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.execution._task_runner import context_outputs, run_task
from agentensemble.outputs import TaskOutput
from agentensemble.task import Task

__all__ = ["run_parallel"]

logger = get_logger("agentensemble.parallel")


@dataclass(slots=True)
class _Graph:
    """Dependency bookkeeping for one parallel run."""

    pending: dict[PlannedTask, int]
    dependents: dict[PlannedTask, list[PlannedTask]]
    known: dict[Task, TaskOutput]
    """Every output a task may read as context: prior ones and this run's."""
    outputs: dict[Task, TaskOutput] = field(default_factory=dict)
    """This run's outputs, in completion order."""
    failures: list[tuple[PlannedTask, Exception]] = field(default_factory=list)
    broken: set[Task] = field(default_factory=set)
    """Tasks that failed or were skipped."""

    @classmethod
    def of(cls, plan: Sequence[PlannedTask], prior: Mapping[Task, TaskOutput]) -> _Graph:
        by_source = {planned.source: planned for planned in plan}
        pending = dict.fromkeys(plan, 0)
        dependents: dict[PlannedTask, list[PlannedTask]] = {planned: [] for planned in plan}
        for planned in plan:
            for dependency in dict.fromkeys(planned.source.context):
                upstream = by_source.get(dependency)
                if upstream is not None:
                    pending[planned] += 1
                    dependents[upstream].append(planned)
        return cls(pending, dependents, dict(prior))

    def roots(self) -> list[PlannedTask]:
        return [planned for planned, count in self.pending.items() if count == 0]


async def run_parallel(
    plan: Sequence[PlannedTask],
    ctx: ExecutionContext,
    *,
    strategy: ParallelErrorStrategy = ParallelErrorStrategy.FAIL_FAST,
    max_concurrency: int | None = None,
    prior: Mapping[Task, TaskOutput] | None = None,
) -> dict[Task, TaskOutput]:
    """Run `plan` as a DAG; return outputs keyed by source task, in completion order.

    Raises `TaskExecutionError` (FAIL_FAST: the first failure) or `ParallelExecutionError`
    (CONTINUE_ON_ERROR), after every running task has finished, carrying every output
    that completed.
    """
    import asyncio

    graph = _Graph.of(plan, prior or {})
    limiter = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    total = len(plan)

    def should_skip(planned: PlannedTask) -> bool:
        if strategy is ParallelErrorStrategy.FAIL_FAST:
            return bool(graph.failures)
        return any(dependency in graph.broken for dependency in planned.source.context)

    async with asyncio.TaskGroup() as group:

        def settle(finished: PlannedTask) -> None:
            """Release the dependents of a finished (or skipped) task; cascade skips."""
            ready = [finished]
            while ready:
                for dependent in graph.dependents[ready.pop()]:
                    graph.pending[dependent] -= 1
                    if graph.pending[dependent] > 0:
                        continue
                    if should_skip(dependent):
                        _skip(graph, dependent)
                        ready.append(dependent)
                    else:
                        group.create_task(execute(dependent))

        async def execute(planned: PlannedTask) -> None:
            if limiter is None:
                await _run_one(graph, planned, ctx)
            else:
                async with limiter:
                    if should_skip(planned):  # a failure happened while it waited
                        _skip(graph, planned)
                    else:
                        await _run_one(graph, planned, ctx)
            settle(planned)

        for root in graph.roots():
            group.create_task(execute(root))

    _raise_failures(graph, strategy, total)
    return graph.outputs


async def _run_one(graph: _Graph, planned: PlannedTask, ctx: ExecutionContext) -> None:
    context = context_outputs(planned, graph.known, strict=False)
    try:
        output = await run_task(planned, context, ctx)
    except Exception as error:
        graph.failures.append((planned, error))
        graph.broken.add(planned.source)
        return
    graph.outputs[planned.source] = output
    graph.known[planned.source] = output


def _skip(graph: _Graph, planned: PlannedTask) -> None:
    logger.info("Task %d skipped: %s", planned.index, planned.description[:80])
    graph.broken.add(planned.source)


def _raise_failures(graph: _Graph, strategy: ParallelErrorStrategy, total: int) -> None:
    if not graph.failures:
        return
    completed = tuple(graph.outputs.values())
    if strategy is ParallelErrorStrategy.CONTINUE_ON_ERROR:
        raise ParallelExecutionError(
            completed_outputs=completed,
            failed_task_causes={planned.description: error for planned, error in graph.failures},
            total_tasks=total,
        )
    planned, error = graph.failures[0]
    raise TaskExecutionError(
        f"Task failed: {planned.description}",
        task_description=planned.description,
        agent_role=planned.role,
        completed_outputs=completed,
    ) from error
