"""The protocol every workflow executor implements, and how a workflow registers itself.

A workflow is a `WorkflowSpec`, defined in the workflow's own module: its name, what it asks
of the run (tasks in declared order, a delegation team, settings only it reads) and how to
make its executor from an `ExecutorRequest`. `workflows._registry` holds every spec by name;
the run asks it and knows no workflow itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentensemble._frozen import direct_init

if TYPE_CHECKING:
    from agentensemble.delegation import ManagerPromptStrategy
    from agentensemble.enums import ParallelErrorStrategy
    from agentensemble.execution._context import RunContext
    from agentensemble.execution._delegation import Team
    from agentensemble.execution._planning import Node, PlannedTask
    from agentensemble.graph import Graph
    from agentensemble.models import ChatModel, RateLimiter
    from agentensemble.observability._trace import ExecutionTrace
    from agentensemble.outputs import TaskOutput
    from agentensemble.phase import Phase
    from agentensemble.task import Task

__all__ = [
    "ComposedExecutor",
    "ExecutorRequest",
    "PlannedGroup",
    "Planner",
    "WorkflowExecutor",
    "WorkflowSettings",
    "WorkflowSpec",
]


class WorkflowExecutor(Protocol):
    """Runs planned tasks within one run.

    Every output is recorded in ``run.outputs`` as its task completes (context is read from
    there too), so whatever stops the executor (a failure, a cancellation, the run's
    deadline, an exit-early signal) loses nothing that completed. Task failures raise
    `TaskExecutionError` or `ParallelExecutionError` once running tasks have settled.
    """

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run `plan`; return its outputs in completion order."""
        ...


class Planner(Protocol):
    """Plans tasks added to a run while it runs (checked as the run's own tasks are,
    templates resolved with the run's inputs, agents given)."""

    async def __call__(
        self, tasks: Sequence[Task[Any]], *, nodes: Mapping[Task[Any], Node]
    ) -> tuple[PlannedTask, ...]:
        """Check and plan `tasks` (placed in the map-reduce tree of `nodes`); they become
        part of the run."""
        ...

    async def check(self, tasks: Sequence[Task[Any]]) -> None:
        """Check `tasks` as `__call__` would, without planning them."""
        ...


class ComposedExecutor(WorkflowExecutor, Protocol):
    """The executor of a run a composite shapes (`MapReduceEnsemble`): it names the run's
    workflow and adds what it knows to the run's trace."""

    @property
    def workflow_label(self) -> str:
        """The trace's and events' workflow name (``MAP_REDUCE_STATIC``, say)."""
        ...

    def finish_trace(self, trace: ExecutionTrace) -> ExecutionTrace:
        """`trace` completed with what the executor knows (per-level summaries, ...)."""
        ...


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowSettings:
    """The ensemble's settings a workflow may read when it makes its executor."""

    parallel_error_strategy: ParallelErrorStrategy | None
    """Validated to be set wherever tasks run in PARALLEL."""
    llm: ChatModel | None
    """The ensemble's model."""
    limiter: RateLimiter | None
    """The run's bucket for calls on the ensemble's model."""
    manager_llm: ChatModel | None
    manager_max_iterations: int
    manager_prompt_strategy: ManagerPromptStrategy | None
    graph: Graph | None = None
    """The ensemble's graph (a GRAPH run)."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedGroup:
    """Tasks planned together and the workflow that runs them: one phase, or the whole
    task list of a run without phases."""

    tasks: tuple[PlannedTask, ...]
    workflow: str
    """The name of the group's workflow in the registry."""
    phase: Phase | None = None


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutorRequest:
    """What a workflow's executor is made from: the planned run and its settings."""

    groups: tuple[PlannedGroup, ...]
    settings: WorkflowSettings
    team: Team | None
    """Who tasks may delegate to (always set when the workflow `has_manager`)."""
    workflows: Mapping[str, WorkflowSpec]
    """The registry, for a workflow made of others (phases)."""

    @property
    def tasks(self) -> tuple[PlannedTask, ...]:
        """Every planned task, in plan order."""
        return tuple(task for group in self.groups for task in group.tasks)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowSpec:
    """A workflow as the run sees it: registered in ``workflows._registry`` by `name`."""

    name: str
    """The registry key, and the trace's and events' workflow name."""
    build: Callable[[ExecutorRequest], Awaitable[WorkflowExecutor]]
    """Makes the executor of one run (before any task runs)."""
    ordered: bool = False
    """Runs its tasks one at a time in declared order (after-task review gates follow
    that order)."""
    has_manager: bool = False
    """A manager hands the tasks to the workers by delegation: the run always has a team,
    held to the ensemble's `hierarchical_constraints`, with unique worker roles."""
    own_settings: tuple[str, ...] = ()
    """Ensemble settings only this workflow reads; setting one for a run under another
    workflow is a `ValidationError` naming the first."""
