"""The run context: run ids, per-run listeners and buckets, settings, planning order,
deadlines, early exits and cancellation (DESIGN 3b, 4a)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleCompletedEvent,
    EnsembleListener,
    EnsembleOutput,
    ExitReason,
    FunctionModel,
    LLMAgentSynthesizer,
    ModelSettings,
    Phase,
    RateLimit,
    ReviewHandler,
    RunOptions,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble._control import ControlFlowSignal
from agentensemble.models import Message, ModelRequest, SystemMessage, ToolResultMessage, ToolSpec
from agentensemble.observability import Event, ExecutionTrace
from tests.fakes import FakeClock


class Recorder(EnsembleListener):
    """Keeps every event, through the catch-all and through the specific methods."""

    def __init__(self) -> None:
        self.all: list[Event] = []
        self.specific: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.all.append(event)

    async def on_task_start(self, event: Any) -> None:
        self.specific.append(event)

    async def on_task_complete(self, event: Any) -> None:
        self.specific.append(event)

    async def on_tool_call(self, event: Any) -> None:
        self.specific.append(event)


class KeepTrace:
    def __init__(self) -> None:
        self.traces: list[ExecutionTrace] = []

    def export(self, trace: ExecutionTrace) -> None:
        self.traces.append(trace)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_a_chosen_run_id_is_on_every_event_and_in_the_trace() -> None:
    recorder, exporter = Recorder(), KeepTrace()
    llm = ScriptedModel([tool_call("lookup", key="k"), "found", "written"])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    ensemble = Ensemble(
        tasks=[Task("Find", agent=agent), Task("Write", agent=agent)],
        listeners=[recorder],
        trace_exporter=exporter,
    )
    output = ensemble.run(options=RunOptions(run_id="queue-message-7"))
    kinds = {event.type for event in recorder.all}
    assert {"ensemble_started", "task_started", "tool_called", "ensemble_completed"} <= kinds
    assert {event.ensemble_id for event in recorder.all} == {"queue-message-7"}
    assert output.trace is not None
    assert output.trace.ensemble_id == "queue-message-7"
    assert exporter.traces[0].ensemble_id == "queue-message-7"


def test_without_a_run_id_each_run_gets_its_own() -> None:
    recorder = Recorder()
    ensemble = Ensemble(tasks=[Task("A")], llm=ScriptedModel(["a", "b"]), listeners=[recorder])
    ensemble.run()
    ensemble.run()
    assert len({event.ensemble_id for event in recorder.all}) == 2


def test_on_event_sees_every_event_after_its_own_method() -> None:
    recorder = Recorder()
    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    Ensemble(tasks=[Task("Find", agent=agent)], listeners=[recorder]).run()
    assert [event.type for event in recorder.all] == [
        "ensemble_started",
        "task_started",
        "task_input",
        "llm_iteration_started",
        "llm_iteration_completed",
        "tool_called",
        "llm_iteration_started",
        "llm_iteration_completed",
        "task_completed",
        "ensemble_completed",
    ]
    specific = [event for event in recorder.all if event.type in {"task_started", "task_completed"}]
    assert [e for e in recorder.specific if e.type != "tool_called"] == specific


def test_task_events_carry_one_task_id_per_execution() -> None:
    recorder = Recorder()
    llm = ScriptedModel(["a", "b"])
    Ensemble(tasks=[Task("A"), Task("B")], llm=llm, listeners=[recorder]).run()
    task_events = [event for event in recorder.all if hasattr(event, "task_id")]
    by_description: dict[str, set[str]] = {}
    for event in task_events:
        by_description.setdefault(event.task_description, set()).add(event.task_id)  # type: ignore[union-attr]
    assert set(by_description) == {"A", "B"}
    assert all(len(ids) == 1 for ids in by_description.values())
    assert by_description["A"] != by_description["B"]
    assert {event.parent_task_id for event in task_events} == {None}  # type: ignore[union-attr]


def test_listeners_for_one_run_only() -> None:
    for_this_run = Recorder()
    ensemble = Ensemble(tasks=[Task("A")], llm=ScriptedModel(["a", "b"]))
    ensemble.run(options=RunOptions(listeners=[for_this_run]))
    ensemble.run()
    assert [e.type for e in for_this_run.all].count("ensemble_started") == 1


def test_bad_run_options_name_the_field() -> None:
    with pytest.raises(ValidationError, match="RunOptions run_id must not be blank"):
        RunOptions(run_id="  ")
    with pytest.raises(ValidationError, match="RunOptions timeout must be a positive number"):
        RunOptions(timeout=0)
    with pytest.raises(ValidationError, match=r"RunOptions listeners\[0\] must be a listener"):
        RunOptions(listeners=[42])


def test_model_settings_reach_the_model_task_winning_field_by_field() -> None:
    llm = ScriptedModel(["a", "b"])
    agent = Agent(
        "Worker",
        "Work",
        llm=llm,
        model_settings=ModelSettings(temperature=0.2, max_tokens=100, extra={"seed": 1}),
    )
    own = Task("A", agent=agent, model_settings=ModelSettings(max_tokens=5, extra={"top_p": 0.5}))
    inherited = Task("B", agent=agent)
    Ensemble(tasks=[own, inherited]).run()
    first, second = (request.settings for request in llm.requests)
    assert first == ModelSettings(temperature=0.2, max_tokens=5, extra={"seed": 1, "top_p": 0.5})
    assert second == ModelSettings(temperature=0.2, max_tokens=100, extra={"seed": 1})


def test_no_settings_anywhere_sends_none() -> None:
    llm = ScriptedModel(["a"])
    Ensemble(tasks=[Task("A")], llm=llm).run()
    assert llm.requests[0].settings is None


def test_one_ensemble_bucket_per_run_across_three_concurrent_phases() -> None:
    clock = FakeClock()
    times: list[float] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        times.append(clock.now)
        return "ok"

    phases = [Phase(name, [Task(f"Task {name}")]) for name in ("a", "b", "c")]
    ensemble = Ensemble(
        phases=phases, llm=FunctionModel(reply), rate_limit=RateLimit.per_second(1, clock=clock)
    )
    ensemble.run()
    assert sorted(times) == [0.0, 1.0, 2.0]  # one bucket: one call per second, whatever phase
    ensemble.run()  # a new run, a new bucket that starts with one token
    assert sorted(times[3:]) == [2.0, 3.0, 4.0]


class ConcurrencyGauge:
    """A model whose calls overlap for a few loop turns, counting how many run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def reply(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        self.running += 1
        self.most = max(self.most, self.running)
        for _ in range(5):
            await asyncio.sleep(0)
        self.running -= 1
        return "ok"


@pytest.mark.parametrize(("limit", "expected"), [(None, 4), (2, 2), (1, 1)])
def test_max_concurrency_bounds_the_whole_run_across_phases(
    limit: int | None, expected: int
) -> None:
    gauge = ConcurrencyGauge()
    phases = [
        Phase("p1", [Task("A"), Task("B")], workflow=Workflow.PARALLEL),
        Phase("p2", [Task("C")]),
        Phase("p3", [Task("D")]),
    ]
    Ensemble(phases=phases, llm=FunctionModel(gauge.reply), max_concurrency=limit).run()
    assert gauge.most == expected


def test_every_phase_is_planned_before_any_task_calls_the_model() -> None:
    calls: list[str] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
        if system.startswith("You design the persona"):
            calls.append("synthesis")
            return '{"role": "Specialist", "goal": "Do it well", "background": "Careful."}'
        calls.append("task")
        return "done"

    first = Phase("first", [Task("One")])
    second = Phase("second", [Task("Two"), Task("Three")], after=[first])
    output = Ensemble(
        phases=[first, second],
        llm=FunctionModel(reply),
        agent_synthesizer=LLMAgentSynthesizer(),
    ).run()
    assert calls == ["synthesis"] * 3 + ["task"] * 3
    assert [o.agent_role for o in output.task_outputs] == ["Specialist"] * 3
    assert output.trace is not None
    assert len(output.trace.agent_synthesis) == 3
    assert output.metrics.total_llm_call_count == 6  # synthesis calls count too


class Gate:
    """A model that answers its first `free` calls, then waits until released."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.calls = 0
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def reply(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        self.calls += 1
        if self.calls > self.free:
            self.waiting.set()
            await self.release.wait()
        return f"answer {self.calls}"


async def test_a_run_deadline_returns_what_completed_with_exit_reason_timeout() -> None:
    gate = Gate(free=1)
    completed: list[EnsembleCompletedEvent] = []

    class Finish(EnsembleListener):
        def on_ensemble_completed(self, event: EnsembleCompletedEvent) -> None:
            completed.append(event)

    exporter = KeepTrace()
    ensemble = Ensemble(
        tasks=[Task("One"), Task("Two"), Task("Three")],
        llm=FunctionModel(gate.reply),
        listeners=[Finish()],
        trace_exporter=exporter,
    )
    output = await ensemble.arun(options=RunOptions(timeout=0.05))
    assert output.exit_reason is ExitReason.TIMEOUT
    assert not output.is_complete
    assert [o.raw for o in output.task_outputs] == ["answer 1"]
    assert completed[0].exit_reason == "TIMEOUT"
    assert [t.final_output for t in exporter.traces[0].task_traces] == ["answer 1"]
    assert exporter.traces[0].exit_reason == "TIMEOUT"


class StopEverything(ControlFlowSignal):
    """What exit-early and review-timeout signals look like to the run."""


@pytest.mark.parametrize("workflow", [Workflow.SEQUENTIAL, Workflow.PARALLEL])
def test_a_control_flow_signal_ends_the_run_early_keeping_completed_outputs(
    workflow: Workflow,
) -> None:
    def stop(context: object) -> str:
        raise StopEverything

    first = Task("First", handler=lambda context: "kept")
    stopper = Task("Stop", handler=stop, context=[first])
    later = Task("Later", handler=lambda context: "never", context=[stopper])
    output = Ensemble(tasks=[first, stopper, later], workflow=workflow).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert [o.raw for o in output.task_outputs] == ["kept"]


async def test_a_cancelled_run_reports_every_completed_task() -> None:
    gate = Gate(free=2)
    completed: list[EnsembleCompletedEvent] = []

    class Finish(EnsembleListener):
        async def on_ensemble_completed(self, event: EnsembleCompletedEvent) -> None:
            completed.append(event)

    exporter = KeepTrace()
    ensemble = Ensemble(
        tasks=[Task(name) for name in ("One", "Two", "Three", "Four")],
        llm=FunctionModel(gate.reply),
        listeners=[Finish()],
        trace_exporter=exporter,
    )
    running = asyncio.create_task(ensemble.arun())
    await gate.waiting.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [t.final_output for t in exporter.traces[0].task_traces] == ["answer 1", "answer 2"]
    assert completed[0].exit_reason == "ERROR"


def test_tool_calls_to_an_agent_without_tools_are_told_so_in_event_and_trace() -> None:
    recorder = Recorder()
    llm = ScriptedModel([tool_call("lookup", key="k"), "in text"])
    output = Ensemble(tasks=[Task("A")], llm=llm, listeners=[recorder]).run()
    completed = [e for e in recorder.all if e.type == "llm_iteration_completed"]
    assert [e.response_type for e in completed] == ["TOOL_CALLS", "FINAL_ANSWER"]
    assert output.task_outputs[0].trace is not None
    first = output.task_outputs[0].trace.llm_interactions[0]
    assert (first.response_type, first.tool_calls[0].outcome) == ("TOOL_CALLS", "FAILURE")
    assert output.raw == "in text"


def test_a_request_offers_the_tools_of_the_agent() -> None:
    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    Ensemble(tasks=[Task("A", agent=agent)]).run()
    request: ModelRequest = llm.requests[1]
    assert [spec.name for spec in request.tools] == ["lookup"]
    assert isinstance(request.messages[-1], ToolResultMessage)


def test_a_run_id_is_a_version_4_uuid_in_its_usual_text_form() -> None:
    import uuid

    from agentensemble.execution._context import new_run_id

    ids = {new_run_id() for _ in range(500)}
    assert len(ids) == 500
    for run_id in ids:
        parsed = uuid.UUID(run_id)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, run_id)


async def test_a_run_that_times_out_while_planning_still_reports_its_start_and_end() -> None:
    from agentensemble import LLMAgentSynthesizer

    gate = Gate(free=0)  # the synthesizer's model call never returns
    recorder = Recorder()
    exporter = KeepTrace()
    ensemble = Ensemble(
        tasks=[Task("One")],
        llm=FunctionModel(gate.reply),
        agent_synthesizer=LLMAgentSynthesizer(),
        listeners=[recorder],
        trace_exporter=exporter,
    )
    output = await ensemble.arun(options=RunOptions(timeout=0.05))
    assert output.exit_reason is ExitReason.TIMEOUT
    assert [(event.type, event.seq) for event in recorder.all] == [
        ("ensemble_started", 1),
        ("ensemble_completed", 2),
    ]
    assert ExecutionTrace.from_events(recorder.all) == output.trace == exporter.traces[0]


def counted_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every group the engine plans from here on, by its number of tasks."""
    import agentensemble._run as engine

    planned: list[int] = []
    plan = engine.plan_tasks  # type: ignore[attr-defined]  # what the engine calls

    async def counting(tasks: Sequence[Task[Any]], *args: Any, **kwargs: Any) -> Any:
        planned.append(len(tasks))
        return await plan(tasks, *args, **kwargs)

    monkeypatch.setattr(engine, "plan_tasks", counting)
    return planned


def test_runs_that_plan_alike_take_the_first_runs_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    planned = counted_plans(monkeypatch)
    model = FunctionModel(lambda messages, tools: "done")
    first = Task("Research the market")
    ensemble = Ensemble(tasks=[first, Task("Write the report", context=[first])], llm=model)
    outputs: list[EnsembleOutput | Exception] = []
    outputs += asyncio.run(ensemble.arun_many([{}] * 4))  # the first ones at once
    outputs += [ensemble.run() for _ in range(3)]
    assert planned == [2]
    for output in outputs:
        assert isinstance(output, EnsembleOutput)
        assert [o.agent_role for o in output.task_outputs] == ["Researcher", "Writer"]
    assert len(model.requests) == 14


def test_runs_with_texts_of_their_own_each_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    planned = counted_plans(monkeypatch)
    model = FunctionModel(lambda messages, tools: "done")
    ensemble = Ensemble(tasks=[Task("Research {topic}")], llm=model)
    ensemble.run({"topic": "tides"})
    ensemble.run({"topic": "comets"})
    assert planned == [1, 1]
    assert ["comets" in str(request.messages) for request in model.requests] == [False, True]


@pytest.mark.parametrize(
    "settings",
    [
        {"agent_synthesizer": LLMAgentSynthesizer()},  # a model call to make an agent
        {"rate_limit": RateLimit(100, timedelta(seconds=1))},  # fresh buckets per run
        {"short_term_memory": True},  # the run's memory steps
        {"review_handler": ReviewHandler.auto_approve()},  # the run's review gates
    ],
    ids=["llm-synthesis", "rate-limit", "memory", "review"],
)
def test_runs_with_a_plan_of_their_own_each_plan(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any]
) -> None:
    planned = counted_plans(monkeypatch)
    ensemble = Ensemble(
        tasks=[Task("Research the market")],
        llm=FunctionModel(lambda messages, tools: "done"),
        **settings,
    )
    ensemble.run()
    ensemble.run()
    assert planned == [1, 1]


class Files:
    """A tool whose description lists the files there are when a run reads it."""

    name = "list_files"

    def __init__(self) -> None:
        self.files = ["a.txt"]

    @property
    def description(self) -> str:
        return "Files: " + ", ".join(self.files)

    def execute(self, input: str) -> str:
        return "listed"


def test_a_task_without_an_agent_resolves_its_tools_every_run() -> None:
    files = Files()
    offered: list[str] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        offered.append(tools[0].description)
        return "done"

    ensemble = Ensemble(
        tasks=[Task("Summarise the files", tools=[files])], llm=FunctionModel(reply)
    )
    ensemble.run()
    files.files.append("b.txt")
    ensemble.run()
    assert offered == ["Files: a.txt", "Files: a.txt, b.txt"]
