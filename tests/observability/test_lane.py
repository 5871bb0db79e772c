"""Sync listeners on the run's listener lane: one worker thread per run, event order kept,
the loop never blocked, bounded, and every event handled before the run returns."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble import Ensemble, FunctionModel, Task, Workflow
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import Event
from agentensemble.observability._lane import SyncLane

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
    await lane.offer(handlers, 1)
    await lane.offer(handlers, 2)
    await entered.wait()  # the worker is stuck in the first batch
    third = asyncio.create_task(lane.offer(handlers, 3))
    await asyncio.sleep(0)  # let it run up to its wait
    assert not third.done()  # two events pending: the third waits for room
    release.set()
    await asyncio.wait_for(third, TIMEOUT)
    await lane.close()
    assert handled == [1, 2, 3]


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


async def test_a_cancelled_run_still_hands_every_event_to_its_sync_listeners() -> None:
    collect = Collect()
    started = asyncio.Event()

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        started.set()
        await asyncio.Event().wait()  # never answers
        return "never"

    ensemble = Ensemble(tasks=[Task("Stuck")], llm=FunctionModel(reply), listeners=[collect])
    run = asyncio.create_task(ensemble.arun())
    await asyncio.wait_for(started.wait(), TIMEOUT)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert [event.type for event in collect.events][-2:] == ["task_failed", "ensemble_completed"]
