"""`Ensemble.astream`: a run's events as an async iterator, with back-pressure."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentensemble import (
    Ensemble,
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    EventStream,
    FunctionModel,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    MapReduceEnsemble,
    RunOptions,
    ScriptedModel,
    Task,
    TaskCompleteEvent,
    TaskExecutionError,
    TaskFailedEvent,
    TokenEvent,
    ValidationError,
)
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import Event, ExecutionTrace

SAFETY = 10.0
"""Seconds a test waits for something that should happen at once (a guard, not a pause)."""


class Recorder:
    """A plain async listener: every event of the run, and a way to wait for one."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.consumed = 0
        """How many events the stream's reader has taken (set by the test)."""
        self.ahead: list[int] = []
        """For each event, how far the run was ahead of the reader when it emitted it."""
        self._changed = asyncio.Condition()

    async def on_event(self, event: Event) -> None:
        self.events.append(event)
        self.ahead.append(len(self.events) - self.consumed)
        async with self._changed:
            self._changed.notify_all()

    async def reach(self, predicate: Callable[[list[Event]], bool]) -> None:
        async with asyncio.timeout(SAFETY), self._changed:
            await self._changed.wait_for(lambda: predicate(self.events))

    def without_tokens(self) -> list[Event]:
        return [event for event in self.events if not isinstance(event, TokenEvent)]


class Gate:
    """A model call that never answers: it says when it started and when it was cancelled."""

    def __init__(self) -> None:
        self.called = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        self.called.set()
        try:
            await asyncio.Event().wait()  # nobody sets it
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


class Exporter:
    """Keeps exported traces; `exported` is set by the first."""

    def __init__(self) -> None:
        self.traces: list[ExecutionTrace] = []
        self.exported = asyncio.Event()

    async def export(self, trace: ExecutionTrace) -> None:
        self.traces.append(trace)
        self.exported.set()


def two_tasks(llm: Any, **settings: Any) -> Ensemble:
    return Ensemble(tasks=[Task("Research"), Task("Write")], llm=llm, **settings)


