"""The PARALLEL DAG scheduler (BEHAVIOUR §9.2). Ordering is controlled with events, never sleeps."""

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import pytest

from agentensemble import (
    Ensemble,
    EnsembleListener,
    FunctionModel,
    ParallelErrorStrategy,
    ParallelExecutionError,
    Task,
    TaskExecutionError,
    Workflow,
)
from agentensemble.models import Message, ToolSpec, UserMessage
from agentensemble.observability import EnsembleCompletedEvent, TaskCompleteEvent, TaskStartEvent

TIMEOUT = 5  # seconds; only reached when the scheduler deadlocks


def task_name(messages: Sequence[Message]) -> str:
    prompt = next(m.text for m in messages if isinstance(m, UserMessage))
    return prompt.split("## Task\n", 1)[1].split("\n", 1)[0]


class Gates:
    """A model whose answer for each task waits until the test opens that task's gate."""

    def __init__(self, fail: AbstractSet[str] = frozenset()) -> None:
        self.started: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.gate: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.calls: list[str] = []
        self.prompts: dict[str, str] = {}
        self.fail = fail

    async def reply(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        name = task_name(messages)
        self.calls.append(name)
        prompt = messages[1]
        assert isinstance(prompt, UserMessage)
        self.prompts[name] = prompt.text
        self.started[name].set()
        await asyncio.wait_for(self.gate[name].wait(), TIMEOUT)
        if name in self.fail:
            raise RuntimeError(f"{name} broke")
        return f"{name} done"

    def open(self, *names: str) -> None:
        for name in names:
            self.gate[name].set()

    def model(self) -> FunctionModel:
        return FunctionModel(self.reply)


def completion_recorder() -> tuple[
    dict[str, asyncio.Event], Callable[[TaskCompleteEvent], Awaitable[None]]
]:
    done: dict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def on_complete(event: TaskCompleteEvent) -> None:  # on the loop: asyncio.Event
        done[event.task_description].set()

    return done, on_complete


async def test_outputs_come_back_in_completion_order() -> None:
    gates = Gates()
    done, on_complete = completion_recorder()
    a, b, c = Task("A"), Task("B"), Task("C")
    ensemble = Ensemble(
        tasks=[a, b, c], llm=gates.model(), workflow=Workflow.PARALLEL, on_task_complete=on_complete
    )
    run = asyncio.create_task(ensemble.arun())
    for name in "ABC":
        await asyncio.wait_for(gates.started[name].wait(), TIMEOUT)  # all three run at once
    for name in "CAB":
        gates.open(name)
        await asyncio.wait_for(done[name].wait(), TIMEOUT)
    output = await run
    assert [o.raw for o in output.task_outputs] == ["C done", "A done", "B done"]
    assert output.raw == "C done"  # the last task declared, though it finished first (DESIGN 9)
    output_a = output.output_for(a)
    assert output_a is not None
    assert output_a.raw == "A done"


async def test_a_task_starts_when_its_last_dependency_finishes_not_when_all_do() -> None:
    gates = Gates()
    done, on_complete = completion_recorder()
    a, slow = Task("A"), Task("Slow")
    b = Task("B", context=[a])
    ensemble = Ensemble(tasks=[a, slow, b], llm=gates.model(), on_task_complete=on_complete)
    run = asyncio.create_task(ensemble.arun())  # PARALLEL is inferred
    gates.open("A")
    await asyncio.wait_for(gates.started["B"].wait(), TIMEOUT)  # while Slow still runs
    assert not gates.gate["Slow"].is_set()
    gates.open("B")
    await asyncio.wait_for(done["B"].wait(), TIMEOUT)
    gates.open("Slow")
    output = await run
    assert [o.raw for o in output.task_outputs] == ["A done", "B done", "Slow done"]


async def test_context_reaches_a_task_in_declared_order() -> None:
    gates = Gates()
    first, second = Task("First"), Task("Second")
    join = Task("Join", context=[second, first])
    run = asyncio.create_task(Ensemble(tasks=[join, first, second], llm=gates.model()).arun())
    gates.open("Second")
    await asyncio.wait_for(gates.started["Second"].wait(), TIMEOUT)
    gates.open("First", "Join")
    await run
    prompt = gates.prompts["Join"]
    assert prompt.index("### Agent: Second\nSecond done") < prompt.index(
        "### Agent: First\nFirst done"
    )


async def test_fail_fast_lets_running_tasks_finish_and_skips_everything_else() -> None:
    gates = Gates(fail={"A"})
    a_failed = asyncio.Event()

    async def on_failed(event: object) -> None:  # on the loop: it sets an asyncio.Event
        a_failed.set()

    a, running = Task("A"), Task("Running")
    b = Task("B", context=[a])
    c = Task("C", context=[b])
    later = Task("Later", context=[running])
    ensemble = Ensemble(
        tasks=[a, b, c, running, later],
        llm=gates.model(),
        on_task_failed=on_failed,
    )
    run = asyncio.create_task(ensemble.arun())
    await asyncio.wait_for(gates.started["Running"].wait(), TIMEOUT)
    gates.open("A")
    await asyncio.wait_for(a_failed.wait(), TIMEOUT)  # A has failed while Running runs
    gates.open("Running")
    with pytest.raises(TaskExecutionError) as caught:
        await run
    assert str(caught.value) == "Task 'A' failed: Agent 'Agent' failed: A broke"
    assert str(caught.value.__cause__) == "Agent 'Agent' failed: A broke"
    assert [o.raw for o in caught.value.completed_outputs] == ["Running done"]
    assert sorted(gates.calls) == ["A", "Running"]  # B, C and Later never ran


async def test_continue_on_error_skips_dependents_transitively_and_finishes_the_rest() -> None:
    gates = Gates(fail={"A"})
    a, other = Task("A"), Task("Other")
    b = Task("B", context=[a])
    c = Task("C", context=[b])
    d = Task("D", context=[other])
    mixed = Task("Mixed", context=[other, a])
    ensemble = Ensemble(
        tasks=[a, b, c, other, d, mixed],
        llm=gates.model(),
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    gates.open("A", "Other", "D", "B", "C", "Mixed")
    with pytest.raises(ParallelExecutionError) as caught:
        await ensemble.arun()
    error = caught.value
    assert str(error) == "1 of 6 tasks failed: 'A': Agent 'Agent' failed: A broke"
    assert (error.failed_count, error.completed_count) == (1, 2)
    assert sorted(o.raw for o in error.completed_outputs) == ["D done", "Other done"]
    assert list(error.failed_task_causes) == ["A"]
    assert str(error.failed_task_causes["A"]) == "Agent 'Agent' failed: A broke"
    assert sorted(gates.calls) == ["A", "D", "Other"]  # B, C, Mixed skipped, never ran


async def test_continue_on_error_reports_every_failure() -> None:
    gates = Gates(fail={"X", "Y"})
    gates.open("X", "Y", "Z")
    ensemble = Ensemble(
        tasks=[Task("X"), Task("Y"), Task("Z")],
        llm=gates.model(),
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    with pytest.raises(ParallelExecutionError) as caught:
        await ensemble.arun()
    assert str(caught.value) == (
        "2 of 3 tasks failed: 'X': Agent 'Agent' failed: X broke; "
        "'Y': Agent 'Agent' failed: Y broke"
    )
    assert sorted(caught.value.failed_task_causes) == ["X", "Y"]


async def test_max_concurrency_bounds_tasks_in_flight_without_deadlock() -> None:
    in_flight = peak = 0

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(5):
            await asyncio.sleep(0)  # yield so that any other admitted task can start
        in_flight -= 1
        return "ok"

    tasks = [Task(f"T{i}") for i in range(12)]
    tasks.append(Task("Join", context=tasks[:6]))
    output = await Ensemble(tasks=tasks, llm=FunctionModel(reply), max_concurrency=3).arun()
    assert len(output.task_outputs) == 13
    assert peak == 3


async def test_fail_fast_skips_tasks_still_waiting_for_a_concurrency_slot() -> None:
    gates = Gates(fail={"T0"})
    tasks = [Task(f"T{i}") for i in range(4)]
    ensemble = Ensemble(
        tasks=tasks, llm=gates.model(), workflow=Workflow.PARALLEL, max_concurrency=1
    )
    gates.open("T0", "T1", "T2", "T3")
    with pytest.raises(TaskExecutionError):
        await ensemble.arun()
    assert gates.calls == ["T0"]


def test_listeners_may_be_called_from_many_tasks_at_once() -> None:
    class Counting(EnsembleListener):
        """Sync methods run in worker threads: guard shared state with a lock."""

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.events: list[str] = []

        def on_task_start(self, event: TaskStartEvent) -> None:
            with self.lock:
                self.events.append(f"start {event.task_index}")

        def on_task_complete(self, event: TaskCompleteEvent) -> None:
            with self.lock:
                self.events.append(f"done {event.task_index}")

    listener = Counting()
    tasks = [Task(f"Task {i}") for i in range(20)]
    Ensemble(
        tasks=tasks,
        llm=FunctionModel(lambda m, t: "ok"),
        workflow=Workflow.PARALLEL,
        listeners=[listener],
    ).run()
    assert sorted(listener.events) == sorted(
        [f"start {i}" for i in range(1, 21)] + [f"done {i}" for i in range(1, 21)]
    )


def test_workflow_inference(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentensemble")
    first = Task("First")
    Ensemble(
        tasks=[Task("Then", context=[first]), first],  # a forward reference is fine
        llm=FunctionModel(lambda m, t: "ok"),
    ).run()
    assert "Workflow inferred: PARALLEL" in caplog.text
    caplog.clear()
    Ensemble(tasks=[Task("One"), Task("Two")], llm=FunctionModel(lambda m, t: "ok")).run()
    assert "Workflow inferred: SEQUENTIAL" in caplog.text


def test_an_inferred_sequential_run_still_rejects_context_outside_the_ensemble() -> None:
    from agentensemble import ValidationError

    outside = Task("Outside")
    with pytest.raises(ValidationError, match="which is not in the ensemble's task list"):
        Ensemble(
            tasks=[Task("Alone", context=[outside])], llm=FunctionModel(lambda m, t: "ok")
        ).run()


def test_a_context_task_outside_the_ensemble_is_rejected_under_parallel_too() -> None:
    from agentensemble import ValidationError

    outside = Task("Outside")
    llm = FunctionModel(lambda m, t: "ok")
    ensemble = Ensemble(
        tasks=[Task("Inside", context=[outside])], llm=llm, workflow=Workflow.PARALLEL
    )
    with pytest.raises(ValidationError, match="references context task 'Outside' which is not"):
        ensemble.run()
    assert llm.requests == []  # before any model call (DESIGN 9: never silently dropped)


def test_parallel_validation() -> None:
    from agentensemble import ValidationError

    with pytest.raises(
        ValidationError, match="Ensemble max_concurrency must be > 0 when set, got: 0"
    ):
        Ensemble(max_concurrency=0)
    ensemble = Ensemble(
        tasks=[Task("x")],
        llm=FunctionModel(lambda m, t: "ok"),
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=None,
    )
    with pytest.raises(
        ValidationError,
        match=r"Ensemble parallel_error_strategy must not be null for PARALLEL workflow",
    ):
        ensemble.run()


async def test_cancelling_a_run_cancels_every_running_task_and_closes_the_run() -> None:
    started = [asyncio.Event() for _ in range(3)]
    cancelled: list[int] = []
    completions: list[EnsembleCompletedEvent] = []

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        index = int(task_name(messages)[-1])
        started[index].set()
        try:
            await asyncio.wait_for(asyncio.Event().wait(), TIMEOUT)
        except asyncio.CancelledError:
            cancelled.append(index)
            raise
        return "never"

    class Closing(EnsembleListener):
        async def on_ensemble_completed(self, event: EnsembleCompletedEvent) -> None:
            completions.append(event)

    ensemble = Ensemble(
        tasks=[Task(f"T{i}") for i in range(3)],
        llm=FunctionModel(reply),
        workflow=Workflow.PARALLEL,
        listeners=[Closing()],
    )
    run = asyncio.create_task(ensemble.arun())
    for event in started:
        await asyncio.wait_for(event.wait(), TIMEOUT)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert sorted(cancelled) == [0, 1, 2]
    assert [(c.exit_reason, c.error_type) for c in completions] == [("ERROR", "CancelledError")]


async def test_a_task_cancelled_on_its_own_fails_and_its_dependents_never_start() -> None:
    # not the run's cancellation: the task's own (a tool cancelling the task it runs in)
    calls: list[str] = []
    other_done = asyncio.Event()

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        name = task_name(messages)
        calls.append(name)
        if name == "Doomed":
            await asyncio.wait_for(other_done.wait(), TIMEOUT)
            current = asyncio.current_task()
            assert current is not None
            current.cancel()
            await asyncio.sleep(0)  # where the cancellation lands
        return f"{name} done"

    class Watch(EnsembleListener):
        async def on_task_complete(self, event: TaskCompleteEvent) -> None:
            if event.task_description == "Other":
                other_done.set()

    doomed = Task("Doomed")
    ensemble = Ensemble(
        tasks=[doomed, Task("After", context=[doomed]), Task("Other")],
        llm=FunctionModel(reply),
        workflow=Workflow.PARALLEL,
        listeners=[Watch()],
    )
    with pytest.raises(TaskExecutionError, match=r"Doomed.*cancelled, not the run") as raised:
        await asyncio.wait_for(ensemble.arun(), TIMEOUT)
    assert sorted(calls) == ["Doomed", "Other"]
    assert [output.raw for output in raised.value.completed_outputs] == ["Other done"]


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (RuntimeError("A broke"), "A broke"),
        (asyncio.CancelledError(), "cancelled, not the run"),  # its own, not the run's
    ],
    ids=["failure", "own-cancellation"],
)
async def test_under_fail_fast_a_task_ending_before_any_wait_keeps_its_siblings_from_starting(
    failure: BaseException, message: str
) -> None:
    calls: list[str] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        name = task_name(messages)
        calls.append(name)
        if name == "A":
            raise failure
        return f"{name} done"

    ensemble = Ensemble(
        tasks=[Task("A"), Task("B"), Task("C")],
        llm=FunctionModel(reply),
        workflow=Workflow.PARALLEL,
    )
    with pytest.raises(TaskExecutionError, match=message) as raised:
        await ensemble.arun()
    assert calls == ["A"]  # B and C were created with A, and skipped before their first step
    assert list(raised.value.completed_outputs) == []


async def test_an_error_in_the_schedulers_own_bookkeeping_ends_the_run_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentensemble.execution._context import RunOutputs
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.execution._task_runner import context_outputs
    from agentensemble.outputs import TaskOutput

    def broken_for_c(
        planned: PlannedTask, outputs: RunOutputs, *, strict: bool
    ) -> tuple[TaskOutput[Any], ...]:
        if planned.description == "C":
            raise LookupError("bookkeeping broke")
        return context_outputs(planned, outputs, strict=strict)

    # the DAG's own reading of a task's context: a fault in the scheduler, not in a task
    monkeypatch.setattr("agentensemble.workflows._parallel.context_outputs", broken_for_c)
    a = Task("A")
    ensemble = Ensemble(
        tasks=[a, Task("B"), Task("C", context=[a])],
        llm=FunctionModel(lambda messages, tools: "done"),
        workflow=Workflow.PARALLEL,
    )
    with pytest.raises(LookupError, match="bookkeeping broke"):
        await asyncio.wait_for(ensemble.arun(), TIMEOUT)
