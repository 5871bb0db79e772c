"""OpenTelemetry spans for runs, tasks, model calls and tool calls (extra ``otel``).

Span names and attributes follow the OpenTelemetry GenAI semantic conventions (still in
development upstream): ``invoke_workflow`` for a run, ``invoke_agent {role}`` for a task,
``chat {model}`` for a model call and ``execute_tool {tool}`` for a tool call, with
``gen_ai.*`` attributes. agentensemble's own details go under ``agentensemble.*``.

A delegated worker's ``invoke_agent`` span sits under the tool call that delegated to it:
that tool call's span opens when the delegation starts (the tool is still running) and
closes when the tool call ends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentensemble._extras import require
from agentensemble.observability._events import (
    DelegationStartedEvent,
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    GraphStateCompletedEvent,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    LoopIterationCompletedEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
    ToolCallEvent,
)
from agentensemble.observability._listeners import EnsembleListener

__all__ = ["OpenTelemetryListener"]

_NANOSECONDS = 1_000_000_000


class OpenTelemetryListener(EnsembleListener):
    """Emits a span tree per run: the run, each task under it, and each model call and tool
    call under its task. Pass a `tracer_provider`, or the global one is used.

    ``Ensemble(listeners=[OpenTelemetryListener()])``; needs
    ``pip install "agentensemble[otel]"``. Its methods are async, so they run on the event
    loop and keep span bookkeeping free of threads.
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        trace = require("opentelemetry.trace", "otel")
        self._trace = trace
        self._tracer = trace.get_tracer("agentensemble", tracer_provider=tracer_provider)
        self._runs: dict[str, Any] = {}
        self._tasks: dict[tuple[str, str], Any] = {}
        """Open task spans by (run id, task id)."""
        self._calls: dict[tuple[str, str, int], Any] = {}
        """Open chat spans by (run id, task id, iteration)."""
        self._tools: dict[tuple[str, str, str], Any] = {}
        """Tool-call spans opened by a delegation, by (run id, task id, tool call id)."""
        self._worker_parents: dict[tuple[str, str], Any] = {}
        """The span a delegated worker's task goes under, by (run id, worker task id)."""
        self._iteration_starts: dict[tuple[str, str], int] = {}
        """When a loop's current iteration started, by (run id, loop task id)."""

    def _start(self, name: str, parent: Any, attributes: dict[str, Any], **options: Any) -> Any:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(name, context=context, attributes=attributes, **options)

    def _fail(self, span: Any, error_type: str, message: str) -> None:
        span.set_attribute("error.type", error_type)
        span.add_event("exception", {"exception.type": error_type, "exception.message": message})
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message))

    async def on_ensemble_started(self, event: EnsembleStartedEvent) -> None:
        """Open the run span."""
        name = event.name or "agentensemble"
        self._runs[event.ensemble_id] = self._start(
            f"invoke_workflow {name}",
            None,
            {
                "gen_ai.operation.name": "invoke_workflow",
                "agentensemble.ensemble_id": event.ensemble_id,
                "agentensemble.workflow": event.workflow,
                "agentensemble.total_tasks": event.total_tasks,
            },
        )

    async def on_task_start(self, event: TaskStartEvent) -> None:
        """Open a task span under the run span (a delegated worker's under the tool call that
        delegated to it)."""
        run = event.ensemble_id
        parent = self._worker_parents.pop((run, event.task_id), None)
        if parent is None and event.parent_task_id is not None:
            parent = self._tasks.get((run, event.parent_task_id))
        self._tasks[(run, event.task_id)] = self._start(
            f"invoke_agent {event.agent_role}",
            parent if parent is not None else self._runs.get(run),
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": event.agent_role,
                "agentensemble.task.index": event.task_index,
                "agentensemble.task.id": event.task_id,
                "agentensemble.task.description": event.task_description,
            },
        )

    async def on_llm_iteration_started(self, event: LlmIterationStartedEvent) -> None:
        """Open a chat span under the task span."""
        key = (event.ensemble_id, event.task_id, event.iteration_index)
        self._calls[key] = self._start(
            f"chat {event.model_name}",
            self._tasks.get((event.ensemble_id, event.task_id)),
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": event.model_name,
                "gen_ai.agent.name": event.agent_role,
            },
            kind=self._trace.SpanKind.CLIENT,
        )

    async def on_llm_iteration_completed(self, event: LlmIterationCompletedEvent) -> None:
        """Close the chat span with token usage and the finish reason."""
        key = (event.ensemble_id, event.task_id, event.iteration_index)
        span = self._calls.pop(key, None)
        if span is None:
            return
        if event.input_tokens >= 0:
            span.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
        if event.output_tokens >= 0:
            span.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
        reason = "tool_calls" if event.response_type == "TOOL_CALLS" else "stop"
        span.set_attribute("gen_ai.response.finish_reasons", (reason,))
        span.end()

    async def on_delegation_started(self, event: DelegationStartedEvent) -> None:
        """Open the delegating tool call's span (once per call), for the worker to go under."""
        run = event.ensemble_id
        parent = self._tasks.get((run, event.task_id))
        if event.tool_call_id is not None:
            key = (run, event.task_id, event.tool_call_id)
            if key not in self._tools:
                self._tools[key] = self._start(
                    "execute_tool",
                    parent,
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.call.id": event.tool_call_id,
                    },
                )
            parent = self._tools[key]
        if parent is not None:
            self._worker_parents[(run, event.delegation_id)] = parent

    async def on_loop_iteration_completed(self, event: LoopIterationCompletedEvent) -> None:
        """Record an iteration as a span under its loop's task span."""
        key = (event.ensemble_id, event.task_id)
        end = _now_ns()
        loop_span = self._tasks.get(key)
        # the first iteration starts with the loop's task span, each later one where the
        # previous ended
        start = self._iteration_starts.get(key) or getattr(loop_span, "start_time", None) or end
        self._iteration_starts[key] = end
        span = self._start(
            f"loop_iteration {event.loop_name}",
            loop_span,
            {
                "agentensemble.loop.name": event.loop_name,
                "agentensemble.loop.iteration": event.iteration,
            },
            start_time=start,
        )
        span.end(end_time=end)

    async def on_graph_state_completed(self, event: GraphStateCompletedEvent) -> None:
        """Record a graph step as an event of the run span (the state's task has its span)."""
        run = self._runs.get(event.ensemble_id)
        if run is not None:
            run.add_event(
                "graph_state_completed",
                {
                    "agentensemble.graph.name": event.graph_name,
                    "agentensemble.graph.step": event.step,
                    "agentensemble.graph.state": event.state,
                    "agentensemble.graph.next_state": event.next_state,
                },
            )

    async def on_tool_call(self, event: ToolCallEvent) -> None:
        """Record a finished tool call as a span under its task span (or close the span a
        delegation opened for it). A call answered with a STOP ran nothing: no span."""
        if event.outcome == "SKIPPED_MAX_ITERATIONS":
            return
        end = _now_ns()
        opened = self._tools.pop((event.ensemble_id, event.task_id, event.tool_call_id), None)
        if opened is not None:
            opened.update_name(f"execute_tool {event.tool_name}")
            opened.set_attribute("gen_ai.tool.name", event.tool_name)
            opened.set_attribute("agentensemble.tool.outcome", event.outcome)
            if event.outcome != "SUCCESS":
                opened.set_status(
                    self._trace.Status(self._trace.StatusCode.ERROR, event.tool_result)
                )
            opened.end(end_time=end)
            return
        span = self._start(
            f"execute_tool {event.tool_name}",
            self._tasks.get((event.ensemble_id, event.task_id)),
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool_name,
                "gen_ai.tool.call.id": event.tool_call_id,
                "agentensemble.tool.outcome": event.outcome,
            },
            start_time=end - int(event.duration.total_seconds() * _NANOSECONDS),
        )
        if event.outcome != "SUCCESS":
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.tool_result))
        span.end(end_time=end)

    async def on_task_complete(self, event: TaskCompleteEvent) -> None:
        """Close the task span with its token totals."""
        self._iteration_starts.pop((event.ensemble_id, event.task_id), None)
        span = self._tasks.pop((event.ensemble_id, event.task_id), None)
        if span is None:
            return
        if event.input_tokens >= 0:
            span.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
        if event.output_tokens >= 0:
            span.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
        span.end()

    async def on_task_failed(self, event: TaskFailedEvent) -> None:
        """Close the task span (and a model call it was in) as failed."""
        self._iteration_starts.pop((event.ensemble_id, event.task_id), None)
        for key in [k for k in self._calls if k[:2] == (event.ensemble_id, event.task_id)]:
            call = self._calls.pop(key)
            self._fail(call, event.error_type, event.reason)
            call.end()
        span = self._tasks.pop((event.ensemble_id, event.task_id), None)
        if span is not None:
            self._fail(span, event.error_type, event.reason)
            span.end()

    async def on_ensemble_completed(self, event: EnsembleCompletedEvent) -> None:
        """Close the run span (as failed when the run raised), and any span of the run still
        open."""
        for call in [k for k in self._calls if k[0] == event.ensemble_id]:
            self._calls.pop(call).end()
        for tool_call in [k for k in self._tools if k[0] == event.ensemble_id]:
            self._tools.pop(tool_call).end()
        for task in [k for k in self._tasks if k[0] == event.ensemble_id]:
            self._tasks.pop(task).end()
        for worker in [k for k in self._worker_parents if k[0] == event.ensemble_id]:
            del self._worker_parents[worker]
        span = self._runs.pop(event.ensemble_id, None)
        if span is None:
            return
        span.set_attribute("agentensemble.exit_reason", event.exit_reason)
        if event.error_type is not None:
            self._fail(span, event.error_type, event.reason or event.error_type)
        span.end()


def _now_ns() -> int:
    return int(datetime.now(UTC).timestamp() * _NANOSECONDS)
