"""MAP_REDUCE_STATIC and MAP_REDUCE_ADAPTIVE: a map-reduce tree run as one task graph.

Static: the whole tree is planned before the run. Adaptive: the graph starts with the map
tasks; each time a level has settled, its outputs' token counts decide the next level
(bin-packed reduces, or the final reduce once they fit the budget), which the running
graph is given (`DagRun`'s `on_drained`). Either way the run has one id, one set of events
and one trace, whose task traces carry their node type and level.

Under CONTINUE_ON_ERROR the survivors proceed: a reduce runs on the inputs that completed
(static), a level is packed from its completed outputs (adaptive). The run fails only when
the final reduce cannot run; then it raises as any PARALLEL run does.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agentensemble._logging import get_logger
from agentensemble.enums import ParallelErrorStrategy
from agentensemble.errors import ParallelExecutionError, TaskExecutionError
from agentensemble.execution._planning import Node
from agentensemble.execution._run_trace import task_errors
from agentensemble.observability._trace import ExecutionTrace, MapReduceLevelSummary, TaskTrace
from agentensemble.workflows._parallel import DagRun, DrainedHook
from agentensemble.workflows._token_budget import TokenCounter, pack_first_fit_decreasing

if TYPE_CHECKING:
    from agentensemble.execution._context import RunContext, RunOutputs
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.outputs import TaskOutput
    from agentensemble.task import Task
    from agentensemble.workflows._executor import Planner

__all__ = [
    "ADAPTIVE",
    "DIRECT",
    "FINAL_REDUCE",
    "MAP",
    "REDUCE",
    "STATIC",
    "AdaptiveMapReduceExecutor",
    "AdaptiveReduce",
    "MapReduceExecutor",
]

logger = get_logger("agentensemble.mapreduce")

MAP = "map"
REDUCE = "reduce"
FINAL_REDUCE = "final-reduce"
DIRECT = "direct"

STATIC = "MAP_REDUCE_STATIC"
ADAPTIVE = "MAP_REDUCE_ADAPTIVE"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveReduce:
    """How an adaptive run decides its reduce levels."""

    budget: int
    """Most tokens one reduce task may be given."""
    max_levels: int
    """Most intermediate reduce levels before the final reduce is forced."""
    counter: TokenCounter
    reduce_task: Callable[[Sequence[Task[Any]]], Task[Any]]
    """Makes the reduce task over a chunk of tasks (the user's factory, checked)."""


class MapReduceExecutor:
    """Runs a tree planned up front (static mode, or the direct task); made afresh for each
    run. Under CONTINUE_ON_ERROR a task runs on the inputs that completed."""

    def __init__(self, strategy: ParallelErrorStrategy, *, workflow_label: str = STATIC) -> None:
        self.workflow_label = workflow_label
        """``MAP_REDUCE_STATIC`` or ``MAP_REDUCE_ADAPTIVE``."""
        self._strategy = strategy
        self._levels: dict[int, list[PlannedTask]] = defaultdict(list)
        self._final: Task[Any] | None = None
        """The final reduce (or the direct task), once planned."""
        self._survived: Mapping[Task[Any], BaseException] = {}
        """Failures the run went on without (CONTINUE_ON_ERROR), for the trace."""
        self._outputs: RunOutputs | None = None

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run the tree; return every output in completion order."""
        self._outputs = run.outputs
        await self._before(plan)
        self._place(plan)
        dag = DagRun(run, self._strategy, on_drained=self._drained_hook(), partial_inputs=True)
        try:
            return await dag.execute(plan)
        except ParallelExecutionError as error:
            if self._final is None or run.outputs.get(self._final) is None:
                raise
            logger.warning(
                "MapReduce run %s: %d task(s) failed; the final reduce ran on the rest",
                run.run_id,
                len(error.failed_tasks),
            )
            self._survived = error.failed_tasks
            return tuple(dag.outputs)

    async def _before(self, plan: Sequence[PlannedTask]) -> None:
        """Checks before any task runs (none for a tree planned up front)."""

    def _drained_hook(self) -> DrainedHook | None:
        return None

    def _place(self, planned: Sequence[PlannedTask]) -> None:
        """File each planned task under its level (the run planned it with its node)."""
        for task in planned:
            node = _node_of(task)
            self._levels[node.level].append(task)
            if node.node_type in (FINAL_REDUCE, DIRECT):
                self._final = task.source

    def finish_trace(self, trace: ExecutionTrace) -> ExecutionTrace:
        """The trace with the per-level summaries and the failures the run went on without
        (each task trace carries its node type and level already: its start event said)."""
        return dataclasses.replace(
            trace,
            map_reduce_levels=self._summaries(trace.task_traces),
            errors=(*trace.errors, *task_errors(self._survived)),
        )

    def _summaries(self, task_traces: Sequence[TaskTrace]) -> tuple[MapReduceLevelSummary, ...]:
        by_level: dict[int, list[TaskTrace]] = defaultdict(list)
        for task_trace in task_traces:
            if task_trace.map_reduce_level is not None:
                by_level[task_trace.map_reduce_level].append(task_trace)
        outputs = self._outputs
        summaries = []
        for level in sorted(self._levels):
            planned = self._levels[level]
            done = by_level[level]
            completed = sum(
                1 for task in planned if outputs is not None and outputs.get(task.source)
            )
            duration = (
                max(item.completed_at for item in done) - min(item.started_at for item in done)
                if done
                else timedelta(0)
            )
            summaries.append(
                MapReduceLevelSummary(
                    level=level,
                    node_type=_node_of(planned[0]).node_type,
                    task_count=len(planned),
                    failed_count=len(planned) - completed,
                    duration=duration,
                )
            )
        return tuple(summaries)


def _node_of(task: PlannedTask) -> Node:
    node = task.node
    if node is None:
        raise AssertionError(f"map-reduce task {task.index} was planned without its node")
    return node


class AdaptiveMapReduceExecutor(MapReduceExecutor):
    """Runs the map tasks, then plans each reduce level from the outputs of the level that
    settled, in the same running graph, until one final reduce reads them all."""

    def __init__(
        self, strategy: ParallelErrorStrategy, *, levels: AdaptiveReduce, planner: Planner
    ) -> None:
        super().__init__(strategy, workflow_label=ADAPTIVE)
        self._adaptive = levels
        self._planner = planner
        self._last_total: int | None = None
        """The token total of the level before the last (to notice a level that did not
        shrink its input)."""

    async def _before(self, plan: Sequence[PlannedTask]) -> None:
        """Make and check a reduce over every map task, and throw it away: a broken reduce
        factory (a task without its chunk as context, without a model, with an unknown
        template variable) fails the run before any model call, not after the map level."""
        probe = self._adaptive.reduce_task([planned.source for planned in plan])
        await self._planner.check([probe])

    def _drained_hook(self) -> DrainedHook | None:
        return self._next_level

    async def _next_level(self, dag: DagRun) -> Sequence[PlannedTask]:
        """The next level, from the outputs of the level that settled. An error while
        making it fails the run as that level's failure, carrying every completed output."""
        if self._final is not None and self._final in dag.members:
            return ()  # the final reduce has run
        level = max(self._levels)
        survivors = self._survivors(level, dag.run)
        if not survivors:
            return ()  # every task of the level failed: the graph raises their failures
        try:
            tasks, node_type = self._reduce_tasks(survivors, level + 1)
            node = Node(node_type, level + 1)
            planned = await self._planner(tasks, nodes=dict.fromkeys(tasks, node))
        except Exception as error:
            self._survived = {task.source: failure for task, failure in dag.failures}
            raise TaskExecutionError.of(
                error,
                task_description=f"map-reduce level {level + 1}",
                agent_role="",
                completed_outputs=dag.run.outputs.completed(),
            ) from error
        self._place(planned)
        return planned

    def _survivors(self, level: int, run: RunContext) -> list[tuple[Task[Any], TaskOutput[Any]]]:
        """The level's tasks that completed, with their outputs, in plan order."""
        tasks = self._levels[level]
        survivors = []
        for planned in tasks:
            output = run.outputs.get(planned.source)
            if output is not None:
                survivors.append((planned.source, output))
        failed = len(tasks) - len(survivors)
        if failed and survivors:
            logger.warning(
                "MapReduce: %d of %d task(s) at level %d failed; %d surviving output(s) proceed",
                failed,
                len(tasks),
                level,
                len(survivors),
            )
        return survivors

    def _reduce_tasks(
        self, survivors: list[tuple[Task[Any], TaskOutput[Any]]], level: int
    ) -> tuple[list[Task[Any]], str]:
        """The reduce tasks of `level` over the survivors of the level before, and their
        node type: one final reduce when they fit the budget (or reducing has stopped
        helping), else one reduce per first-fit-decreasing bin."""
        adaptive = self._adaptive
        sources = [task for task, _ in survivors]
        tokens = [adaptive.counter.count(output) for _, output in survivors]
        total, previous = sum(tokens), self._last_total
        self._last_total = total
        if total <= adaptive.budget:
            return [adaptive.reduce_task(sources)], FINAL_REDUCE
        if level > adaptive.max_levels:
            logger.warning(
                "MapReduce: max_reduce_levels (%d) reached but the outputs' %d tokens still "
                "exceed target_token_budget (%d); running the final reduce anyway. Consider "
                "a larger target_token_budget or max_reduce_levels.",
                adaptive.max_levels,
                total,
                adaptive.budget,
            )
            return [adaptive.reduce_task(sources)], FINAL_REDUCE
        if previous is not None and level > 1 and total >= previous:
            logger.warning(
                "MapReduce: reduce level %d did not shrink its input (%d -> %d tokens, budget "
                "%d); running the final reduce instead of more levels",
                level - 1,
                previous,
                total,
                adaptive.budget,
            )
            return [adaptive.reduce_task(sources)], FINAL_REDUCE
        bins = pack_first_fit_decreasing(tokens, adaptive.budget)
        for chunk in bins:
            if tokens[chunk[0]] > adaptive.budget:
                logger.warning(
                    "MapReduce: single output from agent [%s] exceeds target_token_budget "
                    "(%d > %d); it is reduced on its own",
                    survivors[chunk[0]][1].agent_role,
                    tokens[chunk[0]],
                    adaptive.budget,
                )
        in_item_order = sorted(sorted(chunk) for chunk in bins)  # the same bins, read in order
        return [adaptive.reduce_task([sources[i] for i in chunk]) for chunk in in_item_order], (
            REDUCE
        )
