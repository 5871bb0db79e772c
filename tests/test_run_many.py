"""`run_many` / `arun_many`: one run per inputs mapping, results in order, one failure not
stopping the others."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agentensemble import (
    Ensemble,
    EnsembleOutput,
    FunctionModel,
    RunOptions,
    Task,
    TaskExecutionError,
    ValidationError,
)
from agentensemble.models import Message, ToolSpec


def topic_of(messages: Sequence[Message]) -> str:
    text = messages[-1].text or ""
    return text.split("Write about ", 1)[1].split(".", 1)[0]


def test_outputs_come_back_in_input_order_with_failures_in_place() -> None:
    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        topic = topic_of(messages)
        if topic == "volcanoes":
            raise ConnectionError("provider down")
        return f"about {topic}"

    ensemble = Ensemble(tasks=[Task("Write about {topic}.")], llm=FunctionModel(answer))
    results = ensemble.run_many(
        [{"topic": "bees"}, {"topic": "volcanoes"}, {"topic": "tides"}, {"topic": 7}]
    )
    assert [type(result) for result in results] == [
        EnsembleOutput,
        TaskExecutionError,
        EnsembleOutput,
        EnsembleOutput,
    ]
    assert [r.raw for r in results if isinstance(r, EnsembleOutput)] == [
        "about bees",
        "about tides",
        "about 7",
    ]
    assert "provider down" in str(results[1])


async def test_at_most_max_concurrency_runs_at_once() -> None:
    running = 0
    most = 0
    arrived = asyncio.Event()
    release = asyncio.Event()

    async def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        if running == 2:
            arrived.set()
        await release.wait()
        running -= 1
        return "ok"

    ensemble = Ensemble(tasks=[Task("Write about {topic}.")], llm=FunctionModel(answer))
    batch = asyncio.create_task(
        ensemble.arun_many([{"topic": str(n)} for n in range(6)], max_concurrency=2)
    )
    async with asyncio.timeout(30):
        await arrived.wait()
        release.set()
        results = await batch
    assert most == 2
    assert all(isinstance(result, EnsembleOutput) for result in results)


def test_bad_inputs_are_refused_before_any_run() -> None:
    calls: list[str] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        calls.append("called")
        return "ok"

    model = FunctionModel(answer)
    ensemble = Ensemble(tasks=[Task("Write about {topic}.")], llm=model)
    with pytest.raises(ValidationError, match=r"run_many inputs_list\[1\]\['topic'\] must be"):
        ensemble.run_many([{"topic": "a"}, {"topic": ["b"]}])  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="run_many max_concurrency must be > 0, got: 0"):
        ensemble.run_many([{"topic": "a"}], max_concurrency=0)
    with pytest.raises(ValidationError, match="run_many options must not set run_id"):
        ensemble.run_many([{"topic": "a"}], RunOptions(run_id="one"))
    with pytest.raises(ValidationError, match="must be a list of inputs mappings"):
        ensemble.run_many("topic=a")  # type: ignore[arg-type]
    assert calls == []


async def test_cancelling_the_batch_cancels_the_runs_still_going() -> None:
    started = asyncio.Event()
    waiting: list[str] = []
    cancelled: list[str] = []

    async def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        waiting.append(topic_of(messages))
        if len(waiting) == 2:
            started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(topic_of(messages))
            raise
        return "never"

    ensemble = Ensemble(tasks=[Task("Write about {topic}.")], llm=FunctionModel(answer))
    batch = asyncio.create_task(ensemble.arun_many([{"topic": "a"}, {"topic": "b"}]))
    async with asyncio.timeout(30):
        await started.wait()
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
    assert sorted(cancelled) == ["a", "b"]
