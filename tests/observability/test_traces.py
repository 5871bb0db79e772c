"""Execution traces, capture mode and exporters (BEHAVIOUR §13)."""

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentensemble import (
    Agent,
    CaptureMode,
    Ensemble,
    FunctionModel,
    JsonTraceExporter,
    ParallelErrorStrategy,
    ParallelExecutionError,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolResult,
    Usage,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import Message, ToolCall, ToolResultMessage, ToolSpec
from agentensemble.observability import (
    SCHEMA_VERSION,
    EnsembleCompletedEvent,
    ExecutionTrace,
    RunWarningEvent,
    load_trace,
)
from agentensemble.observability._capture import resolve_capture_mode
from agentensemble.outputs import EnsembleOutput
from tests.observability.test_event_record import Collect, KeepTrace


@tool
def lookup(key: str) -> ToolResult:
    """Look up a key."""
    return ToolResult.success(f"value of {key}", structured={"key": key})


def trace_of(output: EnsembleOutput) -> ExecutionTrace:
    """The run's trace, which every run records."""
    assert output.trace is not None
    return output.trace


def traced_run(**ensemble_kwargs: Any) -> EnsembleOutput:
    llm = ScriptedModel(
        [[tool_call("lookup", key="a"), ToolCall("bad", "lookup", "{oops")], "answer", "two"],
        usage=Usage(7, 3),
    )
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup], background="Careful.")
    first = Task("First {x}", agent=agent)
    second = Task("Second", context=[first], handler=lambda ctx: ctx.context_outputs[0].raw)
    ensemble = Ensemble(tasks=[first, second], inputs={"x": "1"}, **ensemble_kwargs)
    return ensemble.run()


def test_the_base_trace_records_prompts_model_calls_and_tool_calls() -> None:
    output = traced_run()
    trace = trace_of(output)
    assert trace.schema_version == SCHEMA_VERSION == "1.5"
    assert (trace.workflow, trace.capture_mode, trace.exit_reason) == (
        "PARALLEL",
        "OFF",
        "COMPLETED",
    )
    assert trace.inputs == {"x": "1"}
    assert [(a.role, a.tool_names, a.background) for a in trace.agents] == [
        ("Worker", ("lookup",), "Careful.")
    ]
    first, second = trace.task_traces
    assert first.prompts is not None
    assert first.prompts.user == "## Task\nFirst 1\n\n## Expected Output\n" + (
        Task.of("x").expected_output
    )
    assert [i.response_type for i in first.llm_interactions] == ["TOOL_CALLS", "FINAL_ANSWER"]
    calls = first.llm_interactions[0].tool_calls
    assert [(c.tool_name, c.outcome) for c in calls] == [
        ("lookup", "SUCCESS"),
        ("lookup", "FAILURE"),
    ]
    assert calls[0].result == "value of a"
    assert calls[0].structured_output == {"key": "a"}
    assert calls[0].parsed_input is None  # FULL only
    assert calls[1].result.startswith("Error: Invalid arguments for tool 'lookup'")
    assert first.llm_interactions[0].messages == ()  # STANDARD and up
    assert (first.llm_interactions[0].input_tokens, first.metrics.total_tokens) == (7, 20)
    assert second.prompts is None
    assert second.agent_role == "(deterministic)"
    assert second.final_output == "answer"
    assert output.task_outputs[0].trace is first


def test_skipped_calls_are_traced() -> None:
    llm = ScriptedModel([[tool_call("lookup", key="a"), tool_call("lookup", key="b")], "done"])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup], max_iterations=1)
    output = Ensemble(tasks=[Task("t", agent=agent)]).run()
    calls = trace_of(output).task_traces[0].llm_interactions[0].tool_calls
    assert [c.outcome for c in calls] == ["SUCCESS", "SKIPPED_MAX_ITERATIONS"]
    assert calls[1].result.startswith("STOP: Maximum tool iterations (1) reached.")


def test_json_round_trip() -> None:
    trace = trace_of(traced_run(capture_mode=CaptureMode.STANDARD))
    text = trace.to_json()
    data = json.loads(text)
    assert data["schema_version"] == "1.5"
    assert data["total_duration"].startswith("PT")
    assert data["started_at"].endswith("Z") or "+00:00" in data["started_at"]
    assert ExecutionTrace.from_json(text) == trace


