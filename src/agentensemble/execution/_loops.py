"""Loops and graph revisits: a task run again with what it produced before (BEHAVIOUR 9.8,
3.2 item 6), and the step that runs a `Loop`'s iterations as one task of the run."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentensemble.enums import LoopMemoryMode, LoopOutputMode, MaxIterationsAction
from agentensemble.errors import MaxLoopIterationsExceededError
from agentensemble.execution._context import TaskContext
from agentensemble.execution._prompts import PromptSection, PromptSlot
from agentensemble.execution._task_runner import context_outputs, run_task
from agentensemble.loop import LoopContext, body_key
from agentensemble.memory import EvictionPolicy
from agentensemble.observability._events import LoopIterationCompletedEvent

if TYPE_CHECKING:
    from agentensemble.execution._context import RunContext
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.execution._steps import TaskState, TaskStep
    from agentensemble.graph import GraphStep
    from agentensemble.loop import Loop
    from agentensemble.outputs import TaskOutput

__all__ = ["GraphRecord", "LoopRecord", "LoopRunner", "revised"]

_LOOP_FEEDBACK = (
    "Loop iteration {iteration}{of}. Prior iteration's final body output is shown above; "
    "revise based on it."
)
_ITERATION_SEPARATOR = "\n\n--- iteration {k} ---\n\n"


@dataclass(slots=True)
class LoopRecord:
    """What one loop did in a run: each iteration's outputs, and why it stopped."""

    history: list[dict[str, TaskOutput[Any]]] = field(default_factory=list)
    termination_reason: str | None = None
    """``"predicate"``, ``"max_iterations"``, or None while it runs (or if it was stopped)."""


@dataclass(slots=True)
class GraphRecord:
    """A graph's walk in a run: each step, and why it stopped."""

    steps: list[GraphStep] = field(default_factory=list)
    termination_reason: str | None = None
    """``"terminal"``, ``"max_steps"``, or None while it runs (or if it was stopped)."""


def revised(planned: PlannedTask, feedback: str, prior: str, attempt: int) -> PlannedTask:
    """`planned` told to revise `prior` (a Revision Instructions section in its prompt)."""
    header = "## Revision Instructions" + (f" (Attempt {attempt + 1})" if attempt > 0 else "")
    text = (
        f"{header}\nThis task is being re-executed based on reviewer feedback. Incorporate "
        f"the feedback below into your response.\n\n### Feedback\n{feedback}"
    )
    if prior.strip():
        text += f"\n\n### Previous Output\n{prior}"
    section = PromptSection(PromptSlot.REVISION, f"{text}\n\n")

    async def add_revision(state: TaskState) -> None:
        state.prompt_sections.append(section)

    steps: tuple[TaskStep, ...] = (add_revision, *planned.steps)
    return dataclasses.replace(planned, steps=steps)


@dataclass(frozen=True, slots=True)
class LoopRunner:
    """The one step of a loop's own task: its iterations, each running the body tasks in
    order as tasks of the run (their `parent_task_id` is the loop's task)."""

    loop: Loop
    body: tuple[PlannedTask, ...]

    async def __call__(self, state: TaskState) -> None:
        task, loop = state.task, self.loop
        run = task.run
        record = run.outputs.loops.setdefault(loop.name, LoopRecord())
        prior: TaskOutput[Any] | None = None
        iteration = 0
        while loop.max_iterations is None or iteration < loop.max_iterations:
            if run.stop.requested:
                return
            iteration += 1
            if iteration > 1:
                await self._reset_memory(run)
            outputs = await self._iteration(task, iteration, prior)
            record.history.append(outputs)
            prior = list(outputs.values())[-1]
            await run.events.emit(
                LoopIterationCompletedEvent(
                    ensemble_id=run.run_id,
                    seq=run.events.next_seq(),
                    task_id=task.task_id,
                    loop_name=loop.name,
                    iteration=iteration,
                    max_iterations=loop.max_iterations,
                    outputs={name: output.raw for name, output in outputs.items()},
                )
            )
            if loop.until is not None and await _holds(
                loop.until, LoopContext(iteration, outputs, tuple(record.history))
            ):
                record.termination_reason = "predicate"
                break
        else:
            record.termination_reason = "max_iterations"
            if loop.on_max_iterations is MaxIterationsAction.THROW:
                raise MaxLoopIterationsExceededError(
                    loop.name, iteration, completed_outputs=run.outputs.completed()
                )
        self._project(run, record)
        state.raw = prior.raw if prior is not None else ""

    async def _iteration(
        self, task: TaskContext, iteration: int, prior: TaskOutput[Any] | None
    ) -> dict[str, TaskOutput[Any]]:
        loop, run = self.loop, task.run
        outputs: dict[str, TaskOutput[Any]] = {}
        for position, planned in enumerate(self.body):
            outer: tuple[TaskOutput[Any], ...] = ()
            if position == 0:
                outer = task.context_outputs
                if iteration > 1 and loop.inject_feedback and prior is not None:
                    of = f" of {loop.max_iterations}" if loop.max_iterations else ""
                    feedback = _LOOP_FEEDBACK.format(iteration=iteration, of=of)
                    planned = revised(planned, feedback, prior.raw, iteration - 1)
            context = (*outer, *context_outputs(planned, run.outputs, strict=True))
            output = await run_task(
                TaskContext(
                    run=run,
                    planned=planned,
                    context_outputs=context,
                    parent_task_id=task.task_id,
                )
            )
            outputs[body_key(planned.source)] = output
        return outputs

    async def _reset_memory(self, run: RunContext) -> None:
        """What the body's memory scopes keep into the next iteration (`memory_mode`)."""
        mode, store = self.loop.memory_mode, run.memory.store if run.memory else None
        if mode is LoopMemoryMode.ACCUMULATE or store is None:
            return
        scopes = {scope.name for planned in self.body for scope in planned.source.memory}
        for scope in sorted(scopes):
            if mode is LoopMemoryMode.FRESH_PER_ITERATION:
                await store.clear(scope)
            else:
                size = self.loop.memory_window_size or 1
                await store.evict(scope, EvictionPolicy.keep_last_entries(size))

    def _project(self, run: RunContext, record: LoopRecord) -> None:
        """The loop's outputs as the ensemble's output keeps them (`output_mode`)."""
        mode = self.loop.output_mode
        tasks = [planned.source for planned in self.body]
        if mode is LoopOutputMode.FINAL_TASK_ONLY:
            for task in tasks[:-1]:
                run.outputs.discard(task)
        elif mode is LoopOutputMode.ALL_ITERATIONS:
            for task in tasks:
                key = body_key(task)
                raws = [outputs[key].raw for outputs in record.history if key in outputs]
                last = run.outputs.get(task)
                if last is None or not raws:
                    continue
                joined = raws[0] + "".join(
                    _ITERATION_SEPARATOR.format(k=k) + raw for k, raw in enumerate(raws[1:], 2)
                )
                run.outputs.replace(task, dataclasses.replace(last, raw=joined))


async def _holds(until: Any, context: LoopContext) -> bool:
    answer = until(context)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)
