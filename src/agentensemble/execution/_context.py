"""The run context (one per run, immutable) and the task context (one per task execution).

Everything a run shares lives in `RunContext`: events, capture mode, cost, limits, its own
rate-limit buckets, the concurrency bound, and the store of completed outputs that every
workflow reads context from and that a failed, cancelled or timed-out run is reported from.
Each task execution gets a `TaskContext` with its ids and depth; `ToolContext` and
`HandlerContext` are made from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentensemble._calling import NOTHING
from agentensemble._frozen import direct_init
from agentensemble.enums import ContextFormat
from agentensemble.execution._deadlines import Deadlines
from agentensemble.models import RateLimit, RateLimiter
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._listeners import EventDispatcher
from agentensemble.observability._trace_fold import TraceFold
from agentensemble.outputs import TaskOutput
from agentensemble.tools import ToolContext
from agentensemble.tools._context import Delegator, Reviewer

if TYPE_CHECKING:
    import asyncio

    from agentensemble._control import ControlFlowSignal
    from agentensemble.agent import Agent
    from agentensemble.execution._budget import RunBudget
    from agentensemble.execution._checkpointing import RunCheckpoint
    from agentensemble.execution._delegation import Team
    from agentensemble.execution._hooks import RunHooks
    from agentensemble.execution._loops import GraphRecord, LoopRecord
    from agentensemble.execution._memory import RunMemory
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.execution._review import RunReview
    from agentensemble.memory import MemoryStore
    from agentensemble.task import Task

__all__ = [
    "RunContext",
    "RunLimiters",
    "RunOutputs",
    "RunStop",
    "TaskContext",
    "new_id",
    "new_run_id",
]


class _Ids:
    """Random task ids without a system call each (the engine makes one per task). Seeded
    from the system's randomness, and again in a forked child (which would otherwise repeat
    its parent's ids)."""

    def __init__(self) -> None:
        self.seed()

    def seed(self) -> None:
        import random

        self._bits = random.Random(os.urandom(32)).getrandbits

    def next(self) -> str:
        return self._bits(128).to_bytes(16).hex()  # a third of formatting the int as hex


_ids = _Ids()
os.register_at_fork(after_in_child=_ids.seed)


def new_id() -> str:
    """A random 32-hex-digit id (as unique as a UUID4, without building a UUID object)."""
    return _ids.next()


def new_run_id() -> str:
    """A random UUID4 in its usual text form, written without building a UUID object. From
    the system's randomness, unlike task ids: a run id is what resuming a run and the
    dashboard's cancel take, so it must not be predictable from the ids a run shows."""
    digits = os.urandom(16).hex()
    variant = "89ab"[int(digits[16], 16) & 3]
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-{digits[20:]}"


class RunOutputs:
    """The outputs a run has completed so far, keyed by the caller's `Task`, in completion
    order. Workflows read context from it; nothing completed is lost when a run fails."""

    __slots__ = ("_by_task", "_hidden", "_ids", "by_phase", "graph", "loops")

    def __init__(self) -> None:
        self._by_task: dict[Task[Any], TaskOutput[Any]] = {}
        self._ids: dict[Task[Any], str] = {}
        self._hidden: set[Task[Any]] = set()
        self.by_phase: dict[str, tuple[TaskOutput[Any], ...]] = {}
        """Outputs of each phase that completed (phased runs)."""
        self.loops: dict[str, LoopRecord] = {}
        """What each loop did (runs with loops)."""
        self.graph: GraphRecord | None = None
        """The graph's walk (a run of a graph)."""

    def hide(self, task: Task[Any]) -> None:
        """Keep `task`'s output out of the run's outputs (a loop's own task), though
        `get` still finds it."""
        self._hidden.add(task)

    def discard(self, task: Task[Any]) -> None:
        """Drop `task`'s output from the run's outputs."""
        self._by_task.pop(task, None)
        self._ids.pop(task, None)

    def replace(self, task: Task[Any], output: TaskOutput[Any]) -> None:
        """Put `output` in the place of `task`'s output."""
        if task in self._by_task:
            self._by_task[task] = output

    def record(self, task: Task[Any], output: TaskOutput[Any], task_id: str) -> None:
        """Store a completed task's output (`task_id`: the execution that produced it)."""
        self._by_task[task] = output
        self._ids[task] = task_id

    def task_ids(self) -> tuple[str, ...]:
        """The task executions of `completed()`, in the same order."""
        if not self._hidden:
            return tuple(self._ids.values())
        return tuple(i for task, i in self._ids.items() if task not in self._hidden)

    def task_id_of(self, task: Task[Any]) -> str:
        """The execution that produced `task`'s output ("" if it has none)."""
        return self._ids.get(task, "")

    def get(self, task: Task[Any]) -> TaskOutput[Any] | None:
        """The output of `task`, if it completed."""
        return self._by_task.get(task)

    def completed(self) -> tuple[TaskOutput[Any], ...]:
        """Every output so far, in completion order."""
        if not self._hidden:
            return tuple(self._by_task.values())
        return tuple(o for task, o in self._by_task.items() if task not in self._hidden)

    def by_task(self) -> dict[Task[Any], TaskOutput[Any]]:
        """A copy of the outputs keyed by task."""
        return {task: o for task, o in self._by_task.items() if task not in self._hidden}


