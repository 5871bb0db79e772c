"""Token-bucket rate limiting (BEHAVIOUR §12), observed through an injected clock."""

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta

import pytest

from agentensemble import (
    Agent,
    AgentExecutionError,
    Ensemble,
    FunctionModel,
    RateLimit,
    RateLimitedChatModel,
    RateLimitTimeoutError,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ValidationError,
    Workflow,
)
from agentensemble.models import Message, ToolSpec, UserMessage
from tests.fakes import FakeClock


class TimedModel(FunctionModel):
    """A `FunctionModel` with the `.times` that `timed_model` records."""

    times: list[float]


def timed_model(clock: FakeClock) -> TimedModel:
    """A model that records the virtual time of each call in `.times`."""
    times: list[float] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        times.append(round(clock.now, 6))
        return "ok"

    model = TimedModel(reply)
    model.times = times
    return model


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RateLimit(0, timedelta(seconds=1)), "RateLimit requests must be > 0, got: 0"),
        (lambda: RateLimit(5, None), "RateLimit period must not be null"),  # type: ignore[arg-type]
        (lambda: RateLimit(5, timedelta(0)), "RateLimit period must be positive, got: 0:00:00"),
        (lambda: RateLimit(5, -2), "RateLimit period must be positive, got: -1 day, 23:59:58"),
        (lambda: RateLimit.per_minute(-1), "RateLimit requests must be > 0, got: -1"),
    ],
)
def test_invalid_limits(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make()
    assert str(caught.value) == message


def test_value_equality_and_factories() -> None:
    assert RateLimit.per_second(5) == RateLimit(5, timedelta(seconds=1))
    assert RateLimit.per_minute(60) == RateLimit(60, 60)
    assert RateLimit.per_minute(60).interval == 1.0


async def test_starts_with_one_token_and_refills_one_per_interval() -> None:
    clock = FakeClock()
    model = timed_model(clock)
    limited = RateLimitedChatModel(model, RateLimit.per_second(2, clock=clock))
    for _ in range(4):
        await limited.chat([UserMessage("hi")])
    assert model.times == [0.0, 0.5, 1.0, 1.5]


async def test_an_idle_bucket_fills_up_to_its_capacity() -> None:
    clock = FakeClock()
    model = timed_model(clock)
    limited = RateLimitedChatModel(model, RateLimit.per_second(3, clock=clock))
    clock.now = 100.0
    for _ in range(5):
        await limited.chat([UserMessage("hi")])
    assert model.times == [100.0, 100.0, 100.0, pytest.approx(100.333333), 100.666667]


async def test_concurrent_callers_are_served_in_arrival_order() -> None:
    clock = FakeClock()
    order: list[int] = []

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        message = messages[0]
        assert isinstance(message, UserMessage)
        order.append(int(message.text))
        return "ok"

    limited = RateLimitedChatModel(FunctionModel(reply), RateLimit.per_second(4, clock=clock))
    await asyncio.gather(*(limited.chat([UserMessage(str(i))]) for i in range(6)))
    assert order == [0, 1, 2, 3, 4, 5]
    assert clock.now == pytest.approx(1.25)


async def test_a_wait_longer_than_the_timeout_fails_at_once() -> None:
    clock = FakeClock()
    limited = RateLimitedChatModel(
        ScriptedModel(["a", "b"]),
        RateLimit.per_minute(1, clock=clock),
        wait_timeout=timedelta(seconds=10),
    )
    await limited.chat([UserMessage("first")])
    with pytest.raises(RateLimitTimeoutError) as caught:
        await limited.chat([UserMessage("second")])
    assert str(caught.value) == (
        "Rate limit exceeded: no token became available within the 10000ms wait timeout. "
        "Limit: 1 requests per 0:01:00. Increase wait_timeout or reduce concurrency."
    )
    assert clock.sleeps == []


def test_ensemble_limit_is_one_bucket_shared_by_parallel_tasks_and_new_each_run() -> None:
    clock = FakeClock()
    model = timed_model(clock)
    ensemble = Ensemble(
        tasks=[Task(f"Task {i}") for i in range(4)],
        llm=model,
        workflow=Workflow.PARALLEL,
        rate_limit=RateLimit.per_second(2, clock=clock),
    )
    ensemble.run()
    assert model.times == [0.0, 0.5, 1.0, 1.5]
    ensemble.run()  # a fresh bucket: its first call does not wait
    assert model.times[4:] == [1.5, 2.0, 2.5, 3.0]


def test_a_task_limit_gets_its_own_bucket_on_the_raw_ensemble_model() -> None:
    clock = FakeClock()
    model = timed_model(clock)
    limit = RateLimit.per_minute(1, clock=clock)
    tasks = [Task("A", rate_limit=limit), Task("B", rate_limit=limit)]
    Ensemble(tasks=tasks, llm=model, rate_limit=RateLimit.per_minute(1, clock=clock)).run()
    assert model.times == [0.0, 0.0]  # two separate buckets, the ensemble's is not nested


def test_agent_and_task_models_are_wrapped_at_build_time() -> None:
    limit = RateLimit.per_second(1)
    agent = Agent("A", "G", llm=ScriptedModel([]), rate_limit=limit)
    task = Task("T", llm=ScriptedModel([]), rate_limit=limit)
    assert isinstance(agent.llm, RateLimitedChatModel)
    assert isinstance(task.llm, RateLimitedChatModel)
    assert agent.llm is not agent.copy().llm  # a copy gets its own bucket
    copied = agent.copy().llm
    assert isinstance(copied, RateLimitedChatModel)
    assert not isinstance(copied.model, RateLimitedChatModel)
    shared = RateLimitedChatModel(ScriptedModel([]), limit)
    assert Agent("B", "G", llm=shared).copy(role="C").llm is shared  # a shared bucket stays
    assert Task("U", llm=shared).copy(description="V").llm is shared


def test_a_timeout_surfaces_through_the_task_error() -> None:
    clock = FakeClock()
    slow = RateLimitedChatModel(
        ScriptedModel(["one", "two"]),
        RateLimit.per_minute(1, clock=clock),
        wait_timeout=timedelta(seconds=1),
    )
    agent = Agent("Worker", "Work", llm=slow)
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=[Task("One", agent=agent), Task("Two", agent=agent)]).run()
    assert isinstance(caught.value.__cause__, AgentExecutionError)
    assert isinstance(caught.value.__cause__.__cause__, RateLimitTimeoutError)
    assert [o.raw for o in caught.value.completed_outputs] == ["one"]


def test_an_ensemble_limit_needs_an_ensemble_model() -> None:
    agent = Agent("A", "G", llm=ScriptedModel([]))
    with pytest.raises(ValidationError) as caught:
        Ensemble(tasks=[Task("x", agent=agent)], rate_limit=RateLimit.per_second(1)).run()
    assert str(caught.value) == (
        "Ensemble rate_limit is configured but llm is null. An ensemble-level llm is required "
        "when rate_limit is set."
    )
