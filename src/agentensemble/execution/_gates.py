"""Review gates as task steps (BEHAVIOUR 10): before a task starts and after its output.

Reviews of a run take turns (`ask`); once the run is ending, a gate that has not asked yet
does not ask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentensemble._control import ControlFlowSignal
from agentensemble.execution._review import ask
from agentensemble.execution._structured_output import check_handler_output
from agentensemble.review import Review, ReviewDecision, ReviewRequest, ReviewTiming
from agentensemble.review._model import Continue, Edit, ExitEarly
from agentensemble.review._signals import ReviewNotAsked, RunPaused

if TYPE_CHECKING:
    from agentensemble.execution._steps import TaskState, TaskStep

__all__ = ["after_review", "before_review"]


def before_review(review: Review) -> TaskStep:
    """The gate before a task starts: ExitEarly ends the run without running it; an Edit
    counts as Continue (there is no output yet)."""

    async def before_review_gate(state: TaskState) -> None:
        _, stop = await _gate(state, review, ReviewTiming.BEFORE_EXECUTION, None)
        if stop is not None:
            raise stop

    return before_review_gate


def after_review(review: Review) -> TaskStep:
    """The gate after a task's output: an Edit replaces the output (a typed task's edit must
    parse as its output type); ExitEarly keeps this task's output and ends the run."""

    async def after_review_gate(state: TaskState) -> None:
        decision, state.stop = await _gate(state, review, ReviewTiming.AFTER_EXECUTION, state.raw)
        if isinstance(decision, Edit):
            state.raw = decision.revised_output
            if state.task.planned.source.output_spec is not None:
                state.parsed = None
                await check_handler_output(state)

    after_review_gate.resumes_here = True  # type: ignore[attr-defined]  # see run_task
    return after_review_gate


async def _gate(
    state: TaskState, review: Review, timing: ReviewTiming, output: str | None
) -> tuple[ReviewDecision, ControlFlowSignal | None]:
    """The decision, and the signal that ends the run when the reviewer exits (or the run
    is already ending: a task waiting at its before-gate then does not start, while a task
    at its after-gate completes without a question, unless the run paused: its output
    was never reviewed, so the task does not complete and a resumed run runs it again)."""
    run = state.task.run
    before = timing is ReviewTiming.BEFORE_EXECUTION
    request = ReviewRequest(
        task_description=state.task.planned.description,
        task_output=output,
        timing=timing,
        timeout=review.timeout,
        on_timeout=review.on_timeout,
        prompt=review.prompt,
        required_role=review.required_role,
    )
    label = state.task.planned.source.label
    exit_message = f"Reviewer exited early {'before' if before else 'after'} task '{label}'"
    decision = await ask(state.task, state.recorder, request, exit_ends_run=exit_message)
    if decision is None:  # the run is ending
        if isinstance(run.stop.signal, RunPaused) and not before:
            raise ReviewNotAsked  # paused: the output waits unreviewed, so it is not kept
        return Continue(), run.stop.signal if before else None
    if isinstance(decision, ExitEarly):
        return decision, run.stop.signal
    return decision, None