def test_standard_captures_messages_and_full_parses_tool_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    standard = trace_of(traced_run(capture_mode=CaptureMode.STANDARD)).task_traces[0]
    messages = standard.llm_interactions[1].messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert messages[2].tool_calls[0].name == "lookup"
    assert messages[3].tool_name == "lookup"
    assert standard.llm_interactions[0].tool_calls[0].parsed_input is None
    assert not (tmp_path / "traces").exists()

    full = trace_of(traced_run(capture_mode=CaptureMode.FULL))
    calls = full.task_traces[0].llm_interactions[0].tool_calls
    assert calls[0].parsed_input == {"key": "a"}
    assert calls[1].parsed_input == {}  # unparseable arguments
    exported = tmp_path / "traces" / f"{full.ensemble_id}.json"
    assert load_trace(exported) == full


@pytest.mark.parametrize(
    ("configured", "environment", "expected"),
    [
        (None, None, CaptureMode.OFF),
        (CaptureMode.STANDARD, "full", CaptureMode.STANDARD),
        (CaptureMode.OFF, "Standard", CaptureMode.STANDARD),  # OFF does not override
        (None, "FULL", CaptureMode.FULL),
        (None, " off ", CaptureMode.OFF),
        (None, "verbose", CaptureMode.OFF),
    ],
)
def test_capture_mode_resolution(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    configured: CaptureMode | None,
    environment: str | None,
    expected: CaptureMode,
) -> None:
    if environment is None:
        monkeypatch.delenv("AGENTENSEMBLE_CAPTURE_MODE", raising=False)
    else:
        monkeypatch.setenv("AGENTENSEMBLE_CAPTURE_MODE", environment)
    assert resolve_capture_mode(configured) is expected
    if environment == "verbose":
        assert "Ignoring AGENTENSEMBLE_CAPTURE_MODE='verbose'" in caplog.text


def test_the_environment_reaches_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTENSEMBLE_CAPTURE_MODE", "standard")
    assert trace_of(traced_run()).capture_mode == "STANDARD"


def test_directory_and_file_exporters(tmp_path: Path) -> None:
    directory = JsonTraceExporter(tmp_path / "runs")
    first, second = traced_run(trace_exporter=directory), traced_run(trace_exporter=directory)
    files = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert files == sorted(f"{trace_of(o).ensemble_id}.json" for o in (first, second))

    single = JsonTraceExporter(tmp_path / "latest.json")
    traced_run(trace_exporter=single)
    last = traced_run(trace_exporter=single)
    assert load_trace(tmp_path / "latest.json").ensemble_id == trace_of(last).ensemble_id


