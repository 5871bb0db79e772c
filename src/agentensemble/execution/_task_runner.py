"""Run one task execution: its steps in order, inside its log context and events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentensemble._control import ControlFlowSignal
from agentensemble.errors import (
    AgentExecutionError,
    CheckpointError,
    OutputParsingError,
    TaskExecutionError,
)
from agentensemble.execution._recorder import TaskRecorder
from agentensemble.execution._steps import TaskState
from agentensemble.execution._structured_output import check_handler_output
from agentensemble.review._signals import RunPaused

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentensemble.execution._checkpointing import RunCheckpoint, Slot
    from agentensemble.execution._context import RunOutputs, TaskContext
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.execution._steps import TaskStep
    from agentensemble.observability._events import TaskCompleteEvent
    from agentensemble.outputs import TaskOutput

__all__ = ["context_outputs", "run_task"]


def context_outputs(
    planned: PlannedTask, completed: RunOutputs, *, strict: bool
) -> tuple[TaskOutput[Any], ...]:
    """Outputs of the task's context tasks, in declared order.

    `strict` raises when one is missing (sequential runs); otherwise missing ones are skipped.
    """
    found = []
    for dependency in planned.source.context:
        output = completed.get(dependency)
        if output is not None:
            found.append(output)
        elif strict:
            raise TaskExecutionError(
                f"Context task not yet completed: {dependency.description}",
                task_description=dependency.description,
                agent_role=dependency.agent.role if dependency.agent else "",
            )
    return tuple(found)


async def run_in_turn(task: TaskContext) -> TaskOutput[Any] | None:
    """Run a task of a sequence (a sequential run, a loop's body, a graph's states).

    Returns its output, or None when a reviewer ended the run before it completed (the
    stop is then requested on the run; a task that completed and then ended the run returns
    its output). An `OutputParsingError` and an error marked ``raised_as_is`` are raised as
    they are, any other failure as the task's `TaskExecutionError` (marked ``raised_as_is``,
    so that an enclosing loop's task passes it on); each carries every completed output.
    """
    run, planned = task.run, task.planned
    try:
        return await run_task(task)
    except ControlFlowSignal as signal:
        run.stop.request(signal)
        if run.outputs.task_id_of(planned.source) == task.task_id:
            return run.outputs.get(planned.source)
        return None
    except OutputParsingError as error:
        error.completed_outputs = run.outputs.completed()
        raise
    except Exception as error:
        if isinstance(error, TaskExecutionError) and getattr(error, "raised_as_is", False):
            error.completed_outputs = run.outputs.completed()
            raise
        failure = TaskExecutionError.of(
            error,
            task_description=planned.description,
            agent_role=planned.role,
            completed_outputs=run.outputs.completed(),
        )
        failure.raised_as_is = True  # type: ignore[attr-defined]
        raise failure from error


async def run_task(
    task: TaskContext, on_error: Callable[[BaseException], None] | None = None
) -> TaskOutput[Any]:
    """Run the task's steps; fire start/complete/failed events. Failures are re-raised as is.

    A task of the ensemble (depth 0) that completes is recorded in the run's outputs. Steps
    before the start (a before-review gate) may end the run without the task starting; a
    step may also let the task complete and then end the run (`TaskState.stop`).

    `on_error` is called with the failure, control-flow signal or cancellation the task
    raises, in the same step, before it propagates: a scheduler that settles its tasks
    later, in a done callback, can still stop the run before anything else starts.
    """
    try:
        planned = task.planned
        recorder = TaskRecorder(task)
        state = TaskState(task, recorder)
        steps: Sequence[TaskStep] = planned.steps
        slot = None
        checkpoint = task.run.checkpoint
        if checkpoint is not None:  # a run without one pays for nothing here
            slot = _slot(task, checkpoint)
            if slot is not None and slot.recorded is not None:
                return await _restore(task, recorder, slot.recorded)
            if slot is not None:
                steps = _steps_to_run(checkpoint, state, slot)
        # records logged during the task carry its log context (entered and left by hand: a
        # `with` block keeps its bound __exit__ alive, an object more per waiting task)
        recorder.log_in()
        try:
            for step in planned.before_start:  # a gate may end the run before the task starts
                await step(state)
            try:  # a task that started always ends: a cancel while listeners hear the start too
                await recorder.task_started()
                if planned.source.timeout is None:  # inline: a coroutine less per running task
                    # by position, without an iterator: one would stay alive while a step
                    # waits (a tuple's, one more object for the garbage collector to walk;
                    # a range's, 48 bytes more per waiting task)
                    position = 0
                    while position < len(steps):
                        await steps[position](state)
                        position += 1
                else:
                    await _run_steps_within(state, steps, planned.source.timeout)
            except (Exception, asyncio.CancelledError, ControlFlowSignal) as error:
                if isinstance(error, RunPaused) and slot is not None and not error.task_key:
                    error.task_key = slot.key  # where a resumed run picks the task up
                await recorder.task_failed(error)  # cancelled or ended early: still an ending
                raise
            event, output = recorder.completed(state.raw, state.parsed)
            _keep(task, output)
            if slot is not None:
                await _record(task, slot, event, output)
            await task.run.events.deliver(event)
        finally:
            recorder.log_out()
        if state.late_failure is not None:
            raise state.late_failure
        if state.stop is not None:
            raise state.stop
        return output
    except (Exception, asyncio.CancelledError, ControlFlowSignal) as error:
        if on_error is not None:
            on_error(error)
        raise


def _keep(task: TaskContext, output: TaskOutput[Any]) -> None:
    """A task of the ensemble (depth 0) that completes is recorded in the run's outputs."""
    if task.depth == 0:
        planned = task.planned
        replaced = task.run.outputs.task_id_of(planned.source)
        task.run.outputs.record(planned.source, output, task.task_id)
        if replaced:  # a loop's earlier iteration, a graph state's earlier visit
            task.run.trace.release(replaced)


