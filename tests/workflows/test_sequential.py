import logging
from collections.abc import Sequence
from typing import Protocol, cast

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleListener,
    ExitReason,
    FunctionModel,
    ScriptedModel,
    Task,
    TaskExecutionError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import Message, ModelRequest, ToolSpec, UserMessage
from agentensemble.observability import (
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
    ToolCallEvent,
)
from agentensemble.outputs import EnsembleOutput


class TaskLogRecord(Protocol):
    """A log record with the task context that agentensemble's logging adds."""

    task_index: str
    agent_role: str
    task_description: str

    def getMessage(self) -> str: ...


def user_prompt(request: ModelRequest) -> str:
    return next(m.text for m in request.messages if isinstance(m, UserMessage))


def test_tasks_run_in_order_and_context_arrives_in_declared_order() -> None:
    llm = ScriptedModel(["alpha", "beta", "gamma"])
    a, b = Task("Research A"), Task("Research B")
    c = Task("Write about both", context=[b, a])

    output = Ensemble(tasks=[a, b, c], llm=llm, workflow=Workflow.SEQUENTIAL).run()

    assert [o.raw for o in output.task_outputs] == ["alpha", "beta", "gamma"]
    assert output.raw == "gamma"
    assert output.exit_reason is ExitReason.COMPLETED
    assert output.is_complete
    prompt = user_prompt(llm.requests[2])
    assert prompt.index("### Researcher: Research B\nbeta") < prompt.index(
        "### Researcher: Research A\nalpha"
    )
    assert "## Context" not in user_prompt(llm.requests[1])


def test_output_for_uses_the_callers_task_objects() -> None:
    same_a, same_b = Task.of("Same text"), Task.of("Same text")
    output = Ensemble(tasks=[same_a, same_b], llm=ScriptedModel(["1", "2"])).run()
    output_a, output_b = output.output_for(same_a), output.output_for(same_b)
    assert output_a is not None
    assert output_b is not None
    assert output_a.raw == "1"
    assert output_b.raw == "2"
    assert output.output_for(Task.of("Same text")) is None
    last = output.last_completed_output
    assert last is not None
    assert last.raw == "2"
    assert output.completed_tasks == output.task_outputs


def test_failure_carries_every_completed_output_and_stops_the_run() -> None:
    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        prompt = messages[1]
        assert isinstance(prompt, UserMessage)
        if "Second" in prompt.text:
            raise ConnectionError("reset by peer")
        return "done"

    llm = FunctionModel(model)
    tasks = [Task("First"), Task("Second"), Task("Third")]
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=tasks, llm=llm).run()

    error = caught.value
    assert (error.task_description, error.agent_role) == ("Second", "Agent")
    assert [o.task_description for o in error.completed_outputs] == ["First"]
    assert len(llm.requests) == 2


def test_totals() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    llm = ScriptedModel([tool_call("ping"), tool_call("ping"), "one", "two"])
    agent = Agent("Pinger", "Ping", llm=llm, tools=[ping])
    output = Ensemble(tasks=[Task("A", agent=agent), Task("B", agent=agent)]).run()
    assert output.total_tool_calls == 2
    assert [o.tool_call_count for o in output.task_outputs] == [2, 0]
    assert output.metrics.total_llm_call_count == 4


class Recorder(EnsembleListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_task_start(self, event: TaskStartEvent) -> None:
        self.events.append(("start", f"{event.task_index}/{event.total_tasks} {event.agent_role}"))

    async def on_task_complete(self, event: TaskCompleteEvent) -> None:
        self.events.append(("complete", event.raw))

    def on_task_failed(self, event: TaskFailedEvent) -> None:
        self.events.append(("failed", event.error_type))

    def on_tool_call(self, event: ToolCallEvent) -> None:
        self.events.append(("tool", f"{event.tool_name} {event.outcome} {event.task_index}"))


def test_events_in_order_from_listeners_and_callbacks() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    recorder, started = Recorder(), []
    llm = ScriptedModel([tool_call("ping"), "one", "two"])
    agent = Agent("Pinger", "Ping", llm=llm, tools=[ping])
    Ensemble(
        tasks=[Task("A", agent=agent), Task("Write B")],
        llm=llm,
        listeners=[recorder],
        on_task_start=lambda e: started.append(e.task_description),
    ).run()

    assert recorder.events == [
        ("start", "1/2 Pinger"),
        ("tool", "ping SUCCESS 1"),
        ("complete", "one"),
        ("start", "2/2 Writer"),
        ("complete", "two"),
    ]
    assert started == ["A", "Write B"]


def test_failed_event_then_error() -> None:
    recorder = Recorder()
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=[Task("A")], llm=ScriptedModel([]), listeners=[recorder]).run()
    assert recorder.events == [("start", "1/1 Agent"), ("failed", "AgentExecutionError")]


def test_a_raising_listener_is_logged_and_the_run_continues(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Faulty(EnsembleListener):
        def on_task_start(self, event: TaskStartEvent) -> None:
            raise RuntimeError("listener bug")

    recorder = Recorder()
    output = Ensemble(
        tasks=[Task("A")], llm=ScriptedModel(["fine"]), listeners=[Faulty(), recorder]
    ).run()
    assert output.raw == "fine"
    assert recorder.events[0][0] == "start"
    assert "Listener Faulty raised in on_task_start; the run continues" in caplog.text


def test_log_records_carry_the_task_context(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentensemble")
    Ensemble(
        tasks=[Task("Research the market"), Task("Write a memo")], llm=ScriptedModel(["a", "b"])
    ).run()
    starts = [
        cast(TaskLogRecord, r) for r in caplog.records if "starting | Description" in r.getMessage()
    ]
    assert [(r.task_index, r.agent_role, r.task_description) for r in starts] == [
        ("1/2", "Researcher", "Research the market"),
        ("2/2", "Writer", "Write a memo"),
    ]
    assert starts[1].getMessage() == "Task 2/2 starting | Description: Write a memo | Agent: Writer"
    outside = [cast(TaskLogRecord, r) for r in caplog.records if "Ensemble run" in r.getMessage()]
    assert outside[0].task_index == ""


def test_an_ensemble_can_run_many_times_concurrently() -> None:
    import asyncio

    def second_line_of_the_prompt(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        prompt = messages[1]
        assert isinstance(prompt, UserMessage)
        return prompt.text.split("\n")[1]

    llm = FunctionModel(second_line_of_the_prompt)
    ensemble = Ensemble(tasks=[Task("Topic {n}")], llm=llm)

    async def main() -> list[EnsembleOutput]:
        return await asyncio.gather(*(ensemble.arun({"n": str(i)}) for i in range(20)))

    outputs = asyncio.run(main())
    assert [o.raw for o in outputs] == [f"Topic {i}" for i in range(20)]


def test_output_reprs_stay_short() -> None:
    output = Ensemble(tasks=[Task("A " * 100)], llm=ScriptedModel(["x" * 500])).run()
    assert repr(output) == f"EnsembleOutput(tasks=1, exit_reason=COMPLETED, raw='{'x' * 57}...')"
    assert repr(output.task_outputs[0]).startswith("TaskOutput(agent_role='Agent', ")
    assert len(repr(output.task_outputs[0])) < 200
