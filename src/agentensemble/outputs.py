"""Results: `TaskOutput` for one task, `EnsembleOutput` for a run."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentensemble._frozen import defer_fields, direct_init
from agentensemble.enums import ExitReason
from agentensemble.observability._metrics import ExecutionMetrics, TaskMetrics

if TYPE_CHECKING:
    from agentensemble.graph import GraphStep
    from agentensemble.observability._trace import ExecutionTrace, TaskTrace
    from agentensemble.review import PendingReview
    from agentensemble.task import Task

__all__ = ["EnsembleOutput", "TaskOutput"]

T = TypeVar("T")
Out = TypeVar("Out", covariant=True)


@defer_fields("trace")  # made when first read: most runs never read their tasks' traces
@direct_init
@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TaskOutput(Generic[Out]):
    """The result of one task; generic in the task's output type (see `parsed_output`)."""

    raw: str
    """The final answer text ("" when the model answered nothing)."""
    task_description: str
    """The task description after template resolution."""
    agent_role: str
    completed_at: datetime
    """When the task finished (UTC)."""
    duration: timedelta
    tool_call_count: int = 0
    """Tool calls actually executed."""
    parsed_output: Out = None  # type: ignore[assignment]  # None is right for Task[None]
    """The structured result: a value of the task's ``output_type`` (None without one)."""
    output_type: Any = None
    """The task's ``output_type``."""
    metrics: TaskMetrics = field(default_factory=TaskMetrics)
    trace: TaskTrace | None = None
    """What the task did: prompts, every model call and tool call (made when first read)."""
    name: str | None = None
    """The task's `name`, when it has one."""

    def __repr__(self) -> str:
        return (
            f"TaskOutput(agent_role={self.agent_role!r}, "
            f"task_description={_clip(self.task_description)!r}, raw={_clip(self.raw)!r})"
        )

    def parsed(self, type_: type[T]) -> T:
        """`parsed_output` checked (strictly, by pydantic) to be a `type_`: a class, or a
        generic such as ``list[int]`` or ``dict[str, Model]``.

        Raises ValueError when there is no parsed output, TypeError when it is another type.
        """
        import pydantic

        if self.parsed_output is None:
            raise ValueError(f"Task '{self.task_description}' has no parsed output")
        try:
            checked: T = _adapter(type_).validate_python(self.parsed_output, strict=True)
        except pydantic.ValidationError as error:
            raise TypeError(
                f"Parsed output is {type(self.parsed_output).__name__}, not "
                f"{_type_name(type_)}: {error.errors(include_url=False)[0]['msg']}"
            ) from None
        return checked


