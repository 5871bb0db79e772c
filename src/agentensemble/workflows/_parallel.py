"""PARALLEL: the tasks as a dependency graph, each started the moment its last dependency ends.

Running tasks are never interrupted. Under FAIL_FAST a failure stops anything new from
starting; under CONTINUE_ON_ERROR only the dependents of a failure (transitively) are
skipped. When the run ends early (a reviewer's exit) nothing new starts either, and the
early end is the run's outcome, whatever failed meanwhile. Outputs come back in
completion order.

Two options serve map-reduce. `on_drained` is asked for more tasks each time every task
added so far has settled (adaptive reduce levels are planned from the finished level's
outputs), and the graph ends when it returns none. With `partial_inputs`, under
CONTINUE_ON_ERROR a task is skipped only when every one of its context tasks failed or was
skipped; it runs on the outputs of the others.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentensemble._control import ControlFlowSignal
from agentensemble._logging import get_logger
from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.errors import ParallelExecutionError, TaskExecutionError
from agentensemble.execution._context import RunContext, TaskContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.execution._task_runner import context_outputs, run_task
from agentensemble.outputs import TaskOutput
from agentensemble.workflows._executor import ExecutorRequest, WorkflowSpec

if TYPE_CHECKING:
    import asyncio

    from agentensemble.task import Task

__all__ = ["PARALLEL", "DagRun", "DrainedHook", "ParallelExecutor"]

logger = get_logger("agentensemble.parallel")

DrainedHook = Callable[["DagRun"], Awaitable[Sequence[PlannedTask]]]
"""Called when every task in the graph has settled; returns the tasks to run next (none:
the graph is done)."""


class ParallelExecutor:
    """Runs tasks as a DAG of their context dependencies."""

    def __init__(
        self,
        strategy: ParallelErrorStrategy = ParallelErrorStrategy.FAIL_FAST,
        *,
        on_drained: DrainedHook | None = None,
        partial_inputs: bool = False,
    ) -> None:
        self.strategy = strategy
        self.on_drained = on_drained
        self.partial_inputs = partial_inputs

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run `plan` (and whatever is added while it runs) as a DAG.

        Raises `TaskExecutionError` (FAIL_FAST: the first failure) or `ParallelExecutionError`
        (CONTINUE_ON_ERROR), after every running task has finished.
        """
        dag = DagRun(
            run, self.strategy, on_drained=self.on_drained, partial_inputs=self.partial_inputs
        )
        return await dag.execute(plan)


async def _build(request: ExecutorRequest) -> ParallelExecutor:
    strategy = request.settings.parallel_error_strategy
    if strategy is None:  # validation rejects a PARALLEL run without one
        raise AssertionError("a PARALLEL run without a parallel_error_strategy")
    return ParallelExecutor(strategy)


PARALLEL = WorkflowSpec(name=Workflow.PARALLEL.value, build=_build)
"""Tasks as a dependency graph of their context."""


