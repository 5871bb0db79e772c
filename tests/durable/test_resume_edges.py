"""Durable runs where things go wrong at the edges: two tasks at their gates when the run
pauses, a second resume of a running run, strict output types, changed plans, a store that
fails, a cancel, and the bookkeeping a resumed run keeps (its events' seq, its ttl)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from agentensemble import (
    Agent,
    CheckpointError,
    CheckpointStore,
    Ensemble,
    ExitReason,
    FunctionModel,
    OnTimeoutAction,
    OutputParsingError,
    Review,
    ReviewDecision,
    ReviewHandler,
    RunOptions,
    Task,
    TaskExecutionError,
    ValidationError,
    Workflow,
)
from agentensemble.checkpoints import InMemoryCheckpointStore
from agentensemble.models import Message, ToolSpec, UserMessage
from agentensemble.tools import HumanInputTool


def _task_of(messages: Sequence[Message]) -> str:
    user = next(m for m in messages if isinstance(m, UserMessage))
    lines = user.text.splitlines()
    return lines[lines.index("## Task") + 1]


class Counting:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.model = FunctionModel(self.answer)

    def answer(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        self.asked.append(_task_of(messages))
        return f"{self.asked[-1]}: done"


def test_a_task_waiting_at_its_gate_when_the_run_pauses_is_not_kept_unreviewed() -> None:
    store = CheckpointStore.in_memory()
    model = Counting()

    def make() -> Ensemble:
        writer = Agent("Writer", "Write", llm=model.model)
        gated = [
            Task(f"Write part {n}", "A part", agent=writer, review=Review.required())
            for n in (1, 2)
        ]
        return Ensemble(
            tasks=gated,
            workflow=Workflow.PARALLEL,
            checkpoint=store,
            review_handler=ReviewHandler.pause(),
        )

    paused = make().run()
    assert paused.exit_reason is ExitReason.PAUSED
    assert paused.task_outputs == ()  # the other part was not reviewed: not kept either
    assert store.runs()[0].completed_tasks == 0
    again = make().run(resume=paused.run_id, decision=ReviewDecision.Continue())
    assert again.exit_reason is ExitReason.PAUSED  # the second part's own review
    done = make().run(resume=paused.run_id, decision=ReviewDecision.Continue())
    assert done.exit_reason is ExitReason.COMPLETED
    assert sorted(o.raw for o in done.task_outputs) == ["Write part 1: done", "Write part 2: done"]


async def test_a_run_id_is_run_by_one_caller_at_a_time() -> None:
    store = CheckpointStore.in_memory()
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        entered.set()
        await release.wait()
        return "done"

    ensemble = Ensemble(
        tasks=[Task("Write the report", "A report", llm=FunctionModel(slow))], checkpoint=store
    )
    first = asyncio.create_task(ensemble.arun(options=RunOptions(run_id="once")))
    await entered.wait()
    with pytest.raises(ValidationError, match="run once is running"):
        await ensemble.arun(resume="once")
    with pytest.raises(ValidationError, match="run once is running"):
        await ensemble.arun(options=RunOptions(run_id="once"))
    release.set()
    assert (await first).raw == "done"
    assert (await ensemble.arun(resume="once")).raw == "done"  # ended: it may go on


class Dated(BaseModel):
    model_config = ConfigDict(strict=True)
    when: datetime
    tags: tuple[str, ...]


def test_a_strict_output_type_is_read_back_from_its_json() -> None:
    store = CheckpointStore.in_memory()
    broken = {"on": True}

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if "Announce" in _task_of(messages):
            if broken["on"]:
                raise RuntimeError("down")
            return "announced"
        return '{"when": "2026-11-26T10:00:00", "tags": ["a", "b"]}'

    llm = FunctionModel(answer)
    date = Task("Pick the date", "A date", llm=llm, output_type=Dated)
    tasks = [date, Task("Announce it", "Text", llm=llm, context=[date])]
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=tasks, checkpoint=store).run(options=RunOptions(run_id="s"))
    broken["on"] = False
    output = Ensemble(tasks=tasks, checkpoint=store).run(resume="s")
    assert output.output_for(date).parsed_output == Dated(  # type: ignore[union-attr]
        when=datetime(2026, 11, 26, 10), tags=("a", "b")
    )


class Other(BaseModel):
    score: int


def test_a_changed_output_type_is_named_before_any_model_call() -> None:
    store = CheckpointStore.in_memory()
    model = Counting()
    with pytest.raises(OutputParsingError):
        Ensemble(
            tasks=[
                Task(
                    "Score it", "A score", llm=FunctionModel(lambda m, t: "nope"), output_type=Dated
                )
            ],
            checkpoint=store,
        ).run(options=RunOptions(run_id="t"))
    changed = Ensemble(
        tasks=[Task("Score it", "A score", llm=model.model, output_type=Other)], checkpoint=store
    )
    with pytest.raises(ValidationError, match=r"task 1 changed.*output type was '.*Dated'"):
        changed.run(resume="t")
    assert model.asked == []


def test_a_paused_task_whose_gate_was_removed_runs_again() -> None:
    store = CheckpointStore.in_memory()
    model = Counting()
    gated = Task("Write it", "Text", llm=model.model, review=Review.required())
    paused = Ensemble(tasks=[gated], checkpoint=store, review_handler=ReviewHandler.pause()).run()
    plain = Task("Write it", "Text", llm=model.model)
    done = Ensemble(tasks=[plain], checkpoint=store).run(
        resume=paused.run_id, decision=ReviewDecision.Continue()
    )
    assert done.raw == "Write it: done"
    assert model.asked == ["Write it", "Write it"]


def test_listeners_hearing_the_end_see_the_checkpoint_already_ended() -> None:
    store = CheckpointStore.in_memory()
    seen: list[tuple[str, bool]] = []

    class Watcher:
        def on_ensemble_completed(self, event: Any) -> None:
            [run] = store.runs()
            saved = asyncio.run(store.load(run.run_id))
            seen.append((run.status, bool(saved and saved.header.get("pending"))))

    Ensemble(
        tasks=[Task("Write it", "Text", llm=Counting().model, review=Review.required())],
        checkpoint=store,
        review_handler=ReviewHandler.pause(),
        listeners=[Watcher()],
    ).run()
    assert seen == [("PAUSED", True)]


async def test_a_running_run_outlives_the_ttl_of_the_store() -> None:
    store = CheckpointStore.in_memory(ttl=60)
    now = [1000.0]
    store._clock = lambda: now[0]
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        entered.set()
        await release.wait()
        return "done"

    long = Ensemble(tasks=[Task("Take long", "X", llm=FunctionModel(slow))], checkpoint=store)
    running = asyncio.create_task(long.arun(options=RunOptions(run_id="long")))
    await entered.wait()
    now[0] += 3600
    quick = Ensemble(tasks=[Task("Be quick", "X", llm=Counting().model)], checkpoint=store)
    await quick.arun(options=RunOptions(run_id="quick"))
    assert {r.run_id for r in await store.alist()} == {"long", "quick"}
    release.set()
    await running
    assert [r.status for r in await store.alist() if r.run_id == "long"] == ["COMPLETED"]


def test_pausing_tools_and_handlers_without_a_checkpoint_are_refused_up_front() -> None:
    model = Counting()
    asking = Agent(
        "Designer", "Design", llm=model.model, tools=[HumanInputTool(on_timeout="pause")]
    )
    with pytest.raises(ValidationError, match=r"HumanInputTool\(on_timeout=PAUSE\).*checkpoint"):
        Ensemble(tasks=[Task("Pick a colour", "A colour", agent=asking)]).run()

    class PageLike(ReviewHandler):
        default_timeout = 60
        default_on_timeout = OnTimeoutAction.PAUSE

        def review(self, request: Any) -> Any:
            return ReviewDecision.Continue()

    with pytest.raises(ValidationError, match=r"on_timeout=PAUSE.*checkpoint"):
        Ensemble(
            tasks=[Task("Write it", "Text", llm=model.model, review=Review.required())],
            review_handler=PageLike(),
        ).run()
    assert model.asked == []


def test_a_resumed_runs_events_go_on_after_the_recorded_ones() -> None:
    store = CheckpointStore.in_memory()
    broken = {"on": True}
    seqs: list[list[int]] = [[], []]

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if broken["on"] and "second" in _task_of(messages):
            raise RuntimeError("down")
        return "ok"

    llm = FunctionModel(answer)
    first = Task("Do the first", "X", llm=llm)
    tasks = [first, Task("Do the second", "X", llm=llm, context=[first])]

    def listener(into: list[int]) -> Any:
        class Seqs:
            def on_event(self, event: Any) -> None:
                into.append(event.seq)

        return Seqs()

    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=tasks, checkpoint=store).run(
            options=RunOptions(run_id="q", listeners=[listener(seqs[0])])
        )
    broken["on"] = False
    Ensemble(tasks=tasks, checkpoint=store).run(
        resume="q", options=RunOptions(listeners=[listener(seqs[1])])
    )
    assert seqs[1][0] == max(seqs[0]) + 1
    assert seqs[1] == list(range(seqs[1][0], seqs[1][0] + len(seqs[1])))


class FullDisk(InMemoryCheckpointStore):
    async def record(self, run_id: str, key: str, event: Any) -> None:
        raise OSError(28, "No space left on device")


def test_a_store_that_fails_stops_the_run_with_a_checkpoint_error() -> None:
    completed: list[str] = []

    class Listener:
        def on_task_complete(self, event: Any) -> None:
            completed.append(event.task_description)

    with pytest.raises(TaskExecutionError) as failed:
        Ensemble(
            tasks=[Task("Write it", "Text", llm=Counting().model)],
            checkpoint=FullDisk(),
            listeners=[Listener()],
        ).run()
    assert isinstance(failed.value.__cause__, CheckpointError)
    assert "could not record task 'Write it'" in str(failed.value)
    assert "No space left on device" in str(failed.value)
    assert completed == ["Write it"]  # listeners heard it completed


async def test_a_cancelled_run_says_how_to_resume_it() -> None:
    store = CheckpointStore.in_memory()
    entered = asyncio.Event()

    async def stuck(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        entered.set()
        await asyncio.Event().wait()
        return "never"

    run = asyncio.create_task(
        Ensemble(tasks=[Task("Wait", "X", llm=FunctionModel(stuck))], checkpoint=store).arun(
            options=RunOptions(run_id="c")
        )
    )
    await entered.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError) as cancelled:
        await run
    assert "resume='c'" in "\n".join(getattr(cancelled.value, "__notes__", []))
    assert [r.status for r in await store.alist()] == ["CANCELLED"]
