"""GRAPH: one walker through a `Graph`'s states, edges tried in order (BEHAVIOUR 9.9)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentensemble._control import ControlFlowSignal
from agentensemble.enums import MaxIterationsAction
from agentensemble.errors import (
    GraphNoEdgeMatchedError,
    MaxGraphStepsExceededError,
    TaskExecutionError,
    describe_error,
)
from agentensemble.execution._context import RunContext, TaskContext
from agentensemble.execution._loops import GraphRecord, revised
from agentensemble.execution._task_runner import context_outputs, run_task
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
        while True:
            if run.stop.requested:
                break
            if len(record.steps) >= graph.max_steps:
                record.termination_reason = "max_steps"
                if graph.on_max_steps is MaxIterationsAction.THROW:
                    raise MaxGraphStepsExceededError(
                        graph.name,
                        graph.max_steps,
                        state,
                        completed_outputs=run.outputs.completed(),
                    )
                break
            visits[state] += 1
            output = await self._visit(run, state, visits[state], latest.get(state))
            if output is None:  # the run is ending early
                break
            latest[state] = output
            following = self._next(run, state, output)
            record.steps.append(GraphStep(state, output, following))
            await run.events.emit(
                GraphStateCompletedEvent(
                    ensemble_id=run.run_id,
                    seq=run.events.next_seq(),
                    task_id=run.outputs.task_id_of(self.planned[state].source),
                    graph_name=graph.name,
                    state=state,
                    step=len(record.steps),
                    next_state=following,
                    output=output.raw,
                )
            )
            if following == END:
                record.termination_reason = "terminal"
                break
            state = following
        return tuple(step.output for step in record.steps)

    async def _visit(
        self, run: RunContext, state: str, visit: int, prior: TaskOutput[Any] | None
    ) -> TaskOutput[Any] | None:
        graph = self.graph
        planned = self.planned[state]
        if (
            visit > 1
            and prior is not None
            and graph.inject_feedback_on_revisit
            and state not in graph.no_feedback_states
        ):
            feedback = _REVISIT_FEEDBACK.format(state=state, visit=visit)
            planned = revised(planned, feedback, prior.raw, visit - 1)
        context = context_outputs(planned, run.outputs, strict=False)
        try:
            return await run_task(TaskContext(run=run, planned=planned, context_outputs=context))
        except ControlFlowSignal as signal:  # a reviewer ended the run
            run.stop.request(signal)
            return None
        except TaskExecutionError as error:
            error.completed_outputs = run.outputs.completed()
            raise
        except Exception as error:
            raise TaskExecutionError.of(
                error,
                task_description=planned.description,
                agent_role=planned.role,
                completed_outputs=run.outputs.completed(),
            ) from error

    def _next(self, run: RunContext, state: str, output: TaskOutput[Any]) -> str:
        """The target of the first edge leaving `state` whose `when` holds."""
        for edge in self.graph.edges_from(state):
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
        tried = ", ".join(f"'{edge.target}'" for edge in self.graph.edges_from(state))
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
