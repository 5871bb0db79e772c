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

import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from inspect import CORO_CREATED, getcoroutinestate, iscoroutine
from typing import TYPE_CHECKING, Any

from agentensemble._control import ControlFlowSignal
from agentensemble._frozen import direct_new
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
        self._running: dict[asyncio.Task[TaskOutput[Any] | None], PlannedTask] = {}
        self._on_done: Callable[[asyncio.Task[Any]], None] | None = None
        self._on_error: Callable[[BaseException], None] | None = None
        self._callbacks: contextvars.Context | None = None
        self._idle: asyncio.Future[None] | None = None
        self._cancelled = False
        self._failing = False
        """A task failed under FAIL_FAST (set as it raises, before it is settled)."""
        self._unstarted: set[asyncio.Task[Any]] = set()
        """Tasks cancelled before their first step because the run stopped: skipped."""
        self._swept = False
        """Whether the unstarted tasks were swept (at the first halt: nothing starts after)."""
        self._error: BaseException | None = None
        """What stops the graph other than its tasks' failures: a KeyboardInterrupt in a task,
        an error in the scheduler's own bookkeeping."""

    async def execute(self, plan: Sequence[PlannedTask]) -> tuple[TaskOutput[Any], ...]:
        """Run `plan`, then what `on_drained` gives each time the graph drains; raise the
        failures at the end."""
        # One done-callback (and one context to run it in) and one error hook for every task
        # of the graph: bound methods made per task would be more objects per task in flight.
        self._on_done, self._on_error = self._finished, self._halt
        self._callbacks = contextvars.copy_context()
        try:
            batch = plan
            while batch:
                try:
                    self._add(batch)
                except BaseException as error:  # a bad batch: what it started stops too
                    self._error = self._error or error
                    self._cancel_all()
                await self._all_finished()
                batch = await self._drained()
        finally:
            self._on_done = self._on_error = None  # they refer to the run: no cycle outlives it
            self._callbacks = None
        self._raise_failures()
        return tuple(self.outputs)

    async def _all_finished(self) -> None:
        """Wait until every started task has finished. When this run is cancelled, cancel
        them, wait for them all the same (none outlives the run: each records its own end),
        then raise the cancellation."""
        import asyncio

        cancelled: asyncio.CancelledError | None = None
        while self._running:
            self._idle = asyncio.get_running_loop().create_future()
            try:
                await self._idle
            except asyncio.CancelledError as error:
                cancelled = cancelled or error
                self._cancel_all()
        self._idle = None
        if self._error is not None:
            raise self._error
        if cancelled is not None:
            raise cancelled

    def _cancel_all(self) -> None:
        """Cancel every running task; nothing new starts after this."""
        self._cancelled = True
        for task in self._running:
            task.cancel()

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
            return self._failing
        context = planned.source.context
        if self.partial_inputs:
            return bool(context) and all(dependency in self.broken for dependency in context)
        return any(dependency in self.broken for dependency in context)

    def _release(self, ready: list[PlannedTask]) -> None:
        """Start tasks whose dependencies have settled; skip those that must be skipped and
        settle them in turn (a work list, so a long chain of skips cannot overflow the stack)."""
        if self._cancelled:
            return
        queue = deque(ready)
        while queue:
            planned = queue.popleft()
            if not self._should_skip(planned):
                self._start(planned)
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

    def _start(self, planned: PlannedTask) -> None:
        """Start a task as an asyncio task of its own, running `run_task` itself (not a
        wrapper coroutine: thousands of tasks may wait at once, each frame kept alive);
        `_finished` settles it. Under `max_concurrency` it first waits for a slot."""
        import asyncio

        if self._on_done is None:  # set for as long as the graph runs
            raise AssertionError("DagRun: a task started outside execute()")
        slots = self.run.task_slots
        coroutine = self._in_slot(slots, planned) if slots is not None else self._run(planned)
        task = asyncio.get_running_loop().create_task(coroutine)
        self._running[task] = planned
        task.add_done_callback(self._on_done, context=self._callbacks)

    def _run(self, planned: PlannedTask) -> Coroutine[Any, Any, TaskOutput[Any]]:
        context = context_outputs(planned, self.run.outputs, strict=False)
        return run_task(
            direct_new(TaskContext)(run=self.run, planned=planned, context_outputs=context),
            self._on_error,
        )

    def _halt(self, error: BaseException) -> None:
        """A task is raising `error`: stop the run now, before anything else starts (the task
        is settled in `_finished`, a step later): an early end is requested, and under
        FAIL_FAST a failure (a task's own cancellation too) marks the run failing (a loop
        stops at its next turn)."""
        import asyncio

        if isinstance(error, ControlFlowSignal):
            self.run.stop.request(error)
            self._skip_unstarted()
        elif isinstance(error, asyncio.CancelledError) and self._cancelled:
            return  # cancelled with the run
        elif self.strategy is ParallelErrorStrategy.FAIL_FAST:
            self._fail_fast()

    def _fail_fast(self) -> None:
        """A failure under FAIL_FAST: the run is failing (a loop stops at its next turn) and
        nothing new starts."""
        self._failing = self.run.stop.failing = True
        self._skip_unstarted()

    def _skip_unstarted(self) -> None:
        """Tasks created but not yet started (released in the same step) never start: each
        is cancelled before its first step and settled as skipped. Once is enough: nothing
        new starts after a halt."""
        if self._swept:
            return
        self._swept = True
        for task in self._running:
            if _not_started(task):
                self._unstarted.add(task)
                task.cancel()

    async def _in_slot(
        self, slots: asyncio.Semaphore, planned: PlannedTask
    ) -> TaskOutput[Any] | None:
        """Run the task in one of the run's slots; None when it is skipped after all (a
        failure happened while it waited)."""
        async with slots:
            if self._should_skip(planned):
                self._skip(planned)
                return None
            return await self._run(planned)

    def _finished(self, task: asyncio.Task[TaskOutput[Any] | None]) -> None:
        """Settle a finished task: keep its output or its failure, start the dependents it
        made ready, and wake the run when nothing is left running. (A done-callback: what it
        raises would only be logged by the loop, so it stops the graph instead.)"""
        try:
            planned = self._running.pop(task)
            self._take_outcome(task, planned)
            self._release(self._settle(planned))
        except BaseException as error:
            self._error = self._error or error
            self._cancel_all()
        finally:
            if not self._running and self._idle is not None and not self._idle.done():
                self._idle.set_result(None)

    def _take_outcome(
        self, task: asyncio.Task[TaskOutput[Any] | None], planned: PlannedTask
    ) -> None:
        if task.cancelled():
            if task in self._unstarted:  # the run stopped before it started
                self._unstarted.discard(task)
                self._skip(planned)
            elif self._cancelled:  # with the run: its end is recorded, the run raises
                self.broken.add(planned.source)
            else:  # on its own (a tool cancelled the task it runs in): a failure
                self._failed(planned, RuntimeError("the task was cancelled, not the run"))
        elif (error := task.exception()) is None:
            output = task.result()
            if output is not None:
                self.outputs.append(output)
        elif isinstance(error, ControlFlowSignal):
            self._stopped(planned, error)
        elif isinstance(error, Exception):
            self._failed(planned, error)
        else:  # KeyboardInterrupt, SystemExit: stop everything and raise it
            self._error = self._error or error
            self._cancel_all()

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
            self._fail_fast()  # already done as it raised, unless it failed outside its task

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


def _not_started(task: asyncio.Task[Any]) -> bool:
    """Whether the task's coroutine has not taken its first step yet."""
    coroutine = task.get_coro()
    return iscoroutine(coroutine) and getcoroutinestate(coroutine) == CORO_CREATED
