"""OpenTelemetry spans, checked with the SDK's in-memory exporter."""

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

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


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    return "found"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_span_tree_and_genai_attributes(spans) -> None:
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
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["agentensemble.exit_reason"] == "COMPLETED"

    all_spans = exporter.get_finished_spans()
    tasks = [s for s in all_spans if s.name.startswith("invoke_agent")]
    assert {t.parent.span_id for t in tasks} == {root.context.span_id}
    assert all(t.context.trace_id == root.context.trace_id for t in all_spans)
    first_task = min(tasks, key=lambda s: s.attributes["agentensemble.task.index"])
    assert first_task.attributes["gen_ai.agent.name"] == "Researcher"
    assert first_task.attributes["gen_ai.usage.input_tokens"] == 24

    chats = [s for s in all_spans if s.name.startswith("chat")]
    assert all(s.kind is SpanKind.CLIENT for s in chats)
    first_chats = [s for s in chats if s.parent.span_id == first_task.context.span_id]
    assert len(first_chats) == 2
    assert first_chats[0].attributes["gen_ai.operation.name"] == "chat"
    assert first_chats[0].attributes["gen_ai.usage.output_tokens"] == 4
    assert first_chats[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)

    tool_span = finished["execute_tool lookup"]
    assert tool_span.parent.span_id == first_task.context.span_id
    assert tool_span.attributes["gen_ai.tool.name"] == "lookup"
    assert tool_span.attributes["gen_ai.tool.call.id"].startswith("call_")
    assert tool_span.start_time <= tool_span.end_time


def test_failures_mark_spans_as_errors(spans) -> None:
    provider, exporter = spans
    with pytest.raises(TaskExecutionError):
        Ensemble(
            tasks=[Task("Doomed")],
            llm=ScriptedModel([]),
            listeners=[OpenTelemetryListener(tracer_provider=provider)],
        ).run()
    by_name = {span.name: span for span in exporter.get_finished_spans()}
    assert by_name["invoke_agent Agent"].status.status_code is StatusCode.ERROR
    assert by_name["invoke_agent Agent"].attributes["error.type"] == "AgentExecutionError"
    root = by_name["invoke_workflow agentensemble"]
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["agentensemble.exit_reason"] == "ERROR"