async def _record(
    task: TaskContext, slot: Slot, event: TaskCompleteEvent, output: TaskOutput[Any]
) -> None:
    """Record the completed task in the run's checkpoint; when the store fails, listeners
    still hear that the task completed before the run stops on the `CheckpointError`."""
    checkpoint = task.run.checkpoint
    if checkpoint is None:  # a slot exists only in a run with a checkpoint
        raise AssertionError("recording a task in a run without a checkpoint")
    try:
        await checkpoint.record(slot, event, output)
    except CheckpointError:
        await task.run.events.deliver(event)
        raise


def _slot(task: TaskContext, checkpoint: RunCheckpoint) -> Slot | None:
    """The task's place in the run's checkpoint (None for a loop's own task, whose output
    its body's tasks make again)."""
    steps = task.planned.steps
    if steps and getattr(steps[0], "composite", False):
        return None
    return checkpoint.slot(task)


async def _restore(
    task: TaskContext, recorder: TaskRecorder, recorded: TaskCompleteEvent
) -> TaskOutput[Any]:
    """A task a resumed run completed before: its start, then its recorded completion,
    without running it (nor its review gates) again."""
    checkpoint = task.run.checkpoint
    if checkpoint is None:  # only a run with a checkpoint has recorded tasks
        raise AssertionError("restoring a task in a run without a checkpoint")
    recorder.log_in()
    try:
        await recorder.task_started()
        event, output = recorder.restored(recorded, checkpoint.parsed(task, recorded))
        if task.run.budget is not None:
            task.run.budget.restored(output.metrics.llm_call_count)
        _keep(task, output)
        await task.run.events.deliver(event)
    finally:
        recorder.log_out()
    return output


def _steps_to_run(checkpoint: RunCheckpoint, state: TaskState, slot: Slot) -> Sequence[TaskStep]:
    """The task's steps; for the task a resumed run paused at after its output, only its
    after-review gate and what follows, on the output it had (no model call again)."""
    steps = state.task.planned.steps
    held = checkpoint.output_at_gate(slot)
    if held is None:
        return steps
    gate = next((i for i, step in enumerate(steps) if getattr(step, "resumes_here", False)), None)
    if gate is None:  # the task's review was removed since: it runs again, unreviewed
        return steps
    state.raw = held
    return (_parse_held, *steps[gate:])


async def _parse_held(state: TaskState) -> None:
    """A typed task's held output, parsed again (the gate may approve it as it is)."""
    if state.task.planned.source.output_spec is not None:
        await check_handler_output(state)


async def _run_steps_within(state: TaskState, steps: Sequence[TaskStep], seconds: float) -> None:
    """Every step in order, within the task's deadline (its `Task.timeout`)."""
    planned = state.task.planned
    try:
        async with asyncio.timeout(seconds) as deadline:
            with state.task.deadlines.registered(deadline):
                for step in steps:
                    await step(state)
    except TimeoutError:
        if not deadline.expired():
            raise
        raise AgentExecutionError(
            f"Task '{planned.source.label}' timed out after {seconds:g}s (its Task timeout)",
            agent_role=planned.role,
            task_description=planned.description,
        ) from None