class DagRun:
    """One execution of a task graph."""

    def __init__(
        self,
        run: RunContext,
        strategy: ParallelErrorStrategy,
        *,
        on_drained: DrainedHook | None = None,
        partial_inputs: bool = False,
    ) -> None:
        self.run = run
        self.strategy = strategy
        self.on_drained = on_drained
        self.partial_inputs = partial_inputs
        self.members: dict[Task[Any], PlannedTask] = {}
        self.pending: dict[PlannedTask, int] = {}
        self.dependents: dict[Task[Any], list[PlannedTask]] = {}
        self.settled: set[Task[Any]] = set()
        self.broken: set[Task[Any]] = set()
        """Tasks that failed or were skipped."""
        self.failures: list[tuple[PlannedTask, Exception]] = []
        self.outputs: list[TaskOutput[Any]] = []
        self._group: asyncio.TaskGroup | None = None

    async def execute(self, plan: Sequence[PlannedTask]) -> tuple[TaskOutput[Any], ...]:
        """Run `plan`, then what `on_drained` gives each time the graph drains; raise the
        failures at the end."""
        import asyncio

        batch = plan
        while batch:
            try:
                async with asyncio.TaskGroup() as group:
                    self._group = group
                    self._add(batch)
            finally:
                self._group = None
            batch = await self._drained()
        self._raise_failures()
        return tuple(self.outputs)

    async def _drained(self) -> Sequence[PlannedTask]:
        """The next tasks from `on_drained`; none when there is no hook or the run is
        ending (an early end, or a failure under FAIL_FAST)."""
        if self.on_drained is None or self.run.stop.requested:
            return ()
        if self.failures and self.strategy is ParallelErrorStrategy.FAIL_FAST:
            return ()
        return await self.on_drained(self)

    def _add(self, tasks: Sequence[PlannedTask]) -> None:
        """Add tasks to the graph. A task waits for those of its context tasks that are in
        the graph and not yet settled; the others must have completed already (their outputs
        are read from the run)."""
        for planned in tasks:
            if planned.source in self.members:
                raise ValueError(f"DagRun: task '{planned.description}' is already in the graph")
            self.members[planned.source] = planned
        for planned in tasks:
            for dependency in planned.source.context:
                if dependency not in self.members and self.run.outputs.get(dependency) is None:
                    raise ValueError(
                        f"DagRun: task '{planned.description}' depends on "
                        f"'{dependency.description}', which is neither in the graph nor completed"
                    )
        ready = []
        for planned in tasks:
            waiting = 0
            for dependency in dict.fromkeys(planned.source.context):
                if dependency in self.members and dependency not in self.settled:
                    waiting += 1
                    self.dependents.setdefault(dependency, []).append(planned)
            self.pending[planned] = waiting
            if waiting == 0:
                ready.append(planned)
        self._release(ready)

    def _should_skip(self, planned: PlannedTask) -> bool:
        if self.run.stop.requested:  # ending early: nothing new starts
            return True
        if self.strategy is ParallelErrorStrategy.FAIL_FAST:
            return bool(self.failures)
        context = planned.source.context
        if self.partial_inputs:
            return bool(context) and all(dependency in self.broken for dependency in context)
        return any(dependency in self.broken for dependency in context)

    def _release(self, ready: list[PlannedTask]) -> None:
        """Start tasks whose dependencies have settled; skip those that must be skipped and
        settle them in turn (a work list, so a long chain of skips cannot overflow the stack)."""
        queue = deque(ready)
        while queue:
            planned = queue.popleft()
            if not self._should_skip(planned):
                if self._group is not None:
                    self._group.create_task(self._execute(planned))
                continue
            self._skip(planned)
            queue.extend(self._settle(planned))

    def _settle(self, finished: PlannedTask) -> list[PlannedTask]:
        """Mark a task finished (or skipped); return the dependents it made ready."""
        self.settled.add(finished.source)
        ready = []
        for dependent in self.dependents.pop(finished.source, ()):
            self.pending[dependent] -= 1
            if self.pending[dependent] == 0:
                ready.append(dependent)
        return ready

    async def _execute(self, planned: PlannedTask) -> None:
        # One coroutine per task, holding its slot without a context manager: thousands of
        # tasks wait at once here, and each live object is garbage-collector work.
        slots = self.run.task_slots
        if slots is not None:
            await slots.acquire()
        try:
            if self._should_skip(planned):  # a failure happened while it waited
                self._skip(planned)
            else:
                context = context_outputs(planned, self.run.outputs, strict=False)
                try:
                    output = await run_task(
                        TaskContext(run=self.run, planned=planned, context_outputs=context)
                    )
                except ControlFlowSignal as signal:
                    self._stopped(planned, signal)
                except Exception as error:
                    self._failed(planned, error)
                else:
                    self.outputs.append(output)
        finally:
            if slots is not None:
                slots.release()
        self._release(self._settle(planned))

    def _stopped(self, planned: PlannedTask, signal: ControlFlowSignal) -> None:
        """The run ends early; running tasks finish."""
        self.run.stop.request(signal)
        reviewed = self.run.outputs.get(planned.source)  # a task may complete, then stop
        if reviewed is not None:
            self.outputs.append(reviewed)
        else:
            self.broken.add(planned.source)

    def _failed(self, planned: PlannedTask, error: Exception) -> None:
        self.failures.append((planned, error))
        self.broken.add(planned.source)
        if self.strategy is ParallelErrorStrategy.FAIL_FAST:
            self.run.stop.failing = True

    def _skip(self, planned: PlannedTask) -> None:
        logger.info("Task %d skipped: %s", planned.index, planned.description[:80])
        self.broken.add(planned.source)

    def _raise_failures(self) -> None:
        if not self.failures or self.run.stop.requested:  # an early end wins (BEHAVIOUR 9.2)
            return
        completed = self.run.outputs.completed()
        if self.strategy is ParallelErrorStrategy.CONTINUE_ON_ERROR:
            raise ParallelExecutionError(
                completed_outputs=completed,
                failed_tasks={planned.source: error for planned, error in self.failures},
                total_tasks=len(self.members),
            )
        planned, error = self.failures[0]
        if getattr(error, "raised_as_is", False):  # a loop's own failure
            error.completed_outputs = completed  # type: ignore[attr-defined]
            raise error
        raise TaskExecutionError.of(
            error,
            task_description=planned.description,
            agent_role=planned.role,
            completed_outputs=completed,
        ) from error
