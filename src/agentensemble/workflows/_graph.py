"""GRAPH: one walker through a `Graph`'s states, edges tried in order (BEHAVIOUR 9.9)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentensemble.enums import MaxIterationsAction
from agentensemble.errors import (
    GraphNoEdgeMatchedError,
    MaxGraphStepsExceededError,
    TaskExecutionError,
    describe_error,
)
from agentensemble.execution._context import RunContext, TaskContext
from agentensemble.execution._loops import GraphRecord, kept, revised
from agentensemble.execution._task_runner import context_outputs, run_in_turn
from agentensemble.graph import END, Graph, GraphStep
from agentensemble.observability._events import GraphStateCompletedEvent
from agentensemble.workflows._executor import ExecutorRequest, WorkflowSpec

if TYPE_CHECKING:
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.outputs import TaskOutput

__all__ = ["GRAPH", "GraphExecutor"]

_REVISIT_FEEDBACK = (
    "Graph state '{state}' visit #{visit}. Prior visit's output is provided above; refine "
    "your response based on it."
)


class GraphExecutor:
    """Walks the graph: runs the current state's task, takes the first matching edge,
    until `Graph.END` or `max_steps`. Every state's latest output is the run's output for
    that state; the run's final output is the last step's."""

    def __init__(self, graph: Graph, planned: dict[str, PlannedTask]) -> None:
        self.graph = graph
        self.planned = planned

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        graph = self.graph
        record = run.outputs.graph = GraphRecord()
        visits: Counter[str] = Counter()
        latest: dict[str, TaskOutput[Any]] = {}
        state = graph.start
        while not run.stop.requested:
            if len(record.steps) >= graph.max_steps:
                self._ran_out(run, record)
                break
            visits[state] += 1
            output = await self._visit(run, state, visits[state], latest.get(state), record)
            if output is None:  # a reviewer ended the run before the state completed
                break
            latest[state] = output
            following = self._next(run, state, output)
            record.steps.append(GraphStep(state, kept(output), following))
            await self._announce(run, record, state, following, output)
            if following == END:
                record.termination_reason = "terminal"
                break
            state = following
        return tuple(step.output for step in record.steps)

    def _ran_out(self, run: RunContext, record: GraphRecord) -> None:
        graph = self.graph
        record.termination_reason = "max_steps"
        if graph.on_max_steps is MaxIterationsAction.THROW:
            last = record.steps[-1].state if record.steps else graph.start
            raise MaxGraphStepsExceededError(
                graph.name, graph.max_steps, last, completed_outputs=run.outputs.completed()
            )
        record.flagged = graph.on_max_steps is MaxIterationsAction.RETURN_WITH_FLAG

    async def _announce(
        self,
        run: RunContext,
        record: GraphRecord,
        state: str,
        following: str,
        output: TaskOutput[Any],
    ) -> None:
        await run.events.emit(
            GraphStateCompletedEvent(
                ensemble_id=run.run_id,
                seq=run.events.next_seq(),
                task_id=run.outputs.task_id_of(self.planned[state].source),
                graph_name=self.graph.name,
                state=state,
                step=len(record.steps),
                next_state=following,
                output=output.raw,
            )
        )

    async def _visit(
        self,
        run: RunContext,
        state: str,
        visit: int,
        prior: TaskOutput[Any] | None,
        record: GraphRecord,
    ) -> TaskOutput[Any] | None:
        """Run the state's task (told to refine its previous output on a revisit)."""
        graph = self.graph
        planned = self.planned[state]
        if (
            visit > 1
            and prior is not None
            and graph.inject_feedback_on_revisit
            and state not in graph.no_feedback_states
        ):
            feedback = _REVISIT_FEEDBACK.format(state=state, visit=visit)
            last = record.steps[-1] if record.steps else None
            if last is not None and last.state != state:
                feedback += f"\n\nWhat the last step ('{last.state}') said:\n{last.output.raw}"
            planned = revised(planned, feedback, prior.raw, visit - 1)
        context = context_outputs(planned, run.outputs, strict=False)
        return await run_in_turn(TaskContext(run=run, planned=planned, context_outputs=context))

    def _next(self, run: RunContext, state: str, output: TaskOutput[Any]) -> str:
        """The target of the first edge leaving `state` whose `when` holds."""
        edges = self.graph.edges_from(state)
        for edge in edges:
            if edge.when is None:
                return edge.target
            try:
                taken = edge.when(output)
            except Exception as error:
                raise TaskExecutionError(
                    f"Graph '{self.graph.name}' edge '{edge.source}' -> '{edge.target}' "
                    f"condition raised: {describe_error(error)}",
                    task_description=f"$graph:{self.graph.name}",
                    agent_role="(graph)",
                    completed_outputs=run.outputs.completed(),
                ) from error
            if taken:
                return edge.target
        tried = ", ".join(
            f"'{edge.target}'" + (f" ({edge.description})" if edge.description else "")
            for edge in edges
        )
        raise GraphNoEdgeMatchedError(
            self.graph.name,
            state,
            output.raw,
            details=f"Edges tried, in order, to: {tried}.",
            completed_outputs=run.outputs.completed(),
        )


async def _build(request: ExecutorRequest) -> GraphExecutor:
    graph = request.settings.graph
    if graph is None:  # validation gives a GRAPH run its graph
        raise AssertionError("a GRAPH run without a graph")
    by_task = {planned.source: planned for planned in request.tasks}
    return GraphExecutor(graph, {state: by_task[task] for state, task in graph.states.items()})


GRAPH = WorkflowSpec(name="GRAPH", build=_build)
"""One walker through a graph's states (``Ensemble(graph=...)``)."""
