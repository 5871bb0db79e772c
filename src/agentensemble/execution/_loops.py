"""Loops and graph revisits: a task run again with what it produced before (BEHAVIOUR 9.8,
3.2 item 6), and the step that runs a `Loop`'s iterations as one task of the run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from agentensemble._calling import is_awaitable
from agentensemble.enums import LoopMemoryMode, LoopOutputMode, MaxIterationsAction
from agentensemble.errors import MaxLoopIterationsExceededError
from agentensemble.execution._context import TaskContext
from agentensemble.execution._prompts import PromptSection, PromptSlot
from agentensemble.execution._task_runner import context_outputs, run_in_turn
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

__all__ = ["GraphRecord", "LoopRecord", "LoopRunner", "kept", "revised"]

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
    flagged: bool = False
    """It ran out of iterations under ``RETURN_WITH_FLAG``."""
    last_output: TaskOutput[Any] | None = None
    """The body output that completed last (in a partial iteration too)."""


@dataclass(slots=True)
class GraphRecord:
    """A graph's walk in a run: each step, and why it stopped."""

    steps: list[GraphStep] = field(default_factory=list)
    termination_reason: str | None = None
    """``"terminal"``, ``"max_steps"``, or None while it runs (or if it was stopped)."""
    flagged: bool = False
    """It ran out of steps under ``RETURN_WITH_FLAG``."""


def kept(output: TaskOutput[Any]) -> TaskOutput[Any]:
    """`output` as a history keeps it: without its task trace (prompts, model calls), so a
    long loop or walk holds its outputs only. (Not read to see whether there is one: a
    trace is made when first read.)"""
    return dataclasses.replace(output, trace=None)


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
        state.add_prompt_section(section)

    steps: tuple[TaskStep, ...] = (add_revision, *planned.steps)
    return dataclasses.replace(planned, steps=steps)


@dataclass(frozen=True, slots=True)
class LoopRunner:
    """The one step of a loop's own task: its iterations, each running the body tasks in
    order as tasks of the run (their `parent_task_id` is the loop's task)."""

    loop: Loop
    body: tuple[PlannedTask, ...]
    composite: ClassVar[bool] = True
    """Its output is what its body's tasks make: a resumed run restores those, never the
    loop's own task."""

    async def __call__(self, state: TaskState) -> None:
        task, loop = state.task, self.loop
        run = task.run
        record = run.outputs.loops[loop.name]
        prior: TaskOutput[Any] | None = None
        iteration = 0
        while loop.max_iterations is None or iteration < loop.max_iterations:
            if run.stop.halted:
                break
            iteration += 1
            if iteration > 1:
                await self._reset_memory(run)
            outputs = await self._iteration(task, record, iteration, prior)
            if outputs is None:  # a reviewer ended the run
                break
            record.history.append({name: kept(output) for name, output in outputs.items()})
            prior = list(outputs.values())[-1]
            await self._announce(task, iteration, outputs)
            if loop.until is not None and await _holds(
                loop.until, LoopContext(iteration, outputs, tuple(record.history))
            ):
                record.termination_reason = "predicate"
                break
        else:
            self._ran_out(run, record, iteration)
        self._project(run, record)
        last = record.last_output
        state.raw = last.raw if last is not None else ""

    def _ran_out(self, run: RunContext, record: LoopRecord, iterations: int) -> None:
        record.termination_reason = "max_iterations"
        action = self.loop.on_max_iterations
        if action is MaxIterationsAction.THROW:
            raise MaxLoopIterationsExceededError(
                self.loop.name, iterations, completed_outputs=run.outputs.completed()
            )
        record.flagged = action is MaxIterationsAction.RETURN_WITH_FLAG

    async def _announce(
        self, task: TaskContext, iteration: int, outputs: dict[str, TaskOutput[Any]]
    ) -> None:
        run = task.run
        await run.events.emit(
            LoopIterationCompletedEvent(
                ensemble_id=run.run_id,
                seq=run.events.next_seq(),
                task_id=task.task_id,
                loop_name=self.loop.name,
                iteration=iteration,
                max_iterations=self.loop.max_iterations,
                outputs={name: output.raw for name, output in outputs.items()},
            )
        )

    async def _iteration(
        self,
        task: TaskContext,
        record: LoopRecord,
        iteration: int,
        prior: TaskOutput[Any] | None,
    ) -> dict[str, TaskOutput[Any]] | None:
        """Run the body once; None when a reviewer ended the run meanwhile."""
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
            output = await run_in_turn(
                TaskContext(
                    run=run,
                    planned=planned,
                    context_outputs=context,
                    parent_task_id=task.task_id,
                )
            )
            if output is not None:
                record.last_output = output
            if run.stop.requested or output is None:
                return None
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
    if is_awaitable(answer):
        answer = await answer
    return bool(answer)
