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
from agentensemble.errors import ParallelExecutionError
from agentensemble.execution._run_trace import errors_of
from agentensemble.observability._trace import ExecutionTrace, MapReduceLevelSummary, TaskTrace
from agentensemble.workflows._parallel import DagRun
from agentensemble.workflows._token_budget import TokenCounter, pack_first_fit_decreasing

if TYPE_CHECKING:
    from agentensemble.execution._context import RunContext
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
    "AdaptiveReduce",
    "MapReduceExecutor",
    "Node",
]

logger = get_logger("agentensemble.mapreduce")

MAP = "map"
REDUCE = "reduce"
FINAL_REDUCE = "final-reduce"
DIRECT = "direct"

STATIC = "MAP_REDUCE_STATIC"
ADAPTIVE = "MAP_REDUCE_ADAPTIVE"


@dataclass(frozen=True, slots=True)
class Node:
    """Where a task sits in the tree."""

    node_type: str
    level: int


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
    """Runs one map-reduce run; made afresh for each run."""

    def __init__(
        self,
        nodes: Mapping[Task[Any], Node],
        strategy: ParallelErrorStrategy,
        *,
        workflow_label: str = STATIC,
        adaptive: AdaptiveReduce | None = None,
        planner: Planner | None = None,
    ) -> None:
        if (adaptive is None) != (planner is None):
            raise ValueError("adaptive reduce levels need a planner, and a planner needs them")
        self.workflow_label = workflow_label
        """``MAP_REDUCE_STATIC`` or ``MAP_REDUCE_ADAPTIVE`` (a direct task's run too)."""
        self._nodes = dict(nodes)
        self._strategy = strategy
        self._adaptive = adaptive
        self._planner = planner
        self._levels: dict[int, list[PlannedTask]] = defaultdict(list)
        self._by_index: dict[int, Node] = {}
        self._final = next(
            (task for task, node in nodes.items() if node.node_type in (FINAL_REDUCE, DIRECT)),
            None,
        )
        self._tolerated: ParallelExecutionError | None = None
        self._run: RunContext | None = None

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run the tree; return every output in completion order."""
        self._run = run
        self._place(plan)
        dag = DagRun(
            run,
            self._strategy,
            on_drained=self._next_level if self._adaptive is not None else None,
            partial_inputs=True,
        )
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
            self._tolerated = error
            return tuple(dag.outputs)

    def _place(self, planned: Sequence[PlannedTask]) -> None:
        for task in planned:
            node = self._nodes[task.source]
            self._levels[node.level].append(task)
            self._by_index[task.index] = node

    async def _next_level(self, dag: DagRun) -> Sequence[PlannedTask]:
        """The next level of an adaptive run, from the outputs of the one that settled."""
        if self._adaptive is None or self._planner is None or self._run is None:
            return ()
        if self._final is not None and self._final in dag.members:
            return ()  # the final reduce has run
        level = max(self._levels)
        survivors = self._survivors(level, dag.run)
        if not survivors:
            return ()  # every task failed: the graph raises their failures
        tasks, node_type = self._reduce_tasks(survivors, level + 1)
        for task in tasks:
            self._nodes[task] = Node(node_type, level + 1)
        if node_type == FINAL_REDUCE:
            self._final = tasks[0]
        planned = await self._planner(tasks)
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
        node type."""
        adaptive = self._adaptive
        if adaptive is None:
            raise AssertionError("only an adaptive run plans levels")
        sources = [task for task, _ in survivors]
        outputs = [output for _, output in survivors]
        tokens = [adaptive.counter.count(output) for output in outputs]
        total = sum(tokens)
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
        bins = pack_first_fit_decreasing(tokens, adaptive.budget)
        for chunk in bins:
            if tokens[chunk[0]] > adaptive.budget:
                logger.warning(
                    "MapReduce: single output from agent [%s] exceeds target_token_budget "
                    "(%d > %d); it is reduced on its own",
                    outputs[chunk[0]].agent_role,
                    tokens[chunk[0]],
                    adaptive.budget,
                )
        return [adaptive.reduce_task([sources[index] for index in chunk]) for chunk in bins], (
            REDUCE
        )

    def finish_trace(self, trace: ExecutionTrace) -> ExecutionTrace:
        """The trace with each task's node type and level, the per-level summaries and the
        failures the run survived."""
        task_traces = tuple(self._annotated(task_trace) for task_trace in trace.task_traces)
        errors = trace.errors
        if self._tolerated is not None:
            errors = (*errors, *errors_of(self._tolerated))
        return dataclasses.replace(
            trace,
            task_traces=task_traces,
            map_reduce_levels=self._summaries(task_traces),
            errors=errors,
        )

    def _annotated(self, task_trace: TaskTrace) -> TaskTrace:
        node = self._by_index.get(task_trace.task_index)
        if node is None:
            return task_trace
        return dataclasses.replace(
            task_trace, node_type=node.node_type, map_reduce_level=node.level
        )

    def _summaries(self, task_traces: Sequence[TaskTrace]) -> tuple[MapReduceLevelSummary, ...]:
        by_level: dict[int, list[TaskTrace]] = defaultdict(list)
        for task_trace in task_traces:
            if task_trace.map_reduce_level is not None:
                by_level[task_trace.map_reduce_level].append(task_trace)
        completed = self._run.outputs if self._run is not None else None
        summaries = []
        for level in sorted(self._levels):
            planned = self._levels[level]
            done = by_level[level]
            succeeded = sum(
                1 for task in planned if completed and completed.get(task.source) is not None
            )
            duration = (
                max(item.completed_at for item in done) - min(item.started_at for item in done)
                if done
                else timedelta(0)
            )
            summaries.append(
                MapReduceLevelSummary(
                    level=level,
                    node_type=self._by_index[planned[0].index].node_type,
                    task_count=len(planned),
                    failed_count=len(planned) - succeeded,
                    duration=duration,
                )
            )
        return tuple(summaries)
