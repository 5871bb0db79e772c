"""`OpenTelemetryListener` ends every span it starts (issue 8, item 3): when a model call
raises, and when a run is cancelled from outside while a task waits in its model call.
Checked with the SDK's in-memory exporter and a processor that records every span started."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    OpenTelemetryListener,
    ScriptedModel,
    Task,
    TaskCompleteEvent,
    TaskExecutionError,
    TokenEvent,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import Message, Reply, ToolSpec

pytestmark = pytest.mark.integration

SAFETY = 10
"""Seconds; a safety bound on every wait, only reached when something hangs."""


class StartedSpans(SpanProcessor):
    """Records every span the provider starts."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.spans.append(span)


class Spans:
    """A tracer provider, the spans it started and the spans it finished."""

    def __init__(self) -> None:
        self.started = StartedSpans()
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.started)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def listener(self) -> OpenTelemetryListener:
        return OpenTelemetryListener(tracer_provider=self.provider)

    def finished(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def by_name(self) -> dict[str, list[ReadableSpan]]:
        names: dict[str, list[ReadableSpan]] = {}
        for span in self.finished():
            names.setdefault(span.name, []).append(span)
        return names

    def assert_every_started_span_ended(self) -> None:
        started = {span.context.span_id for span in self.started.spans}
        ended = {span.context.span_id for span in self.finished()}
        assert started
        assert started == ended
        assert all(span.end_time is not None for span in self.finished())


@pytest.fixture
def spans() -> Spans:
    return Spans()


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    return f"value of {key}"


def down_after_tools(calls_before_failing: int) -> FunctionModel:
    """A model that asks for `lookup` `calls_before_failing` times, then raises."""
    asked: list[int] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Reply:
        asked.append(1)
        if len(asked) <= calls_before_failing:
            return tool_call("lookup", key=f"k{len(asked)}")
        raise RuntimeError("provider down")

    return FunctionModel(reply, model_name="flaky")


@pytest.mark.parametrize("streamed", [False, True], ids=["chat", "stream"])
@pytest.mark.parametrize("calls_before_failing", [0, 1], ids=["first-call", "after-a-tool"])
def test_a_model_call_that_raises_ends_its_chat_span_as_an_error(
    spans: Spans, calls_before_failing: int, streamed: bool
) -> None:
    tokens: list[TokenEvent] = []
    agent = Agent("Asker", "Ask", llm=down_after_tools(calls_before_failing), tools=[lookup])
    ensemble = Ensemble(
        tasks=[Task("Ask the provider", agent=agent)],
        listeners=[spans.listener()],
        on_token=tokens.append if streamed else None,
    )
    with pytest.raises(TaskExecutionError, match="provider down"):
        ensemble.run()

    spans.assert_every_started_span_ended()
    names = spans.by_name()
    assert sorted(names) == sorted(
        ["invoke_workflow agentensemble", "invoke_agent Asker", "chat flaky"]
        + (["execute_tool lookup"] if calls_before_failing else [])
    )
    chats = names["chat flaky"]
    assert len(chats) == calls_before_failing + 1
    failed = chats[-1]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description is not None
    assert "provider down" in failed.status.description
    assert all(chat.status.status_code is not StatusCode.ERROR for chat in chats[:-1])
    assert names["invoke_agent Asker"][0].status.status_code is StatusCode.ERROR
    assert names["invoke_workflow agentensemble"][0].status.status_code is StatusCode.ERROR


def hanging_model(reached: asyncio.Event) -> FunctionModel:
    """A model whose calls signal `reached`, then wait until cancelled."""
    never = asyncio.Event()

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        reached.set()
        await never.wait()
        return "too late"

    return FunctionModel(reply, model_name="slow")


async def cancel_once_reached(ensemble: Ensemble, *reached: asyncio.Event) -> None:
    """Start a run, wait until each of `reached` is set, cancel the run and see it end."""
    run = asyncio.create_task(ensemble.arun())
    async with asyncio.timeout(SAFETY):
        for event in reached:
            await event.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(SAFETY):
            await run
    assert run.cancelled()


async def test_cancelling_a_run_waiting_in_its_model_call_ends_every_span(spans: Spans) -> None:
    reached = asyncio.Event()
    agent = Agent("Waiter", "Wait", llm=hanging_model(reached))
    ensemble = Ensemble(
        tasks=[Task("Wait for the answer", agent=agent)],
        name="cancelled",
        listeners=[spans.listener()],
    )
    await cancel_once_reached(ensemble, reached)

    spans.assert_every_started_span_ended()
    names = spans.by_name()
    assert sorted(names) == ["chat slow", "invoke_agent Waiter", "invoke_workflow cancelled"]
    assert all(len(group) == 1 for group in names.values())


async def test_cancelling_a_parallel_run_ends_the_spans_of_completed_and_waiting_tasks(
    spans: Spans,
) -> None:
    quick_done = asyncio.Event()
    reached = [asyncio.Event(), asyncio.Event()]
    quick = Task("Answer at once", agent=Agent("Quick", "Answer", llm=ScriptedModel(["done"])))
    waiting = [
        Task(f"Wait {i}", agent=Agent(f"Waiter {i}", "Wait", llm=hanging_model(event)))
        for i, event in enumerate(reached)
    ]

    async def on_complete(event: TaskCompleteEvent) -> None:  # on the loop, unlike a sync one
        quick_done.set()

    ensemble = Ensemble(
        tasks=[quick, *waiting],
        workflow=Workflow.PARALLEL,
        name="cancelled",
        listeners=[spans.listener()],
        on_task_complete=on_complete,
    )
    await cancel_once_reached(ensemble, quick_done, *reached)

    spans.assert_every_started_span_ended()
    names = spans.by_name()
    assert sorted(names) == [
        "chat ScriptedModel",
        "chat slow",
        "invoke_agent Quick",
        "invoke_agent Waiter 0",
        "invoke_agent Waiter 1",
        "invoke_workflow cancelled",
    ]
    assert len(names["chat slow"]) == 2
    assert names["invoke_agent Quick"][0].status.status_code is not StatusCode.ERROR