@defer_fields("trace")  # made when first read (as each task's is)
@direct_init
@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class EnsembleOutput:
    """The result of a run: every task output plus totals."""

    task_outputs: tuple[TaskOutput[Any], ...]
    """Completed outputs in execution (sequential) or completion (parallel) order."""
    total_duration: timedelta
    exit_reason: ExitReason = ExitReason.COMPLETED
    metrics: ExecutionMetrics = field(default_factory=ExecutionMetrics)
    phase_outputs: Mapping[str, tuple[TaskOutput[Any], ...]] = field(default_factory=dict)
    """Outputs by phase name (runs with phases only)."""
    trace: ExecutionTrace | None = None
    """The run's execution trace (made when first read)."""
    run_id: str = ""
    """The run's id (``ensemble_id`` on its events and trace): what ``run(resume=...)``
    takes to continue a checkpointed run that stopped early."""
    pending_review: PendingReview | None = None
    """The review a paused run (exit reason ``PAUSED``) waits for: answer it with
    ``run(resume=run_id, decision=...)``."""
    _by_task: Mapping[Task[Any], TaskOutput[Any]] = field(default_factory=dict, repr=False)
    _final: TaskOutput[Any] | None = field(default=None, repr=False)
    """The output `raw` comes from (None: the last in `task_outputs`)."""
    _loops: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """What each loop did (`LoopRecord`s by loop name)."""
    _graph: Any = field(default=None, repr=False)
    """The graph's walk (a `GraphRecord`), for a run of a graph."""

    @property
    def warnings(self) -> tuple[str, ...]:
        """What to know about the run though it did not fail it (the trace's)."""
        return self.trace.warnings if self.trace is not None else ()

    def loop_history(self, name: str) -> list[dict[str, TaskOutput[Any]]]:
        """Each iteration's outputs of loop `name`, by body task name (else description),
        first iteration first. Raises `KeyError` for a loop the run did not have."""
        return [dict(outputs) for outputs in self._loop(name).history]

    def loop_termination_reason(self, name: str) -> str | None:
        """``"predicate"`` (its `until` held) or ``"max_iterations"``; None if the run
        ended before the loop did."""
        reason: str | None = self._loop(name).termination_reason
        return reason

    def loop_stopped_by_max_iterations(self, name: str) -> bool:
        """Whether loop `name` ran out of iterations with ``on_max_iterations=
        RETURN_WITH_FLAG`` (under ``RETURN_LAST`` its last outputs stand as if it had
        converged; `loop_termination_reason` still says ``"max_iterations"``)."""
        return bool(self._loop(name).flagged)

    def _loop(self, name: str) -> Any:
        record = self._loops.get(name)
        if record is None:
            known = ", ".join(repr(loop) for loop in self._loops) or "none"
            raise KeyError(f"this run has no loop named {name!r} (its loops: {known})")
        return record

    @property
    def graph_history(self) -> tuple[GraphStep, ...]:
        """The graph's walk: each step's state, output and next state (empty without a
        graph)."""
        return tuple(self._graph.steps) if self._graph is not None else ()

    @property
    def graph_stopped_by_max_steps(self) -> bool:
        """Whether the graph ran out of steps with ``on_max_steps=RETURN_WITH_FLAG``."""
        return bool(self._graph is not None and self._graph.flagged)

    @property
    def graph_termination_reason(self) -> str | None:
        """``"terminal"`` (it reached `Graph.END`) or ``"max_steps"``; None without a
        graph or if the run ended before the walk did."""
        if self._graph is None:
            return None
        reason: str | None = self._graph.termination_reason
        return reason

    def __repr__(self) -> str:
        # Kept short on purpose: asyncio formats a finished task's result into messages
        # (CPython 3.11 does so whenever asyncio.run() restores the SIGINT handler), and a
        # full dataclass repr of every output and trace costs milliseconds per task.
        return (
            f"EnsembleOutput(tasks={len(self.task_outputs)}, "
            f"exit_reason={self.exit_reason.value}, raw={_clip(self.raw)!r})"
        )

    @property
    def raw(self) -> str:
        """The final text: the output of the last task, in the order you declared the tasks,
        that completed (so it never depends on timing); "" when no task completed."""
        if self._final is not None:
            return self._final.raw
        return self.task_outputs[-1].raw if self.task_outputs else ""

    @property
    def total_tool_calls(self) -> int:
        """Tool calls executed over every task."""
        return sum(output.tool_call_count for output in self.task_outputs)

    @property
    def is_complete(self) -> bool:
        """True when the run ran to completion."""
        return self.exit_reason is ExitReason.COMPLETED

    @property
    def completed_tasks(self) -> tuple[TaskOutput[Any], ...]:
        """Alias of `task_outputs`."""
        return self.task_outputs

    @property
    def last_completed_output(self) -> TaskOutput[Any] | None:
        """The last completed output, or None."""
        return self.task_outputs[-1] if self.task_outputs else None

    def output_for(self, task: Task[T]) -> TaskOutput[T] | None:
        """The output of `task`, the very object you passed in (identity, not equality);
        typed after the task, so a ``Task[Report]`` gives a ``TaskOutput[Report]``."""
        return self._by_task.get(task)


def _adapter(type_: Any) -> Any:
    """A pydantic TypeAdapter for `type_`, made once per (hashable) type."""
    try:
        return _cached_adapter(type_)
    except TypeError:  # an unhashable type form
        from pydantic import TypeAdapter

        return TypeAdapter(type_)


@functools.lru_cache(maxsize=256)
def _cached_adapter(type_: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(type_)


def _type_name(type_: Any) -> str:
    return type_.__name__ if isinstance(type_, type) else repr(type_)


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