def others(tasks: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Tasks still running besides the test's own."""
    return [task for task in tasks if task is not asyncio.current_task() and not task.done()]


async def collect(stream: EventStream) -> list[Event]:
    return [event async for event in stream]


async def read_into(sink: list[Event], stream: EventStream) -> None:
    async for event in stream:
        sink.append(event)


# --- what the stream yields ---------------------------------------------------------------


async def test_a_sequential_run_yields_every_event_in_order() -> None:
    recorder = Recorder()
    stream = two_tasks(ScriptedModel(["Alpha beta", "Gamma"]), listeners=[recorder]).astream()
    streamed = await collect(stream)

    assert len(streamed) == len(recorder.events)
    assert all(mine is theirs for mine, theirs in zip(streamed, recorder.events, strict=True))
    assert isinstance(streamed[0], EnsembleStartedEvent)
    assert isinstance(streamed[-1], EnsembleCompletedEvent)
    assert [e.task_index for e in streamed if isinstance(e, TaskCompleteEvent)] == [1, 2]

    plain = Recorder()  # the same kind of run, with a plain listener and no stream
    await two_tasks(ScriptedModel(["Alpha beta", "Gamma"]), listeners=[plain]).arun()
    without_tokens = [e for e in streamed if not isinstance(e, TokenEvent)]
    assert [type(e) for e in without_tokens] == [type(e) for e in plain.events]


async def test_output_is_what_arun_returns() -> None:
    replies = ["Alpha beta", "Gamma delta"]
    stream = two_tasks(ScriptedModel(replies)).astream(inputs={"topic": "x"})
    with pytest.raises(RuntimeError, match="has not finished"):
        _ = stream.output
    await collect(stream)
    expected = await two_tasks(ScriptedModel(replies)).arun(inputs={"topic": "x"})

    output = stream.output
    assert output.raw == expected.raw == "Gamma delta"
    assert [t.raw for t in output.task_outputs] == [t.raw for t in expected.task_outputs]
    assert output.exit_reason == expected.exit_reason
    assert output.trace is not None
    assert len(output.trace.task_traces) == 2


async def test_the_run_streams_tokens() -> None:
    answer = "Streaming  keeps every space,\nnewline and  word."

    async def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return answer

    stream = Ensemble(tasks=[Task("Explain")], llm=FunctionModel(model)).astream()
    tokens = [e.token async for e in stream if isinstance(e, TokenEvent)]

    plain: list[str] = []
    Ensemble(
        tasks=[Task("Explain")], llm=FunctionModel(model), on_token=lambda e: plain.append(e.token)
    ).run()
    assert len(tokens) > 5
    assert tokens == plain
    assert "".join(tokens) == answer == stream.output.raw


async def test_a_failed_run_raises_at_the_end_after_its_events() -> None:
    recorder = Recorder()
    stream = two_tasks(ScriptedModel(["Alpha"]), listeners=[recorder]).astream()  # 2nd fails
    streamed: list[Event] = []
    with pytest.raises(TaskExecutionError) as caught:
        await read_into(streamed, stream)

    assert caught.value.task_description == "Write"
    assert [e.task_index for e in streamed if isinstance(e, TaskCompleteEvent)] == [1]
    failed, completed = streamed[-2:]
    assert isinstance(failed, TaskFailedEvent)
    assert failed.task_description == "Write"
    assert isinstance(completed, EnsembleCompletedEvent)
    assert completed.exit_reason == "ERROR"
    assert streamed == recorder.events
    with pytest.raises(RuntimeError, match="failed") as no_output:
        _ = stream.output
    assert no_output.value.__cause__ is caught.value
    assert [event async for event in stream] == []  # the end stays the end


async def test_a_map_reduce_streams_its_run() -> None:
    ensemble = MapReduceEnsemble.of(
        ScriptedModel(["a", "b", "c", "final"]), ["x", "y", "z"], "Map", "Reduce", chunk_size=3
    )
    streamed = await collect(ensemble.astream())
    completed = [e for e in streamed if isinstance(e, TaskCompleteEvent)]
    assert len(completed) == 4
    assert isinstance(streamed[-1], EnsembleCompletedEvent)


# --- leaving early ------------------------------------------------------------------------


async def test_breaking_out_of_the_loop_cancels_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate, exporter, recorder = Gate(), Exporter(), Recorder()
    ensemble = Ensemble(
        tasks=[Task("Wait")], llm=FunctionModel(gate), listeners=[recorder], trace_exporter=exporter
    )
    stream = ensemble.astream()
    async for event in stream:
        if isinstance(event, LlmIterationStartedEvent):
            await gate.called.wait()  # the model call is in flight
            break

    async with asyncio.timeout(SAFETY):
        await gate.cancelled.wait()
        await exporter.exported.wait()  # a cancelled run still exports its trace
    assert isinstance(recorder.events[-1], EnsembleCompletedEvent)  # and reports its end
    with pytest.raises(RuntimeError, match="closed before the run finished"):
        _ = stream.output
    gc.collect()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_async_with_waits_for_the_run_to_wind_down() -> None:
    gate, exporter = Gate(), Exporter()
    ensemble = Ensemble(tasks=[Task("Wait")], llm=FunctionModel(gate), trace_exporter=exporter)
    async with ensemble.astream() as stream:
        first = await anext(stream)
        assert isinstance(first, EnsembleStartedEvent)
        async with asyncio.timeout(SAFETY):
            await gate.called.wait()

    assert gate.cancelled.is_set()
    assert len(exporter.traces) == 1
    assert others(asyncio.all_tasks()) == []
    with pytest.raises(RuntimeError, match="closed before the run finished"):
        _ = stream.output
    await stream.aclose()  # closing again does nothing
    assert [event async for event in stream] == []


async def test_cancelling_the_reader_cancels_the_run_and_waits_for_it() -> None:
    gate, exporter = Gate(), Exporter()
    stream = Ensemble(
        tasks=[Task("Wait")], llm=FunctionModel(gate), trace_exporter=exporter
    ).astream()
    reader = asyncio.create_task(collect(stream))
    async with asyncio.timeout(SAFETY):
        await gate.called.wait()
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader

    assert gate.cancelled.is_set()
    assert len(exporter.traces) == 1
    assert others(asyncio.all_tasks()) == []


async def test_a_forgotten_stream_cancels_its_run(caplog: pytest.LogCaptureFixture) -> None:
    gate, exporter = Gate(), Exporter()
    stream = Ensemble(
        tasks=[Task("Wait")], llm=FunctionModel(gate), trace_exporter=exporter
    ).astream()
    await anext(stream)  # the run starts
    async with asyncio.timeout(SAFETY):
        await gate.called.wait()
    del stream
    gc.collect()

    async with asyncio.timeout(SAFETY):
        await gate.cancelled.wait()
        await exporter.exported.wait()
    gc.collect()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_stream_never_iterated_runs_nothing() -> None:
    model = ScriptedModel(["never"])
    stream = Ensemble(tasks=[Task("x")], llm=model).astream()
    await stream.aclose()
    assert model.requests == []
    with pytest.raises(RuntimeError, match="closed before the run finished"):
        _ = stream.output


# --- back-pressure ------------------------------------------------------------------------


async def test_a_slow_reader_holds_the_run_back_by_at_most_the_buffer() -> None:
    recorder = Recorder()
    ensemble = Ensemble(
        tasks=[Task(f"Step {n}") for n in range(1, 5)],
        llm=ScriptedModel(["one", "two", "three", "four"]),  # one token each: none joins
        listeners=[recorder],
    )
    streamed: list[Event] = []
    async with ensemble.astream(max_buffer=3) as stream:
        async for event in stream:
            streamed.append(event)
            recorder.consumed += 1
            # let the run go as far as it can: the buffer full, one more event waiting
            await recorder.reach(
                lambda events: (
                    len(events) >= recorder.consumed + 3 + 1
                    or isinstance(events[-1], EnsembleCompletedEvent)
                )
            )

    assert len(streamed) == len(recorder.events) > 20
    assert all(mine is theirs for mine, theirs in zip(streamed, recorder.events, strict=True))
    assert max(recorder.ahead) == 3 + 1  # never further ahead than the buffer
    assert stream.output.raw == "four"


async def test_tokens_join_when_the_buffer_is_full_and_nothing_else_is_dropped() -> None:
    answer = "a b c d e f g h"
    recorder = Recorder()
    ensemble = Ensemble(tasks=[Task("Spell")], llm=ScriptedModel([answer]), listeners=[recorder])
    streamed: list[Event] = []
    async with ensemble.astream(max_buffer=1) as stream:
        async for event in stream:
            streamed.append(event)
            if isinstance(event, LlmIterationStartedEvent):  # read nothing while it answers
                await recorder.reach(
                    lambda events: any(isinstance(e, LlmIterationCompletedEvent) for e in events)
                )

    tokens = [e for e in recorder.events if isinstance(e, TokenEvent)]
    assert len(tokens) == 8
    joined = [e for e in streamed if isinstance(e, TokenEvent)]
    assert [e.token for e in joined] == [answer]  # the first token, with all the text
    assert joined[0] == dataclasses.replace(tokens[0], token=answer)
    non_tokens = [e for e in streamed if not isinstance(e, TokenEvent)]
    assert len(non_tokens) == len(recorder.without_tokens())
    assert all(a is b for a, b in zip(non_tokens, recorder.without_tokens(), strict=True))
    assert len(streamed) == len(recorder.events) - 8 + 1
    assert stream.output.raw == answer


# --- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_max_buffer_must_be_a_positive_integer(size: Any) -> None:
    with pytest.raises(ValidationError, match="max_buffer"):
        Ensemble(tasks=[Task("x")], llm=ScriptedModel(["y"])).astream(max_buffer=size)


def test_options_must_be_run_options() -> None:
    ensemble = Ensemble(tasks=[Task("x")], llm=ScriptedModel(["y"]))
    with pytest.raises(ValidationError, match="RunOptions"):
        ensemble.astream(options={"timeout": 1})  # type: ignore[arg-type]


async def test_run_options_keep_their_listeners() -> None:
    recorder = Recorder()
    ensemble = Ensemble(tasks=[Task("x")], llm=ScriptedModel(["y"]))
    options = RunOptions(listeners=[recorder], run_id="run-1")
    streamed = await collect(ensemble.astream(options=options))
    assert streamed == recorder.events
    assert {event.ensemble_id for event in streamed} == {"run-1"}
    assert options.listeners == (recorder,)  # the caller's options are not changed


async def test_a_stream_closed_before_it_started_never_runs_its_run() -> None:
    model = ScriptedModel(["never"])
    stream = Ensemble(tasks=[Task("Wait")], llm=model).astream()
    await stream.aclose()
    assert [event async for event in stream] == []
    with pytest.raises(RuntimeError, match="the stream is closed"):
        async with stream:
            pass
    assert model.requests == []
    assert EventStream.aclose.__doc__
    assert EventStream.__anext__.__doc__
