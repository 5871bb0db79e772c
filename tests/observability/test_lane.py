"""Sync listeners on the run's listener lane: one worker thread per run, event order kept,
the loop never blocked, bounded, and every event handled before the run returns."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble import Ensemble, FunctionModel, RunOptions, ScriptedModel, Task, Workflow
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import Event, TaskCompleteEvent
from agentensemble.observability._lane import BATCH_SIZE, SyncLane

TIMEOUT = 10.0


class Collect:
    """A sync listener: every event, and the threads it was called on."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.threads: set[int] = set()

    def on_event(self, event: Event) -> None:
        self.events.append(event)
        self.threads.add(threading.get_ident())


async def test_a_sync_listener_gets_every_event_in_seq_order_on_one_thread() -> None:
    collect = Collect()
    llm = FunctionModel(lambda messages, tools: "done")
    ensemble = Ensemble(
        tasks=[Task(f"Task {i}") for i in range(30)],
        llm=llm,
        workflow=Workflow.PARALLEL,
        listeners=[collect],
    )
    output = await ensemble.arun()
    seqs = [event.seq for event in collect.events]
    assert seqs == list(range(1, len(seqs) + 1))  # all of them, in order, before arun returned
    assert collect.events[-1].type == "ensemble_completed"
    assert len(collect.threads) == 1
    assert threading.get_ident() not in collect.threads
    assert len(output.task_outputs) == 30


async def test_a_blocked_sync_listener_does_not_block_the_run() -> None:
    release = threading.Event()
    seen: list[bool] = []

    class Blocking:
        def on_task_start(self, event: Event) -> None:
            if not seen:
                seen.append(release.wait(TIMEOUT))  # until the model is called

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        release.set()  # only reached while the listener still waits, if the loop is free
        return "done"

    ensemble = Ensemble(tasks=[Task("Only")], llm=FunctionModel(reply), listeners=[Blocking()])
    await asyncio.wait_for(ensemble.arun(), TIMEOUT)
    assert seen == [True]


async def _offer(lane: SyncLane, handlers: Any, event: Any) -> None:
    """What the run does with an event for its sync listeners: queue it, then wait for room
    if the lane is full."""
    if lane.put(handlers, event):
        await lane.room()


async def test_a_full_lane_holds_the_run_back_until_the_listener_catches_up() -> None:
    loop = asyncio.get_running_loop()
    release, entered = threading.Event(), asyncio.Event()
    handled: list[Any] = []

    class Blocking:
        def call_sync(self, event: Any, _: asyncio.AbstractEventLoop) -> None:
            loop.call_soon_threadsafe(entered.set)
            release.wait(TIMEOUT)
            handled.append(event)

    lane, handlers = SyncLane(max_pending=2), (Blocking(),)
    await _offer(lane, handlers, 1)
    await _offer(lane, handlers, 2)
    await entered.wait()  # the worker is stuck in the first batch
    third = asyncio.create_task(_offer(lane, handlers, 3))
    await asyncio.sleep(0)  # let it run up to its wait
    assert not third.done()  # two events pending: the third waits for room
    release.set()
    await asyncio.wait_for(third, TIMEOUT)
    await lane.close()
    assert handled == [1, 2, 3]


async def test_a_full_batch_reaches_the_worker_within_one_turn_of_the_loop() -> None:
    # a wide fan-out emits thousands of events in one turn: the lane must not hold them all
    reached = threading.Event()
    handled: list[Any] = []

    class Counting:
        def call_sync(self, event: Any, _: asyncio.AbstractEventLoop) -> None:
            handled.append(event)
            if len(handled) == BATCH_SIZE:
                reached.set()

    lane, handlers = SyncLane(), (Counting(),)
    for number in range(BATCH_SIZE):  # no await: all in one turn of the loop
        assert not lane.put(handlers, number)
    assert reached.wait(TIMEOUT)  # handed over without the loop turning
    await lane.close()
    assert handled == list(range(BATCH_SIZE))


async def test_a_failing_sync_listener_is_logged_once_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def __init__(self) -> None:
            self.calls = 0

        def on_task_complete(self, event: Event) -> None:
            self.calls += 1
            raise RuntimeError("listener bug")

    broken = Broken()
    ensemble = Ensemble(
        tasks=[Task("One"), Task("Two")],
        llm=FunctionModel(lambda messages, tools: "done"),
        listeners=[broken],
    )
    output = await ensemble.arun()
    assert [o.raw for o in output.task_outputs] == ["done", "done"]
    assert broken.calls == 2
    raised = [r for r in caplog.records if "raised in on_task_complete" in r.getMessage()]
    counted = [r for r in caplog.records if "raised 2 times" in r.getMessage()]
    assert (len(raised), len(counted)) == (1, 1)