class RunStop:
    """Whether the run is ending early (a reviewer exited, a review timed out with FAIL):
    the first signal wins; executors start no task once it is set and let running ones
    finish."""

    __slots__ = ("failing", "signal")

    def __init__(self) -> None:
        self.signal: ControlFlowSignal | None = None
        self.failing = False
        """A task failed and the run will raise once running tasks settle (FAIL_FAST):
        work in progress that could go on for long (a loop) stops at its next turn."""

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @property
    def halted(self) -> bool:
        """Whether nothing new should start: the run ends early or is failing."""
        return self.signal is not None or self.failing

    def request(self, signal: ControlFlowSignal) -> None:
        """End the run early because of `signal` (unless it is already ending)."""
        if self.signal is None:
            self.signal = signal


@direct_init
@dataclass(frozen=True, slots=True)
class RunLimiters:
    """The rate-limit buckets that belong to one run: the ensemble's (for tasks on the
    ensemble model), and one per task whose `rate_limit` is not already wrapped around a
    task `llm` of its own: on the ensemble model it replaces the ensemble's bucket, with an
    explicit agent it applies on top of the agent's own limit."""

    ensemble: RateLimiter | None = None
    by_task: dict[Task[Any], RateLimiter] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: Sequence[Task[Any]], ensemble_limit: RateLimit | None) -> RunLimiters:
        """Fresh buckets for one run of `tasks`."""
        ensemble = RateLimiter(ensemble_limit) if ensemble_limit is not None else None
        limiters = cls(ensemble)
        limiters.include(tasks)
        return limiters

    def include(self, tasks: Sequence[Task[Any]]) -> None:
        """Give `tasks` (added to the run while it runs, too) the buckets they own."""
        for task in tasks:
            if task.rate_limit is not None and task.llm is None:
                self.by_task[task] = RateLimiter(task.rate_limit)

    @property
    def owned(self) -> bool:
        """Whether the run owns any bucket (the ensemble's, or a task's)."""
        return self.ensemble is not None or bool(self.by_task)

    def for_task(self, task: Task[Any]) -> RateLimiter | None:
        """The run's bucket for `task`'s model calls, if the run owns one."""
        own = self.by_task.get(task)
        if own is not None or task.agent is not None or task.llm is not None:
            return own  # an explicit model carries its own bucket, if any
        return self.ensemble


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext:
    """Everything one run shares across its tasks. Built once per run, and completed with
    the delegation team once every agent is planned (before any task runs)."""

    run_id: str
    events: EventDispatcher
    max_tool_output_length: int = -1
    """Characters of tool output the model sees (-1: all)."""
    capture_mode: CaptureMode = CaptureMode.OFF
    context_format: ContextFormat = ContextFormat.JSON
    """How structured context and JSON tool results are written into prompts."""
    cost_configuration: CostConfiguration | None = None
    limiters: RunLimiters = field(default_factory=RunLimiters)
    outputs: RunOutputs = field(default_factory=RunOutputs)
    max_concurrency: int | None = None
    """Most tasks of the run in flight at once, across phases (None: no limit)."""
    deadline: float | None = None
    """When the run must end, in event-loop time (`loop.time()`); None: no deadline."""
    team: Team | None = None
    """Who tasks may delegate to, and under which rules (runs where an agent may delegate,
    and hierarchical runs)."""
    review: RunReview | None = None
    """The review handler and policy (runs whose ensemble has a `review_handler`)."""
    stop: RunStop = field(default_factory=RunStop)
    memory: RunMemory | None = None
    """The memory store, entity facts and short-term memory (runs that use memory)."""
    hooks: RunHooks | None = None
    """The before-hooks of the run (the ensemble's, then the run's); None without hooks,
    so that the agent loop does nothing extra."""
    agents: Mapping[Agent, Agent] = field(default_factory=dict)
    """Agents whose role, goal or background hold template variables, and their copies
    with this run's inputs filled in (CrewAI's ``{topic} Researcher``)."""
    budget: RunBudget | None = None
    """The run's token, cost and model-call budgets (None: no budget anywhere in the run)."""
    checkpoint: RunCheckpoint | None = None
    """Where completed tasks are recorded and what a resumed run restores (None: the
    ensemble has no checkpoint)."""
    _slots: asyncio.Semaphore | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.max_concurrency is not None:
            import asyncio

            object.__setattr__(self, "_slots", asyncio.Semaphore(self.max_concurrency))

    @property
    def trace(self) -> TraceFold:
        """The run's trace, folded from its events as they are emitted."""
        return self.events.trace

    async def warn(self, code: str, message: str) -> None:
        """Tell the run's listeners (and its trace, and `EnsembleOutput.warnings`) about
        something that went right by accident: a `RunWarningEvent`."""
        from agentensemble.observability._events import RunWarningEvent

        await self.events.emit(
            RunWarningEvent(
                ensemble_id=self.run_id, seq=self.events.next_seq(), code=code, message=message
            )
        )

    def task_slot(self) -> AbstractAsyncContextManager[Any]:
        """Hold one of the run's `max_concurrency` slots while a task of the run executes
        (``async with run.task_slot():``)."""
        return self._slots if self._slots is not None else NOTHING

    @property
    def task_slots(self) -> asyncio.Semaphore | None:
        """The run's `max_concurrency` slots (None: no limit)."""
        return self._slots


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskContext:
    """One execution of one planned task: the run it belongs to and its identity."""

    run: RunContext
    planned: PlannedTask
    context_outputs: tuple[TaskOutput[Any], ...] = ()
    """Outputs of the task's context tasks, in declared order."""
    task_id: str = field(default_factory=new_id)
    """Unique per task execution in the run."""
    parent_task_id: str | None = None
    """The delegating task's id, for a delegated task."""
    depth: int = 0
    """0 for a task of the ensemble, +1 per delegation."""
    caller_deadlines: Deadlines | None = None
    """A delegated worker's caller's deadlines, which its own chain to."""
    _deadlines: Deadlines | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def deadlines(self) -> Deadlines:
        """The task's deadlines that stop while a person decides (a delegated worker's chain
        to its caller's). Made when first used: few tasks have any, and thousands may be
        running at once. (A `dataclasses.replace` copy would make its own: pass it
        `caller_deadlines` to chain.)"""
        made = self._deadlines
        if made is None:
            made = Deadlines(self.caller_deadlines)
            object.__setattr__(self, "_deadlines", made)
        return made

    def tool_context(
        self,
        tool_call_id: str | None = None,
        delegator: Delegator | None = None,
        *,
        tool_name: str | None = None,
        reviewer: Reviewer | None = None,
        memory_store: MemoryStore | None = None,
    ) -> ToolContext:
        """What `@tool` functions that ask for a `ToolContext` receive for one call."""
        return ToolContext(
            tool_name=tool_name,
            reviewer=reviewer,
            run_id=self.run.run_id,
            task_id=self.task_id,
            parent_task_id=self.parent_task_id,
            agent_role=self.planned.role,
            task_description=self.planned.description,
            depth=self.depth,
            tool_call_id=tool_call_id,
            delegator=delegator,
            memory_store=memory_store,
        )