def test_a_crash_while_writing_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "trace.json"
    target.write_text("previous complete trace")

    def crash(descriptor: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    trace = trace_of(traced_run())
    with pytest.raises(OSError, match="disk full"):
        JsonTraceExporter(target).export(trace)
    assert target.read_text() == "previous complete trace"
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # no temporary left behind


def test_exporter_errors_are_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    class Failing:
        def export(self, trace: ExecutionTrace) -> None:
            raise RuntimeError("collector unreachable")

    output = traced_run(trace_exporter=Failing())
    assert output.raw == "answer"
    assert "Trace exporter" in caplog.text
    assert "collector unreachable" in caplog.text


async def test_async_exporters_are_awaited() -> None:
    received: list[str] = []

    class Async:
        async def export(self, trace: ExecutionTrace) -> None:
            received.append(trace.ensemble_id)

    output = await Ensemble(
        tasks=[Task("x")], llm=ScriptedModel(["ok"]), trace_exporter=Async()
    ).arun()
    assert received == [trace_of(output).ensemble_id]


def test_a_failed_run_still_exports_a_trace_with_its_errors(tmp_path: Path) -> None:
    exporter = JsonTraceExporter(tmp_path)
    tasks = [
        Task("Fine", handler=lambda ctx: "ok"),
        Task("Broken", handler=lambda ctx: None),  # type: ignore[arg-type, return-value]  # returns null on purpose
    ]
    with pytest.raises(ParallelExecutionError):
        Ensemble(
            tasks=tasks,
            workflow=Workflow.PARALLEL,
            trace_exporter=exporter,
            parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
        ).run()
    (written,) = tmp_path.iterdir()
    trace = load_trace(written)
    assert trace.exit_reason == "ERROR"
    assert [t.final_output for t in trace.task_traces] == ["ok"]
    assert [(e.task_description, e.error_type) for e in trace.errors] == [
        ("Broken", "AgentExecutionError")
    ]
    assert "returned null" in trace.errors[0].message


def test_sequential_failure_trace(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    exporter = JsonTraceExporter(tmp_path / "t.json")
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=[Task("A")], llm=ScriptedModel([]), trace_exporter=exporter).run()
    trace = load_trace(tmp_path / "t.json")
    assert [(e.task_description, e.agent_role, e.error_type) for e in trace.errors] == [
        ("A", "Agent", "AgentExecutionError")
    ]


def test_a_failed_task_stays_in_the_trace_with_what_it_did_and_its_error() -> None:
    kept: list[ExecutionTrace] = []

    class Keep:
        def export(self, trace: ExecutionTrace) -> None:
            kept.append(trace)

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "found"

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        if not any(isinstance(message, ToolResultMessage) for message in messages):
            return tool_call("lookup", key="k")
        raise RuntimeError("provider down")

    agent = Agent("Worker", "Work", llm=FunctionModel(reply), tools=[lookup])
    ensemble = Ensemble(
        tasks=[Task("Find it", agent=agent)], capture_mode=CaptureMode.FULL, trace_exporter=Keep()
    )
    with pytest.raises(TaskExecutionError):
        ensemble.run()
    (trace,) = kept
    assert trace.task_traces == ()
    (failed,) = trace.failed_tasks
    assert failed.error is not None
    assert (failed.error.error_type, failed.error.message) == (
        "AgentExecutionError",
        "Agent 'Worker' failed: provider down",
    )
    assert failed.prompts is not None
    assert "Find it" in failed.prompts.user
    (first_call,) = failed.llm_interactions  # the call that failed never answered
    assert [call.result for call in first_call.tool_calls] == ["found"]
    assert (failed.final_output, failed.metrics.tool_call_count) == ("", 1)
    assert ExecutionTrace.from_json(trace.to_json()) == trace


def test_a_task_name_is_in_its_output_and_trace() -> None:
    named = Task("Research the market", name="research")
    output = Ensemble(tasks=[named, Task("Unnamed")], llm=ScriptedModel(["a", "b"])).run()
    assert [o.name for o in output.task_outputs] == ["research", None]
    assert output.trace is not None
    assert [t.name for t in output.trace.task_traces] == ["research", None]


def test_a_task_s_trace_is_one_object_whichever_is_read_first() -> None:
    """A run's traces are made when first read (most runs never read them); each task's is
    the same object in its output and in the run's trace, whichever is read first."""
    output = traced_run()
    task_first = output.task_outputs[0].trace
    run_trace = trace_of(output)
    assert run_trace.task_traces[0] is task_first
    assert trace_of(output) is run_trace
    again = traced_run()
    run_first = trace_of(again).task_traces[0]
    assert again.task_outputs[0].trace is run_first
    assert run_first.llm_interactions[0].tool_calls[0].result == "value of a"


def test_traces_read_from_many_threads_at_once_are_one_and_the_same() -> None:
    import sys
    import threading

    outputs = [traced_run() for _ in range(100)]
    seen: list[list[tuple[object, object]]] = [[] for _ in outputs]
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        for index, output in enumerate(outputs):
            seen[index].append((output.task_outputs[0].trace, trace_of(output)))

    readers = [threading.Thread(target=read) for _ in range(4)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between almost every bytecode
    try:
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
    finally:
        sys.setswitchinterval(previous)
    for output, pairs in zip(outputs, seen, strict=True):
        assert len(pairs) == 4
        assert all(task_trace is output.task_outputs[0].trace for task_trace, _ in pairs)
        assert all(run_trace is trace_of(output) for _, run_trace in pairs)
        assert trace_of(output).task_traces[0] is output.task_outputs[0].trace


def test_a_trace_from_events_ends_at_the_run_s_completion() -> None:
    """A log may go on after a run's completion (the start of a run resuming it): the
    events after it do not change that run's trace."""
    first, second = Collect(), Collect()
    traced_run(listeners=[first])
    traced_run(listeners=[second])
    completed = first.events[-1]
    assert isinstance(completed, EnsembleCompletedEvent)
    later = [event for event in second.events if not isinstance(event, EnsembleCompletedEvent)]
    later.append(
        RunWarningEvent(ensemble_id=completed.ensemble_id, seq=999, code="late", message="late")
    )
    trace = ExecutionTrace.from_events([*first.events, *later])
    assert trace == ExecutionTrace.from_events(first.events)
    assert trace.warnings == ()
    assert trace.started_at == first.events[0].timestamp


def test_a_task_output_pickles_and_compares_with_its_trace() -> None:
    import pickle

    output = traced_run().task_outputs[0]
    copied = pickle.loads(pickle.dumps(output))  # the trace is made as it is pickled
    assert copied == output
    assert copied.trace is not None
    assert copied.trace == output.trace
    assert copied.trace.llm_interactions[0].tool_calls[0].result == "value of a"


def test_the_exporter_and_the_output_hold_one_trace() -> None:
    exporter = KeepTrace()
    output = traced_run(trace_exporter=exporter)
    assert exporter.traces == [trace_of(output)]
    assert exporter.traces[0] is trace_of(output)
