"""`TraceFold`: a run's events folded into its `ExecutionTrace`, task traces and metrics.

The live run feeds its fold every event as it is emitted (before any listener), and reads
each task's trace and metrics back from it when the task completes; a saved event log folds
into the same trace (`ExecutionTrace.from_events`). The fold keeps only what the trace
needs: per task, its start, prompts, model calls with their tool calls, delegations and
memory operations, until the task ends.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from agentensemble._frozen import Deferred, direct_new
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._events import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    Event,
    GraphStateCompletedEvent,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    LoopIterationCompletedEvent,
    MemoryOperationEvent,
    RunWarningEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskInputEvent,
    TaskStartEvent,
    ToolCallEvent,
)
from agentensemble.observability._json import json_data
from agentensemble.observability._metrics import NO_TIME, ExecutionMetrics, TaskMetrics, add_known
from agentensemble.observability._recording import capture_messages, parse_input
from agentensemble.observability._trace import (
    DelegationTrace,
    ErrorTrace,
    ExecutionTrace,
    GraphStepTrace,
    LlmInteraction,
    LoopIterationTrace,
    MemoryOperationTrace,
    PromptTrace,
    TaskTrace,
    ToolCallTrace,
)

if TYPE_CHECKING:
    from datetime import datetime

    from agentensemble.models import Message

__all__ = ["ExecutionTraceToMake", "TaskTraceToMake", "TraceFold", "Usage"]

T = TypeVar("T")

_WRITES = frozenset({"store", "evict", "clear"})
"""Memory operations that are not retrievals (not in `memory_retrieval_time`)."""


class Usage(NamedTuple):
    """Model calls so far: tokens (-1 when any call reported none) and counts."""

    input_tokens: int
    output_tokens: int
    model_calls: int
    tool_calls: int = 0


def _appended(items: Sequence[T], item: T) -> list[T]:
    """`items` with `item` at the end: the list itself, or a new one in place of the empty
    tuple a task starts with (most tasks make no tool call, delegation or memory operation,
    and thousands of tasks may be running at once)."""
    if isinstance(items, list):
        items.append(item)
        return items
    return [*items, item]


def _plus(total: timedelta, more: timedelta) -> timedelta:
    """`total` + `more`, without a new object when `total` is still zero (most tasks make
    one model call: their latency is that call's own object)."""
    return total + more if total else more


class _Call:
    """One model call of a task, once answered: when it was sent (and its messages, when
    the trace captures them), its answer, then its tool calls."""

    __slots__ = ("completed", "messages", "started_at", "tool_calls")

    def __init__(
        self,
        started_at: datetime | None,
        messages: tuple[Message, ...],
        completed: LlmIterationCompletedEvent,
    ) -> None:
        self.started_at = started_at
        self.messages = messages
        self.completed = completed
        self.tool_calls: Sequence[ToolCallTrace] = ()


class _Task:
    """One task execution being assembled, with its running totals. It keeps the fields of
    its start event that the trace needs, not the event: thousands may be running at once."""

    __slots__ = (
        "agent_role",
        "call_messages",
        "call_started_at",
        "calls",
        "delegations",
        "description",
        "expected_output",
        "index",
        "input_tokens",
        "llm_calls",
        "llm_latency",
        "map_reduce_level",
        "memory",
        "memory_time",
        "name",
        "node_type",
        "output_tokens",
        "prompt_time",
        "started_at",
        "system_prompt",
        "tool_calls",
        "tool_time",
        "user_prompt",
    )

    def __init__(self, start: TaskStartEvent) -> None:
        self.index = start.task_index
        self.agent_role = start.agent_role
        self.description = start.task_description
        self.expected_output = start.expected_output
        self.started_at = start.timestamp
        self.name = start.name
        self.node_type = start.node_type
        self.map_reduce_level = start.map_reduce_level
        # the prompt texts, not a PromptTrace, until the trace is made: one object less
        # per running task for the garbage collector to walk
        self.system_prompt = ""
        self.user_prompt: str | None = None
        self.prompt_time = NO_TIME
        self.calls: tuple[_Call, ...] = ()
        # the call in flight: when it was sent and its messages (when the trace captures
        # them), not a _Call until it is answered: thousands of tasks may be waiting on one
        self.call_started_at: datetime | None = None
        self.call_messages: tuple[Message, ...] = ()
        self.delegations: Sequence[DelegationTrace] = ()
        self.memory: Sequence[MemoryOperationTrace] = ()
        self.input_tokens = 0
        self.output_tokens = 0
        self.llm_calls = 0
        self.llm_latency = NO_TIME
        self.tool_calls = 0
        self.tool_time = NO_TIME
        self.memory_time = NO_TIME

    def metrics(self, cost: CostConfiguration | None) -> TaskMetrics:
        return direct_new(TaskMetrics)(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=add_known(self.input_tokens, self.output_tokens),
            llm_latency=self.llm_latency,
            tool_execution_time=self.tool_time,
            prompt_build_time=self.prompt_time,
            memory_retrieval_time=self.memory_time,
            llm_call_count=self.llm_calls,
            tool_call_count=self.tool_calls,
            memory_operations=len(self.memory),
            cost_estimate=cost.estimate(self.input_tokens, self.output_tokens) if cost else None,
        )


class TraceFold:
    """Folds one run's events (``on(event)``, then ``result()``) into its trace."""

    def __init__(self) -> None:
        self._started: EnsembleStartedEvent | None = None
        self._inputs: dict[str, str] = {}
        self._capture = CaptureMode.OFF
        self._cost: CostConfiguration | None = None
        self._running: dict[str, _Task] = {}
        self._done: dict[str, tuple[TaskTrace | TaskTraceToMake, TaskMetrics]] = {}
        self._completed: EnsembleCompletedEvent | None = None
        self._result: ExecutionTrace | None = None
        self._failed: list[TaskTrace] = []
        self._failed_workers: dict[str, TaskTrace] = {}
        self._requests: dict[str, DelegationStartedEvent] = {}
        self._metrics: tuple[tuple[int, tuple[LlmInteraction, ...]], ExecutionMetrics] | None = None
        self._iterations: list[LoopIterationTrace] = []
        self._steps: list[GraphStepTrace] = []
        self._warnings: list[str] = []
        self._run_tokens = [0, 0, 0]
        """The run's input tokens, output tokens and model calls so far."""

    @classmethod
    def of(cls, events: Iterable[Event]) -> ExecutionTrace:
        """The trace of a whole run's events (they must end with `ensemble_completed`)."""
        fold = cls()
        for event in events:
            fold.on(event)
            if type(event) is EnsembleCompletedEvent:
                fold.result()  # made now: a later run's events (a resumed run's) are not its
        return fold.result()

    @property
    def handlers(self) -> Mapping[type[Any], Callable[[TraceFold, Any], None]]:
        """What the trace takes from each kind of event."""
        return _HANDLERS

    def on(self, event: Event) -> None:
        """Take in one event (events of kinds the trace does not record are ignored)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def result(self) -> ExecutionTrace:
        """The run's trace, once `ensemble_completed` has been folded in."""
        if self._result is None:
            if self._completed is None:
                raise ValueError("the events do not include the run's ensemble_completed event")
            self._result = self.trace_for(self._completed)
        return self._result

    def result_to_make(self) -> ExecutionTrace | ExecutionTraceToMake:
        """`result`, to make when first read (`EnsembleOutput.trace`), unless it is made
        already (an exporter read it). It holds what the trace is made of, not the fold."""
        if self._result is not None:
            return self._result
        if self._completed is None:
            raise ValueError("the events do not include the run's ensemble_completed event")
        return ExecutionTraceToMake(self._trace_parts(self._completed))

    def release(self, task_id: str) -> None:
        """Keep only the metrics of a completed task whose output another execution of the
        same task replaced (a loop's earlier iteration, a graph state's earlier visit): its
        prompts and model calls are not in the run's trace, and a long loop stays small."""
        done = self._done.get(task_id)
        if done is not None:
            trace, metrics = done
            if isinstance(trace, TaskTraceToMake):
                light = trace.light()
            else:
                light = dataclasses.replace(
                    trace, prompts=None, llm_interactions=(), final_output=""
                )
            self._done[task_id] = (light, metrics)

    def task_result(self, task_id: str) -> tuple[TaskTrace | TaskTraceToMake, TaskMetrics]:
        """The trace (or the trace to make when it is first read) and metrics of a
        completed task."""
        return self._done[task_id]

    @property
    def run_usage(self) -> Usage:
        """The run's model calls so far (every task, running or done): tokens and calls."""
        return Usage(*self._run_tokens)

    def usage(self, task_id: str) -> Usage:
        """A running task's model calls so far: tokens and calls."""
        task = self._running.get(task_id)
        if task is None:
            return Usage(0, 0, 0)
        return Usage(task.input_tokens, task.output_tokens, task.llm_calls, task.tool_calls)

    def metrics(self, synthesis: Iterable[LlmInteraction] = ()) -> ExecutionMetrics:
        """The run's totals: every completed task (delegated workers too) and the model calls
        made while planning."""
        interactions = tuple(synthesis)
        key = (len(self._done), interactions)
        if self._metrics is None or self._metrics[0] != key:
            tasks = [metrics for _, metrics in self._done.values()]
            if interactions:
                tasks.append(_synthesis_metrics(interactions))
            self._metrics = (key, ExecutionMetrics.of(tasks))
        return self._metrics[1]

    def trace_for(self, completed: EnsembleCompletedEvent) -> ExecutionTrace:
        """The trace the run would have if it ended with `completed` (nothing is kept)."""
        return _execution_trace(self._trace_parts(completed))

    def _trace_parts(self, completed: EnsembleCompletedEvent) -> _RunParts:
        """What the trace of a run ending with `completed` is made of, as it is now."""
        started = self._started
        if started is None:
            raise ValueError("the events do not include the run's ensemble_started event")
        traces = []
        for task_id in completed.output_task_ids:
            done = self._done.get(task_id)
            if done is None:
                raise ValueError(
                    f"the events do not include the completion of task {task_id!r}, one of "
                    "the run's outputs (an event log that dropped events cannot be folded)"
                )
            traces.append(done[0])
        return (
            started,
            completed,
            self._inputs,
            tuple(traces),
            self.metrics(completed.agent_synthesis),
            tuple(self._failed),
            tuple(self._iterations),
            tuple(self._steps),
            tuple(self._warnings),
        )

    # ---- the run ---------------------------------------------------------------------------

    def _ensemble_started(self, event: EnsembleStartedEvent) -> None:
        self._started = event
        self._inputs = dict(event.inputs)  # the trace's own: a listener may change the event's
        self._capture = CaptureMode(event.capture_mode)
        self._cost = event.cost_configuration

    def _ensemble_completed(self, event: EnsembleCompletedEvent) -> None:
        self._completed, self._result = event, None  # the trace is made when first asked for

    # ---- tasks -----------------------------------------------------------------------------

    def _task_started(self, event: TaskStartEvent) -> None:
        self._running[event.task_id] = _Task(event)

    def _task_input(self, event: TaskInputEvent) -> None:
        task = self._running.get(event.task_id)
        if task is not None:
            task.system_prompt, task.user_prompt = event.system_prompt, event.user_prompt
            task.prompt_time = event.prompt_build_time

    def _task_completed(self, event: TaskCompleteEvent) -> None:
        task = self._running.pop(event.task_id, None)
        if task is None:
            return
        if event.restored_trace is not None:
            restored = dataclasses.replace(
                event.restored_trace,
                task_index=task.index,
                restored=True,
                node_type=task.node_type,
                map_reduce_level=task.map_reduce_level,
            )
            self._done[event.task_id] = (restored, restored.metrics)
            self._count_restored(restored.metrics)
            return
        metrics = task.metrics(self._cost)
        parsed = event.parsed_output
        self._done[event.task_id] = (
            TaskTraceToMake(
                self._capture,
                task,
                event.duration,
                metrics,
                event.raw,
                None if parsed is None else _owned(parsed),
            ),
            metrics,
        )

    def _count_restored(self, metrics: TaskMetrics) -> None:
        """A restored task's model calls count in the run's usage (its budgets, its hooks)
        as they did in the run that made them."""
        run = self._run_tokens
        run[0] = add_known(run[0], metrics.input_tokens)
        run[1] = add_known(run[1], metrics.output_tokens)
        run[2] += metrics.llm_call_count

    def _task_failed(self, event: TaskFailedEvent) -> None:
        """A failed (or cancelled) task keeps what it did: the run's own failures go to
        `failed_tasks`, a delegated worker's to its delegation."""
        task = self._running.pop(event.task_id, None)
        if task is None:
            return
        error = ErrorTrace(
            task_description=event.task_description,
            agent_role=event.agent_role,
            error_type=event.error_type,
            message=event.reason,
        )
        duration = event.duration
        trace = dataclasses.replace(
            _task_trace(
                self._capture,
                task,
                duration,
                task.started_at + duration,
                task.metrics(self._cost),
                "",
            ),
            error=error,
        )
        if event.parent_task_id is None:
            self._failed.append(trace)
        else:
            self._failed_workers[event.task_id] = trace

    # ---- model and tool calls --------------------------------------------------------------

    def _llm_started(self, event: LlmIterationStartedEvent) -> None:
        task = self._running.get(event.task_id)
        if task is not None:
            task.call_started_at = event.timestamp
            task.call_messages = event.messages if self._capture is not CaptureMode.OFF else ()

    def _llm_completed(self, event: LlmIterationCompletedEvent) -> None:
        task = self._running.get(event.task_id)
        if task is None:
            return
        task.calls = (*task.calls, _Call(task.call_started_at, task.call_messages, event))
        task.call_started_at, task.call_messages = None, ()
        task.input_tokens = add_known(task.input_tokens, event.input_tokens)
        task.output_tokens = add_known(task.output_tokens, event.output_tokens)
        task.llm_latency = _plus(task.llm_latency, event.latency)
        task.llm_calls += 1
        run = self._run_tokens
        run[0] = add_known(run[0], event.input_tokens)
        run[1] = add_known(run[1], event.output_tokens)
        run[2] += 1

    def _tool_called(self, event: ToolCallEvent) -> None:
        task = self._running.get(event.task_id)
        if task is None or not task.calls:
            return
        if event.outcome != "SKIPPED_MAX_ITERATIONS":
            task.tool_calls += 1
            task.tool_time = _plus(task.tool_time, event.duration)
        started_at = event.timestamp - event.duration
        call = task.calls[-1]
        call.tool_calls = _appended(
            call.tool_calls,
            ToolCallTrace(
                tool_call_id=event.tool_call_id,
                tool_name=event.tool_name,
                arguments=event.tool_arguments,
                parsed_input=parse_input(event.tool_arguments)
                if self._capture is CaptureMode.FULL
                else None,
                result=event.tool_result,
                structured_output=_owned(event.structured_result),
                started_at=started_at,
                completed_at=event.timestamp,
                duration=event.duration,
                outcome=event.outcome,
            ),
        )

    # ---- memory and delegation -------------------------------------------------------------

    def _memory_operation(self, event: MemoryOperationEvent) -> None:
        task = self._running.get(event.task_id)
        if task is None:
            return
        if event.operation not in _WRITES:
            task.memory_time = _plus(task.memory_time, event.duration)
        task.memory = _appended(
            task.memory,
            MemoryOperationTrace(
                operation=event.operation,
                scope=event.scope,
                entry_count=event.entry_count,
                started_at=event.timestamp - event.duration,
                duration=event.duration,
            ),
        )

    def _delegation_started(self, event: DelegationStartedEvent) -> None:
        self._requests[event.delegation_id] = event

    def _delegation_ended(self, event: DelegationCompletedEvent | DelegationFailedEvent) -> None:
        request = self._requests.pop(event.delegation_id, None)
        task = self._running.get(event.task_id)
        if task is None:
            return
        worker = self._done.get(event.delegation_id)
        description = request.task_description if request is not None else ""
        if isinstance(event, DelegationFailedEvent):  # a refusal comes without a start
            raw, worker_trace = None, self._failed_workers.pop(event.delegation_id, None)
            error = event.errors[0] if event.errors else None
            description = description or event.task_description
        else:
            raw, worker_trace, error = event.raw_output, _made(worker[0]) if worker else None, None
        task.delegations = _appended(
            task.delegations,
            DelegationTrace(
                delegation_id=event.delegation_id,
                worker_role=event.worker_role,
                task_description=description,
                status=event.status,  # type: ignore[arg-type]  # the event's own status text
                raw_output=raw,
                duration=event.duration,
                worker_trace=worker_trace,
                error=error,
            ),
        )


def _loop_iteration(fold: TraceFold, event: LoopIterationCompletedEvent) -> None:
    fold._iterations.append(
        LoopIterationTrace(
            loop_name=event.loop_name,
            iteration=event.iteration,
            outputs=dict(event.outputs),
            completed_at=event.timestamp,
        )
    )


def _graph_step(fold: TraceFold, event: GraphStateCompletedEvent) -> None:
    fold._steps.append(
        GraphStepTrace(
            graph_name=event.graph_name,
            step=event.step,
            state=event.state,
            next_state=event.next_state,
            task_id=event.task_id,
            completed_at=event.timestamp,
        )
    )


_MAKING = threading.RLock()
"""Held while a trace is made from its parts: threads reading one trace at once get one
object (reentrant: making a run's trace makes its tasks')."""


class _MadeOnce(Deferred, Generic[T]):
    """A trace made at its first reading, under `_MAKING`, from parts it lets go of then."""

    __slots__ = ("_made",)

    _made: T | None
    """None until made (each subclass's ``__init__`` sets it: no call to this class's)."""

    def made(self) -> T:
        """The trace (made at the first call; the same object after)."""
        with _MAKING:
            made = self._made
            if made is None:
                made = self._made = self._make()
            return made

    def _make(self) -> T:
        """Make the trace and let go of its parts."""
        raise TypeError(f"{type(self).__name__} does not say how its trace is made")


class TaskTraceToMake(_MadeOnce[TaskTrace]):
    """A completed task's `TaskTrace`, made when first read (`TaskOutput.trace`, the run's
    trace): most runs never read their tasks' traces, and making them (their prompts, a
    record of each model call) was about 7% of a run's instructions. It keeps the task's
    record in the fold, which nothing changes once the task completed, until the trace is
    made (in its own slots, not a tuple: 48 bytes less for each of the thousands of tasks a
    run may hold). `completed_at` and `duration` are the trace's own."""

    __slots__ = (
        "_capture",
        "_final_output",
        "_metrics",
        "_parsed_output",
        "_task",
        "completed_at",
        "duration",
    )

    def __init__(
        self,
        capture: CaptureMode,
        task: _Task,
        duration: timedelta,
        metrics: TaskMetrics,
        final_output: str,
        parsed_output: Any,
    ) -> None:
        self._made = None
        self.completed_at = task.started_at + duration
        self.duration = duration
        self._capture = capture
        self._task = task
        self._metrics = metrics
        self._final_output = final_output
        self._parsed_output = parsed_output

    def _make(self) -> TaskTrace:
        trace = self._trace_of(light=False)
        del self._task, self._parsed_output  # the record and the answer
        return trace

    def light(self) -> TaskTrace:
        """The trace without its prompts, model calls and final output (those of a task
        execution that another one replaced), made without making the whole trace."""
        with _MAKING:
            made = self._made
            if made is not None:
                return dataclasses.replace(made, prompts=None, llm_interactions=(), final_output="")
            return self._trace_of(light=True)

    def _trace_of(self, *, light: bool) -> TaskTrace:
        return _task_trace(
            self._capture,
            self._task,
            self.duration,
            self.completed_at,
            self._metrics,
            "" if light else self._final_output,
            self._parsed_output,
            light=light,
        )


_RunParts = tuple[
    EnsembleStartedEvent,
    EnsembleCompletedEvent,
    dict[str, str],
    tuple["TaskTrace | TaskTraceToMake", ...],
    ExecutionMetrics,
    tuple[TaskTrace, ...],
    tuple[LoopIterationTrace, ...],
    tuple[GraphStepTrace, ...],
    tuple[str, ...],
]
"""What a run's `ExecutionTrace` is made of (`TraceFold._trace_parts`): its start and end,
inputs, task traces, metrics, failed tasks, loop iterations, graph steps and warnings."""


class ExecutionTraceToMake(_MadeOnce[ExecutionTrace]):
    """A run's `ExecutionTrace`, made when first read (`EnsembleOutput.trace`) from its
    parts, taken from the fold when the run ended (so the fold itself is not kept)."""

    __slots__ = ("_parts", "metrics")

    def __init__(self, parts: _RunParts) -> None:
        self._made = None
        self._parts = parts
        self.metrics = parts[4]
        """The trace's own metrics (the run's output carries them)."""

    def _make(self) -> ExecutionTrace:
        trace = _execution_trace(self._parts)
        del self._parts
        return trace


def _execution_trace(parts: _RunParts) -> ExecutionTrace:
    started, completed, inputs, traces, metrics, failed, iterations, steps, warnings = parts
    return direct_new(ExecutionTrace)(
        ensemble_id=started.ensemble_id,
        workflow=started.workflow,
        capture_mode=started.capture_mode,
        started_at=started.timestamp,
        completed_at=started.timestamp + completed.duration,
        total_duration=completed.duration,
        exit_reason=completed.exit_reason,
        inputs=inputs,
        agents=completed.agents,
        task_traces=tuple([_made(trace) for trace in traces]),
        metrics=metrics,
        total_cost_estimate=metrics.total_cost_estimate,
        errors=completed.errors,
        agent_synthesis=completed.agent_synthesis,
        map_reduce_levels=completed.map_reduce_levels,
        failed_tasks=failed,
        loop_iterations=iterations,
        graph_steps=steps,
        warnings=warnings,
    )


def _made(trace: TaskTrace | TaskTraceToMake) -> TaskTrace:
    return trace.made() if isinstance(trace, TaskTraceToMake) else trace


def _task_trace(
    capture: CaptureMode,
    task: _Task,
    duration: timedelta,
    completed_at: datetime,
    metrics: TaskMetrics,
    final_output: str,
    parsed_output: Any = None,
    *,
    light: bool = False,
) -> TaskTrace:
    """The task's trace; `light`, without its prompts and model calls."""
    # fifteen keywords at most: a call with more passes them in a dict (the delegations
    # and memory operations of the few tasks that have any are added after)
    trace = direct_new(TaskTrace)(
        task_index=task.index,
        agent_role=task.agent_role,
        task_description=task.description,
        expected_output=task.expected_output,
        started_at=task.started_at,
        completed_at=completed_at,
        duration=duration,
        prompts=None
        if light or task.user_prompt is None
        else PromptTrace(system=task.system_prompt, user=task.user_prompt),
        llm_interactions=()
        if light
        else tuple([_interaction(capture, call) for call in task.calls]),
        final_output=final_output,
        parsed_output=parsed_output,
        metrics=metrics,
        name=task.name,
        node_type=task.node_type,
        map_reduce_level=task.map_reduce_level,
    )
    if not task.delegations and not task.memory:
        return trace
    return dataclasses.replace(
        trace, delegations=tuple(task.delegations), memory_operations=tuple(task.memory)
    )


def _interaction(capture: CaptureMode, call: _Call) -> LlmInteraction:
    completed = call.completed
    started_at = call.started_at or completed.timestamp
    # a final answer's text is the task's final_output: one copy, not two; FULL keeps it
    # (the text of an answer that a structured-output retry replaced is only here)
    omit_text = completed.response_type == "FINAL_ANSWER" and capture is not CaptureMode.FULL
    return direct_new(LlmInteraction)(
        iteration_index=completed.iteration_index,
        started_at=started_at,
        completed_at=started_at + completed.latency,
        latency=completed.latency,
        input_tokens=completed.input_tokens,
        output_tokens=completed.output_tokens,
        response_type=completed.response_type,
        response_text=None if omit_text else completed.response_text,
        tool_calls=_in_request_order(call.tool_calls, completed),
        messages=capture_messages(call.messages) if call.messages else (),
    )


def _warning(fold: TraceFold, event: RunWarningEvent) -> None:
    fold._warnings.append(event.message)


_HANDLERS: dict[type[Any], Callable[[TraceFold, Any], None]] = {
    RunWarningEvent: _warning,
    LoopIterationCompletedEvent: _loop_iteration,
    GraphStateCompletedEvent: _graph_step,
    EnsembleStartedEvent: TraceFold._ensemble_started,
    EnsembleCompletedEvent: TraceFold._ensemble_completed,
    TaskStartEvent: TraceFold._task_started,
    TaskInputEvent: TraceFold._task_input,
    TaskCompleteEvent: TraceFold._task_completed,
    TaskFailedEvent: TraceFold._task_failed,
    LlmIterationStartedEvent: TraceFold._llm_started,
    LlmIterationCompletedEvent: TraceFold._llm_completed,
    ToolCallEvent: TraceFold._tool_called,
    MemoryOperationEvent: TraceFold._memory_operation,
    DelegationStartedEvent: TraceFold._delegation_started,
    DelegationCompletedEvent: TraceFold._delegation_ended,
    DelegationFailedEvent: TraceFold._delegation_ended,
}
"""What the trace takes from each kind of event."""


def _owned(value: Any) -> Any:
    """JSON data the trace keeps: its own copy of a container (listeners get the event's).
    Copied by pydantic-core, as `json_data` made it: a 50-field answer in 7 µs, where
    ``copy.deepcopy`` took 41. (A hand-built event given to `ExecutionTrace.from_events`
    with data that is not JSON gets it as `json_data` makes it: tuples as lists...)"""
    return json_data(value) if isinstance(value, (dict, list)) else value


def _in_request_order(
    traces: Sequence[ToolCallTrace], completed: LlmIterationCompletedEvent
) -> tuple[ToolCallTrace, ...]:
    """Tool calls finish in any order; the trace lists them as the model asked for them."""
    if len(traces) <= 1:
        return tuple(traces)
    position: dict[str, int] = {}
    for index, call in enumerate(completed.tool_requests):
        position.setdefault(call.id, index)
    last = len(position)
    return tuple(sorted(traces, key=lambda trace: position.get(trace.tool_call_id, last)))


def _synthesis_metrics(interactions: tuple[LlmInteraction, ...]) -> TaskMetrics:
    inputs = outputs = 0
    for interaction in interactions:
        inputs = add_known(inputs, interaction.input_tokens)
        outputs = add_known(outputs, interaction.output_tokens)
    return TaskMetrics(
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=add_known(inputs, outputs),
        llm_latency=sum((interaction.latency for interaction in interactions), NO_TIME),
        llm_call_count=len(interactions),
    )
