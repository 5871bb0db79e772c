"""Events on the wire (`serialize_event`, BEHAVIOUR 17.2) and listeners behind a queue."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from agentensemble import (
    Agent,
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    Ensemble,
    EnsembleListener,
    FunctionModel,
    GuardrailCheckedEvent,
    ParallelErrorStrategy,
    QueuedListener,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import (
    Event,
    GraphStateCompletedEvent,
    LoopIterationCompletedEvent,
    MemoryOperationEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    RunWarningEvent,
    parse_event,
    serialize_event,
)
from agentensemble.observability._events import EVENT_TYPES


class Everything(EnsembleListener):
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.events.append(event)

    def on_token(self, event: Event) -> None:
        """Asking for tokens by name turns streaming on; `on_event` then sees them too."""


@tool
def lookup(key: str) -> dict[str, int]:
    """Look a key up."""
    return {"length": len(key)}


def events_of_a_real_run() -> list[Event]:
    recorder = Everything()
    llm = ScriptedModel([tool_call("lookup", key="abc"), "The value is 3."])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup], background="Careful.")

    def broken(context: object) -> str:
        raise RuntimeError("disk full")

    ensemble = Ensemble(
        tasks=[Task("Find the {thing}", agent=agent), Task("Break", handler=broken)],
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
        listeners=[recorder],
    )
    with pytest.raises(Exception, match="1 of 2 tasks failed"):
        ensemble.run(inputs={"thing": "value"})
    return recorder.events


def delegation_events() -> list[Event]:
    common: dict[str, Any] = {
        "delegation_id": "d1",
        "delegating_agent_role": "Manager",
        "worker_role": "Writer",
        "ensemble_id": "run",
        "task_id": "t1",
    }
    return [
        DelegationStartedEvent(
            task_description="Write", delegation_depth=1, scope={"topic": "bees"}, **common
        ),
        DelegationCompletedEvent(
            raw_output="done",
            parsed_output={"words": [1, 2]},
            duration=timedelta(seconds=1.5),
            **common,
        ),
        DelegationFailedEvent(
            failure_reason="refused",
            error_type="ValueError",
            errors=("refused",),
            duration=timedelta(0),
            **common,
        ),
    ]


def review_events() -> list[Event]:
    common: dict[str, Any] = {"review_id": "r1", "ensemble_id": "run", "task_id": "t1"}
    return [
        ReviewRequestedEvent(
            task_description="Write",
            task_output=None,
            timing="BEFORE_EXECUTION",
            timeout=timedelta(minutes=5),
            on_timeout="EXIT_EARLY",
            **common,
        ),
        ReviewDecidedEvent(
            decision="EDIT", revised_output="better", duration=timedelta(seconds=2), **common
        ),
        ReviewTimedOutEvent(action="CONTINUE", duration=timedelta(minutes=5), **common),
    ]


def memory_events() -> list[Event]:
    return [
        MemoryOperationEvent(
            operation="retrieve",
            scope="notes",
            entry_count=2,
            duration=timedelta(milliseconds=3),
            ensemble_id="run",
            task_id="t1",
        )
    ]


def guardrail_events() -> list[Event]:
    return [
        GuardrailCheckedEvent(
            guardrail_type="OUTPUT",
            guardrail="no_swearing",
            passed=False,
            reason="it swore",
            duration=timedelta(microseconds=250),
            ensemble_id="run",
            task_id="t1",
        ),
        LoopIterationCompletedEvent(
            loop_name="refine",
            iteration=2,
            max_iterations=5,
            outputs={"write": "Draft 2", "critique": "APPROVED"},
            ensemble_id="run",
            task_id="loop",
        ),
        RunWarningEvent(
            code="manager_delegated_nothing", message="nothing delegated", ensemble_id="run"
        ),
        GraphStateCompletedEvent(
            graph_name="support",
            state="classify",
            step=1,
            next_state="__END__",
            output="BILLING",
            ensemble_id="run",
            task_id="t1",
        ),
    ]


def test_every_event_type_serializes_to_json_and_back() -> None:
    events = [
        *events_of_a_real_run(),
        *delegation_events(),
        *review_events(),
        *memory_events(),
        *guardrail_events(),
    ]
    assert {type(event) for event in events} == set(EVENT_TYPES)  # every type is covered
    for event in events:
        message = serialize_event(event)
        assert json.loads(json.dumps(message)) == message
        assert all(key[0].islower() and "_" not in key for key in message), message
        assert parse_event(json.loads(json.dumps(message))) == event


def test_wire_types_and_fields_follow_the_dashboard_protocol() -> None:
    messages = [serialize_event(event) for event in events_of_a_real_run()]
    by_type = {message["type"]: message for message in messages}
    assert set(by_type) == {
        "ensemble_started",
        "task_started",
        "task_input",
        "llm_iteration_started",
        "llm_iteration_completed",
        "tool_called",
        "token",
        "task_completed",
        "task_failed",
        "ensemble_completed",
    }
    tool_called = by_type["tool_called"]
    assert tool_called["toolName"] == "lookup"
    assert tool_called["structuredResult"] == {"length": 3}
    assert tool_called["outcome"] == "SUCCESS"
    assert isinstance(tool_called["durationMs"], float)
    started = by_type["task_started"]
    assert started["taskDescription"] in {"Find the value", "Break"}
    datetime.fromisoformat(started["startedAt"])
    assert by_type["task_failed"]["reason"] == (
        "Deterministic task handler threw an exception: disk full"
    )
    assert by_type["task_input"]["agentBackground"] == "Careful."
    assert by_type["ensemble_completed"]["exitReason"] == "ERROR"
    run_ids = {message["ensembleId"] for message in messages}
    assert len(run_ids) == 1
    task_messages = [m for m in messages if "taskId" in m]
    assert {m["type"] for m in task_messages} >= {"task_started", "tool_called", "token"}
    assert all("parentTaskId" not in m for m in task_messages)  # None is left out


def test_a_long_prompt_travels_whole() -> None:
    recorder = Everything()
    Ensemble(tasks=[Task("x" * 9000)], llm=ScriptedModel(["ok"]), listeners=[recorder]).run()
    task_input = next(e for e in recorder.events if e.type == "task_input")
    message = serialize_event(task_input)
    assert message["assembledContext"] == task_input.user_prompt
    assert len(task_input.user_prompt) > 9000


async def test_a_queued_listener_never_holds_the_run_up() -> None:
    release = asyncio.Event()
    delivered: list[str] = []

    class Slow(EnsembleListener):
        async def on_event(self, event: Event) -> None:
            if event.type == "task_completed":
                await release.wait()  # stuck until the second task's model call
            delivered.append(event.type)

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        release.set()  # only reached if the first task's completion did not block the run
        return "ok"

    ensemble = Ensemble(
        tasks=[Task("One", handler=lambda context: "first"), Task("Two")],
        llm=FunctionModel(reply),
        listeners=[QueuedListener(Slow())],
    )
    async with asyncio.timeout(10):
        output = await ensemble.arun()
    assert output.raw == "ok"
    assert delivered[0] == "ensemble_started"
    assert delivered[-1] == "ensemble_completed"
    assert delivered.count("task_completed") == 2


async def test_a_full_queue_drops_and_reports(caplog: pytest.LogCaptureFixture) -> None:
    class Stuck(EnsembleListener):
        def __init__(self) -> None:
            self.release = asyncio.Event()

        async def on_task_start(self, event: Event) -> None:
            await self.release.wait()

    stuck = Stuck()
    tasks = [Task(f"T{i}", handler=lambda context: "x") for i in range(5)]
    with caplog.at_level(logging.WARNING, logger="agentensemble"):
        output = await Ensemble(
            tasks=tasks, listeners=[QueuedListener(stuck, max_pending=1, drain_timeout=0)]
        ).arun()
    assert len(output.task_outputs) == 5
    messages = [record.getMessage() for record in caplog.records]
    assert any("is full; dropping events" in m for m in messages)
    assert any(m.endswith("dropped 4 events during this run") for m in messages)


def test_queued_listener_settings_are_checked() -> None:
    with pytest.raises(ValidationError, match="QueuedListener max_pending must be > 0"):
        QueuedListener(Everything(), max_pending=0)
    with pytest.raises(ValidationError, match=r"QueuedListener listener\[0\] must be a listener"):
        QueuedListener(object())


def test_a_message_that_lost_a_field_is_refused_naming_it() -> None:
    event = next(e for e in events_of_a_real_run() if e.type == "task_completed")
    message = serialize_event(event)
    del message["seq"], message["completedAt"]
    with pytest.raises(
        ValidationError, match=r"^task_completed message is missing seq, completedAt"
    ):
        parse_event(message)


def test_bad_messages_and_non_events_are_clear_errors() -> None:
    with pytest.raises(ValidationError, match="event message type must be one of ensemble_started"):
        parse_event({"type": "nope"})
    with pytest.raises(ValidationError, match=r"event message type must be one of .*got: \[\]"):
        parse_event({"type": []})  # found by tests/test_fuzz.py: was a TypeError
    with pytest.raises(ValidationError, match=r"must be a mapping .*got: str"):
        parse_event("{}")  # type: ignore[arg-type]
    message = serialize_event(next(iter(events_of_a_real_run())))
    message["totalTasks"] = "many"
    with pytest.raises(ValidationError, match="ensemble_started message field totalTasks"):
        parse_event(message)
    with pytest.raises(TypeError, match="serialize_event takes an event, got: object"):
        serialize_event(object())  # type: ignore[arg-type]


def test_a_message_may_name_its_fields_as_python_does() -> None:
    event = next(iter(events_of_a_real_run()))
    python_names = {name: getattr(event, name) for name in event.__dataclass_fields__}
    assert parse_event(python_names) == event