async def test_a_cancelled_run_returns_at_once_and_its_sync_listeners_still_get_every_event() -> (
    None
):
    loop = asyncio.get_running_loop()
    collect, ended = Collect(), asyncio.Event()
    started = asyncio.Event()

    class Ended:
        def on_ensemble_completed(self, event: Event) -> None:
            loop.call_soon_threadsafe(ended.set)

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        started.set()
        await asyncio.Event().wait()  # never answers
        return "never"

    ensemble = Ensemble(
        tasks=[Task("Stuck")], llm=FunctionModel(reply), listeners=[collect, Ended()]
    )
    run = asyncio.create_task(ensemble.arun())
    await asyncio.wait_for(started.wait(), TIMEOUT)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.wait_for(ended.wait(), TIMEOUT)  # handed over, handled on the lane
    assert [event.type for event in collect.events][-2:] == ["task_failed", "ensemble_completed"]


async def test_a_pool_of_one_thread_stays_free_for_sync_tools() -> None:
    from agentensemble import Agent, tool, tool_call

    @tool
    def lookup(key: str) -> str:
        """Look a key up (sync: on the run's pool)."""
        return "found"

    collect = Collect()
    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    ensemble = Ensemble(tasks=[Task("Find", agent=agent)], listeners=[collect], max_sync_threads=1)
    output = await asyncio.wait_for(ensemble.arun(), TIMEOUT)
    assert output.raw == "done"
    assert collect.events[-1].type == "ensemble_completed"


async def test_a_listener_raising_even_a_base_exception_leaves_the_lane_running() -> None:
    collect = Collect()

    class Raising:
        def on_task_start(self, event: Event) -> None:
            raise asyncio.CancelledError  # a BaseException, from user code

    ensemble = Ensemble(
        tasks=[Task("One"), Task("Two")],
        llm=ScriptedModel(["a", "b"]),
        listeners=[Raising(), collect],
    )
    output = await asyncio.wait_for(ensemble.arun(), TIMEOUT)
    assert [o.raw for o in output.task_outputs] == ["a", "b"]
    assert collect.events[-1].type == "ensemble_completed"


async def test_a_sync_listener_runs_in_the_context_of_the_task_that_emitted_the_event() -> None:
    from agentensemble._logging import current_log_context

    seen: list[tuple[str, str]] = []

    class Context:
        def on_task_complete(self, event: TaskCompleteEvent) -> None:
            seen.append((event.task_description, current_log_context().task_index))

    ensemble = Ensemble(
        tasks=[Task("One"), Task("Two")], llm=ScriptedModel(["a", "b"]), listeners=[Context()]
    )
    await ensemble.arun()
    assert seen == [("One", "1/2"), ("Two", "2/2")]


async def test_a_stuck_sync_listener_does_not_hold_a_cancelled_or_timed_out_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentensemble._run as run_module

    release, answered = threading.Event(), asyncio.Event()
    monkeypatch.setattr(run_module, "_DRAIN_GRACE", 0.0)

    class Stuck:
        def on_task_start(self, event: Event) -> None:
            release.wait(TIMEOUT)

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        answered.set()
        return "done"

    try:
        timed = Ensemble(tasks=[Task("T")], llm=FunctionModel(reply), listeners=[Stuck()])
        output = await asyncio.wait_for(timed.arun(options=RunOptions(timeout=0.05)), TIMEOUT)
        assert output.raw == "done"  # returned at its deadline, the listener still stuck

        cancelled = asyncio.create_task(
            Ensemble(tasks=[Task("C")], llm=FunctionModel(reply), listeners=[Stuck()]).arun()
        )
        answered.clear()
        await asyncio.wait_for(answered.wait(), TIMEOUT)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(cancelled, TIMEOUT)
    finally:
        release.set()


async def test_an_awaitable_a_sync_listener_returns_is_finished_on_the_runs_loop() -> None:
    finished_on: list[int] = []

    async def note(event: TaskCompleteEvent) -> None:
        finished_on.append(threading.get_ident())

    class Deferring:
        def on_task_complete(self, event: TaskCompleteEvent) -> Any:
            return note(event)

    ensemble = Ensemble(
        tasks=[Task("One"), Task("Two")], llm=ScriptedModel(["a", "b"]), listeners=[Deferring()]
    )
    await ensemble.arun()
    assert finished_on == [threading.get_ident()] * 2  # both, before arun returned
