"""OpenTelemetry spans, checked with the SDK's in-memory exporter."""

from collections.abc import Mapping
from typing import cast

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util.types import AnyValue

from agentensemble import (
    Agent,
    Ensemble,
    OpenTelemetryListener,
    ScriptedModel,
    Task,
    TaskExecutionError,
    Usage,
    tool,
    tool_call,
)

pytestmark = pytest.mark.integration

Spans = tuple[TracerProvider, InMemorySpanExporter]
"""A tracer provider and the exporter that keeps the spans it finishes."""


def attributes(span: ReadableSpan) -> Mapping[str, AnyValue]:
    """A finished span's attributes (the SDK gives every span a mapping)."""
    assert span.attributes is not None
    return span.attributes


def parent_id(span: ReadableSpan) -> int:
    """The span id of a span's parent."""
    assert span.parent is not None
    return span.parent.span_id


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    return "found"


@pytest.fixture
def spans() -> Spans:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_span_tree_and_genai_attributes(spans: Spans) -> None:
    provider, exporter = spans
    llm = ScriptedModel([tool_call("lookup", key="k"), "done", "second"], usage=Usage(12, 4))
    agent = Agent("Researcher", "Find", llm=llm, tools=[lookup])
    Ensemble(
        tasks=[Task("Find k", agent=agent), Task("Again", agent=agent)],
        name="research",
        listeners=[OpenTelemetryListener(tracer_provider=provider)],
    ).run()

    finished = {span.name: span for span in exporter.get_finished_spans()}
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == sorted(
        [
            "invoke_workflow research",
            "invoke_agent Researcher",
            "invoke_agent Researcher",
            "chat ScriptedModel",
            "chat ScriptedModel",
            "chat ScriptedModel",
            "execute_tool lookup",
        ]
    )
    root = finished["invoke_workflow research"]
    assert root.parent is None
    assert attributes(root)["gen_ai.operation.name"] == "invoke_workflow"
    assert attributes(root)["agentensemble.exit_reason"] == "COMPLETED"

    all_spans = exporter.get_finished_spans()
    tasks = [s for s in all_spans if s.name.startswith("invoke_agent")]
    assert {parent_id(t) for t in tasks} == {root.context.span_id}
    assert all(t.context.trace_id == root.context.trace_id for t in all_spans)
    first_task = min(tasks, key=lambda s: cast(int, attributes(s)["agentensemble.task.index"]))
    assert attributes(first_task)["gen_ai.agent.name"] == "Researcher"
    assert attributes(first_task)["gen_ai.usage.input_tokens"] == 24

    chats = [s for s in all_spans if s.name.startswith("chat")]
    assert all(s.kind is SpanKind.CLIENT for s in chats)
    first_chats = [s for s in chats if parent_id(s) == first_task.context.span_id]
    assert len(first_chats) == 2
    assert attributes(first_chats[0])["gen_ai.operation.name"] == "chat"
    assert attributes(first_chats[0])["gen_ai.usage.output_tokens"] == 4
    assert attributes(first_chats[0])["gen_ai.response.finish_reasons"] == ("tool_calls",)

    tool_span = finished["execute_tool lookup"]
    assert parent_id(tool_span) == first_task.context.span_id
    assert attributes(tool_span)["gen_ai.tool.name"] == "lookup"
    call_id = attributes(tool_span)["gen_ai.tool.call.id"]
    assert isinstance(call_id, str)
    assert call_id.startswith("call_")
    start_time, end_time = tool_span.start_time, tool_span.end_time
    assert start_time is not None
    assert end_time is not None
    assert start_time <= end_time


def test_failures_mark_spans_as_errors(spans: Spans) -> None:
    provider, exporter = spans
    with pytest.raises(TaskExecutionError):
        Ensemble(
            tasks=[Task("Doomed")],
            llm=ScriptedModel([]),
            listeners=[OpenTelemetryListener(tracer_provider=provider)],
        ).run()
    by_name = {span.name: span for span in exporter.get_finished_spans()}
    assert by_name["invoke_agent Agent"].status.status_code is StatusCode.ERROR
    assert attributes(by_name["invoke_agent Agent"])["error.type"] == "AgentExecutionError"
    root = by_name["invoke_workflow agentensemble"]
    assert root.status.status_code is StatusCode.ERROR
    assert attributes(root)["agentensemble.exit_reason"] == "ERROR"


def test_a_delegated_worker_nests_under_the_delegating_tool_call(spans: Spans) -> None:
    provider, exporter = spans
    lead = ScriptedModel(
        [
            tool_call("delegate", agent_role="Helper", task_description="Sub"),
            tool_call("delegate", agent_role="Nobody", task_description="Sub"),
            "done",
        ]
    )
    a = Agent("Lead", "lead", llm=lead, allow_delegation=True)
    helper = Agent("Helper", "help", llm=ScriptedModel(["helped"]))
    Ensemble(
        tasks=[Task("Job", agent=a)],
        agents=[helper],
        listeners=[OpenTelemetryListener(tracer_provider=provider)],
    ).run()

    finished = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    (lead_span,) = by_name["invoke_agent Lead"]
    (worker_span,) = by_name["invoke_agent Helper"]
    delegated, refused = sorted(by_name["execute_tool delegate"], key=lambda s: s.start_time or 0)
    assert parent_id(delegated) == lead_span.context.span_id
    assert parent_id(refused) == lead_span.context.span_id
    assert parent_id(worker_span) == delegated.context.span_id
    assert attributes(delegated)["gen_ai.tool.name"] == "delegate"
    assert attributes(delegated)["agentensemble.tool.outcome"] == "SUCCESS"
    assert delegated.start_time is not None
    assert worker_span.start_time is not None
    assert worker_span.end_time is not None
    assert delegated.end_time is not None
    assert delegated.start_time <= worker_span.start_time
    assert worker_span.end_time <= delegated.end_time
    assert len(by_name["execute_tool delegate"]) == 2


def test_loop_iterations_and_graph_steps(spans: Spans) -> None:
    from agentensemble import Edge, Graph, Loop

    provider, exporter = spans
    listener = OpenTelemetryListener(tracer_provider=provider)
    body = Task("Draft", llm=ScriptedModel(["one", "two"]), name="draft")
    Ensemble(loops=[Loop("polish", [body], max_iterations=2)], listeners=[listener]).run()
    finished = exporter.get_finished_spans()
    iterations = [span for span in finished if span.name == "loop_iteration polish"]
    [loop_task] = [span for span in finished if span.name == "invoke_agent (deterministic)"]
    assert [attributes(span)["agentensemble.loop.iteration"] for span in iterations] == [1, 2]
    assert {parent_id(span) for span in iterations} == {loop_task.context.span_id}
    assert iterations[0].start_time == loop_task.start_time
    assert iterations[1].start_time == iterations[0].end_time
    drafts = [s for s in finished if attributes(s).get("agentensemble.task.description") == "Draft"]
    assert len(drafts) == 2
    assert {parent_id(span) for span in drafts} == {loop_task.context.span_id}

    exporter.clear()
    state = Task("Answer", llm=ScriptedModel(["done"]))
    graph = Graph("g", {"a": state}, "a", [Edge("a", Graph.END)])
    Ensemble(graph=graph, listeners=[listener]).run()
    [run] = [span for span in exporter.get_finished_spans() if span.name.startswith("invoke_w")]
    [step] = [event for event in run.events if event.name == "graph_state_completed"]
    assert step.attributes is not None
    assert step.attributes["agentensemble.graph.next_state"] == "__END__"
