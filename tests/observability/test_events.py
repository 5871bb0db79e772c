"""Event payloads and ordering (BEHAVIOUR §14)."""

import asyncio
from typing import TypeVar

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleCompletedEvent,
    EnsembleListener,
    EnsembleStartedEvent,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    ScriptedModel,
    Task,
    TaskCompleteEvent,
    TaskExecutionError,
    TaskInputEvent,
    TaskStartEvent,
    TokenEvent,
    Usage,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.observability import Event
from agentensemble.observability._listeners import _tables

E = TypeVar("E")


class Recorder(EnsembleListener):
    """Records (event type, short detail) for every event, from sync and async methods."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def record(self, event: Event) -> None:
        self.events.append(event)

    def at(self, index: int, kind: type[E]) -> E:
        """The event at `index`, which must be a `kind`."""
        event = self.events[index]
        assert isinstance(event, kind), event
        return event

    def types(self) -> list[str]:
        return [event.type for event in self.events]


for _method in _tables().method_by_class.values():
    setattr(Recorder, _method, Recorder.record)


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    return f"value of {key}"


def test_every_event_type_has_a_listener_method() -> None:
    for method in _tables().method_by_class.values():
        assert callable(getattr(EnsembleListener, method))


def test_sequential_order_for_an_agent_task_with_a_tool() -> None:
    recorder = Recorder()
    llm = ScriptedModel([tool_call("lookup", key="a"), "done", "second"], usage=Usage(5, 2))
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    first = Task("First", agent=agent)
    Ensemble(
        tasks=[first, Task("Second", agent=agent, context=[first])],
        listeners=[recorder],
        workflow=Workflow.SEQUENTIAL,
    ).run()

    assert recorder.types() == [
        "ensemble_started",
        "task_started",
        "task_input",
        "llm_iteration_started",
        "llm_iteration_completed",
        "tool_called",
        "llm_iteration_started",
        "token",
        "llm_iteration_completed",
        "task_completed",
        "task_started",
        "task_input",
        "llm_iteration_started",
        "token",
        "llm_iteration_completed",
        "task_completed",
        "ensemble_completed",
    ]
    started = recorder.at(0, EnsembleStartedEvent)
    first_input = recorder.at(2, TaskInputEvent)
    assert (started.workflow, started.total_tasks) == ("SEQUENTIAL", 2)
    assert first_input.tool_names == ("lookup",)
    assert first_input.user_prompt == "## Task\nFirst\n\n## Expected Output\n" + (
        Task.of("x").expected_output
    )
    assert first_input.system_prompt.startswith("You are Worker.")
    iteration = recorder.at(4, LlmIterationCompletedEvent)
    assert (iteration.iteration_index, iteration.response_type) == (0, "TOOL_CALLS")
    assert (iteration.input_tokens, iteration.output_tokens) == (5, 2)
    assert iteration.model_name == "ScriptedModel"
    second_call = recorder.at(6, LlmIterationStartedEvent)
    assert len(second_call.messages) == 4  # system, user, assistant, tool result
    assert recorder.at(8, LlmIterationCompletedEvent).response_type == "FINAL_ANSWER"
    assert recorder.at(7, TokenEvent).token == "done"
    run_ids = {getattr(e, "ensemble_id", None) for e in recorder.events}
    assert len(run_ids) == 1
    assert recorder.at(-1, EnsembleCompletedEvent).exit_reason == "COMPLETED"


def test_parallel_runs_keep_each_tasks_events_in_order() -> None:
    recorder = Recorder()
    tasks = [Task(f"Task {i}") for i in range(5)]
    Ensemble(
        tasks=tasks, llm=ScriptedModel(["x"] * 5), workflow=Workflow.PARALLEL, listeners=[recorder]
    ).run()
    types = recorder.types()
    assert types[0] == "ensemble_started"
    assert types[-1] == "ensemble_completed"
    for index in range(1, 6):
        own = [e.type for e in recorder.events if getattr(e, "task_index", None) == index]
        assert own == [
            "task_started",
            "task_input",
            "llm_iteration_started",
            "token",
            "llm_iteration_completed",
            "task_completed",
        ]


def test_a_failed_run_ends_with_an_error_completion_event() -> None:
    recorder = Recorder()
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=[Task("Doomed")], llm=ScriptedModel([]), listeners=[recorder]).run()
    assert recorder.types()[-2:] == ["task_failed", "ensemble_completed"]
    completed = recorder.at(-1, EnsembleCompletedEvent)
    assert completed.exit_reason == "ERROR"
    assert (completed.error_type, completed.reason) == ("TaskExecutionError", str(caught.value))


def test_handler_tasks_fire_no_model_events() -> None:
    recorder = Recorder()
    Ensemble(tasks=[Task("Compute", handler=lambda ctx: "42")], listeners=[recorder]).run()
    assert recorder.types() == [
        "ensemble_started",
        "task_started",
        "task_completed",
        "ensemble_completed",
    ]


def test_raising_listeners_sync_and_async_never_disturb_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(EnsembleListener):
        def on_task_start(self, event: TaskStartEvent) -> None:
            raise ValueError("sync listener bug")

        async def on_task_complete(self, event: TaskCompleteEvent) -> None:
            raise ValueError("async listener bug")

    recorder = Recorder()
    output = Ensemble(
        tasks=[Task("Go")], llm=ScriptedModel(["fine"]), listeners=[Broken(), recorder]
    ).run()
    assert output.raw == "fine"
    assert "task_completed" in recorder.types()
    assert "Listener Broken raised in on_task_start" in caplog.text
    assert "Listener Broken raised in on_task_complete" in caplog.text


async def test_sync_listeners_do_not_block_the_event_loop() -> None:
    loop = asyncio.get_running_loop()
    loop_ran: list[bool] = []

    async def on_loop() -> None:
        loop_ran.append(True)

    class Blocking(EnsembleListener):
        def on_task_start(self, event: TaskStartEvent) -> None:
            # In a worker thread, wait for work that only a free event loop can run: a sync
            # listener called on the loop itself would deadlock here (and time out).
            asyncio.run_coroutine_threadsafe(on_loop(), loop).result(timeout=5)

    output = await Ensemble(
        tasks=[Task("x")], llm=ScriptedModel(["ok"]), listeners=[Blocking()]
    ).arun()
    assert output.raw == "ok"
    assert loop_ran == [True]


def test_unknown_callback_names_are_rejected() -> None:
    from agentensemble.observability._listeners import callback_listener

    with pytest.raises(ValueError, match="Unknown listener callback: on_nothing"):
        callback_listener(on_nothing=print)
