"""ReplayModel: a run reproduced from its FULL-capture trace with no model call, tools run
again or replayed, and every call it cannot answer reported with a diff of the prompt."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentensemble import (
    Agent,
    CaptureMode,
    ChatModel,
    Ensemble,
    EnsembleOutput,
    FunctionModel,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolSpec,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import Message, RateLimit, RateLimitedChatModel
from agentensemble.observability import ExecutionTrace, JsonTraceExporter, load_trace
from agentensemble.replay import ReplayError, ReplayModel


@dataclasses.dataclass
class Summary:
    title: str
    words: int


class Lookups:
    """A tool that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def tool(self) -> Any:
        @tool
        def lookup(topic: str) -> str:
            """Look a topic up."""
            self.calls += 1
            return f"{topic}: the moon pulls the sea"

        return lookup


def recording_models() -> dict[str, ScriptedModel]:
    """The researcher calls a tool, delegates to the analyst, then answers; the writer's
    first answer is not JSON, its correction is."""
    return {
        "Researcher": ScriptedModel(
            [
                tool_call("lookup", topic="tides"),
                tool_call("delegate", agent_role="Analyst", task_description="Check the pull"),
                "Tides follow the moon.",
            ]
        ),
        "Analyst": ScriptedModel(["The pull checks out."]),
        "Writer": ScriptedModel(["Sure! A summary.", '{"title": "Tides", "words": 3}']),
    }


def build(
    models: Callable[[str], ChatModel],
    lookups: Lookups,
    *,
    research: str = "Research {topic}",
    trace_file: Path | None = None,
) -> Ensemble:
    researcher = Agent(
        "Researcher",
        "Find facts",
        llm=models("Researcher"),
        tools=[lookups.tool()],
        allow_delegation=True,
    )
    analyst = Agent("Analyst", "Check facts", llm=models("Analyst"))
    writer = Agent("Writer", "Write summaries", llm=models("Writer"))
    research_task = Task(research, "The facts", agent=researcher)
    summary = Task(
        "Summarise the research",
        "A summary",
        agent=writer,
        output_type=Summary,
        context=[research_task],
    )
    return Ensemble(
        tasks=[research_task, summary],
        agents=[analyst],
        capture_mode=CaptureMode.FULL,
        trace_exporter=JsonTraceExporter(trace_file) if trace_file else _Discard(),
    )


class _Discard:
    def export(self, trace: object) -> None:
        """Keep no trace file."""


def results(output: EnsembleOutput) -> list[tuple[str, Any]]:
    return [(task.raw, task.parsed_output) for task in output.task_outputs]


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]]:
    """A recorded run: its trace file, its outputs and its models."""
    models, path = recording_models(), tmp_path / "run.json"
    output = build(models.__getitem__, Lookups(), trace_file=path).run(inputs={"topic": "tides"})
    assert results(output) == [
        ("Tides follow the moon.", None),
        ('{"title": "Tides", "words": 3}', Summary("Tides", 3)),
    ]
    return path, results(output), models


def calls_made(models: dict[str, ScriptedModel]) -> int:
    return sum(len(model.requests) for model in models.values())


def replay(model: ReplayModel, lookups: Lookups, **kwargs: Any) -> EnsembleOutput:
    return build(lambda _: model, lookups, **kwargs).run(inputs={"topic": "tides"})


def test_a_full_trace_replays_to_the_same_outputs_with_no_model_call(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, outputs, models = recorded
    assert calls_made(models) == 6  # researcher 3 (tool, delegation, answer), analyst, writer 2
    model, lookups = ReplayModel.from_trace(path), Lookups()

    output = replay(model, lookups)

    assert results(output) == outputs
    assert output.task_outputs[1].parsed(Summary) == Summary("Tides", 3)
    assert calls_made(models) == 6
    assert model.remaining == 0
    assert lookups.calls == 1  # tools run again by default
    trace = output.trace
    assert trace is not None
    assert trace.task_traces[0].delegations[0].raw_output == "The pull checks out."
    assert [call.response_type for call in trace.task_traces[1].llm_interactions] == [
        "FINAL_ANSWER",
        "FINAL_ANSWER",
    ]


def test_replayed_tools_are_not_run(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, outputs, _ = recorded
    lookups = Lookups()

    output = replay(ReplayModel.from_trace(path, replay_tools=True), lookups)

    assert results(output) == outputs
    assert lookups.calls == 0
    assert output.trace is not None
    (tool_trace,) = output.trace.task_traces[0].llm_interactions[0].tool_calls
    assert tool_trace.result == "tides: the moon pulls the sea"


def test_replayed_tools_are_not_run_through_a_rate_limited_model(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, outputs, _ = recorded
    lookups = Lookups()
    model = ReplayModel.from_trace(path, replay_tools=True)
    limited = RateLimitedChatModel(model, RateLimit.per_second(1000))

    output = replay(limited, lookups)  # type: ignore[arg-type]

    assert results(output) == outputs
    assert lookups.calls == 0


def test_a_trace_object_replays_as_its_file_does(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, outputs, _ = recorded
    output = replay(ReplayModel.from_trace(load_trace(path)), Lookups())
    assert results(output) == outputs


def test_a_changed_prompt_fails_with_the_task_the_iteration_and_a_diff(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, _, models = recorded

    with pytest.raises(TaskExecutionError) as raised:
        replay(ReplayModel.from_trace(path), Lookups(), research="Research {topic} in depth")

    error = raised.value
    assert error.task_description == "Research tides in depth"
    assert error.agent_role == "Researcher"
    cause = replay_error(error)
    assert cause.iteration == 0
    assert cause.task_description == "Research tides"
    assert "-Research tides\n+Research tides in depth" in cause.diff
    assert "iteration 0" in str(error)
    assert cause.diff in str(error)
    assert pickle.loads(pickle.dumps(cause)).diff == cause.diff
    assert calls_made(models) == 6


def test_a_changed_tool_result_fails_with_the_diff_of_the_conversation(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, _, _ = recorded

    class Other(Lookups):
        def tool(self) -> Any:
            @tool
            def lookup(topic: str) -> str:
                """Look a topic up."""
                return f"{topic}: the wind drives the sea"

            return lookup

    with pytest.raises(TaskExecutionError) as raised:
        replay(ReplayModel.from_trace(path), Other())

    cause = replay_error(raised.value)
    assert cause.iteration == 1
    assert "-tides: the moon pulls the sea\n+tides: the wind drives the sea" in cause.diff
    assert "task 'Research tides' (agent 'Researcher') at iteration 1 differs" in str(cause)


def test_a_call_beyond_the_recording_fails(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, outputs, _ = recorded
    model = ReplayModel.from_trace(path)
    assert results(replay(model, Lookups())) == outputs

    with pytest.raises(TaskExecutionError) as raised:
        replay(model, Lookups())  # the recording holds one run

    cause = replay_error(raised.value)
    assert (cause.iteration, cause.agent_role) == (0, "Researcher")
    assert "more often than the recorded run did" in str(raised.value)


def test_a_call_never_recorded_is_compared_with_the_closest_recorded_one(
    recorded: tuple[Path, list[tuple[str, Any]], dict[str, ScriptedModel]],
) -> None:
    path, _, _ = recorded
    model = ReplayModel.from_trace(path)
    stranger = Agent("Writer", "Write summaries", llm=model)

    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(tasks=[Task("Write a poem", agent=stranger)], trace_exporter=_Discard()).run()

    cause = replay_error(raised.value)
    assert "no model call with this agent and task prompt was recorded" in str(cause)
    assert (cause.agent_role, cause.task_description) == ("Writer", "Summarise the research")
    assert "+Write a poem" in cause.diff


def test_parallel_tasks_with_the_same_prompts_replay_each_recorded_answer_once(
    tmp_path: Path,
) -> None:
    numbers = itertools.count(1)

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"answer {next(numbers)}"

    def run(model: ChatModel, trace_file: Path | None = None) -> list[str]:
        agent = Agent("Poet", "Write", llm=model)
        tasks = [Task("Write a line", agent=agent) for _ in range(4)]
        exporter = JsonTraceExporter(trace_file) if trace_file else _Discard()
        ensemble = Ensemble(
            tasks=tasks,
            workflow=Workflow.PARALLEL,
            capture_mode=CaptureMode.FULL,
            trace_exporter=exporter,
        )
        return sorted(output.raw for output in ensemble.run().task_outputs)

    recorded = run(FunctionModel(answer), tmp_path / "run.json")
    model = ReplayModel.from_trace(tmp_path / "run.json")

    assert run(model) == recorded == [f"answer {n}" for n in range(1, 5)]
    assert model.remaining == 0


def test_a_hierarchical_run_with_concurrent_delegations_replays(tmp_path: Path) -> None:
    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"done: {(messages[1].text or '').splitlines()[1]}"

    def run(manager: ChatModel, workers: ChatModel, trace_file: Path | None = None) -> Any:
        agents = [Agent(role, "Help", llm=workers) for role in ("Writer", "Checker")]
        exporter = JsonTraceExporter(trace_file) if trace_file else _Discard()
        return Ensemble(
            tasks=[Task("Write it", agent=agents[0]), Task("Check it", agent=agents[1])],
            workflow=Workflow.HIERARCHICAL,
            manager_llm=manager,
            capture_mode=CaptureMode.FULL,
            trace_exporter=exporter,
        ).run()

    both = [
        tool_call("delegate_task", agent_role="Writer", task_description="Write it"),
        tool_call("delegate_task", agent_role="Checker", task_description="Check it"),
    ]
    manager, workers = ScriptedModel([both, "All done"]), FunctionModel(answer)
    recorded = run(manager, workers, tmp_path / "run.json")
    model = ReplayModel.from_trace(tmp_path / "run.json", replay_tools=True)

    replayed = run(model, model)

    assert [o.raw for o in replayed.task_outputs] == [o.raw for o in recorded.task_outputs]
    assert replayed.raw == "All done"
    assert (len(manager.requests), len(workers.requests), model.remaining) == (2, 2, 0)


def test_only_a_full_trace_of_this_schema_replays() -> None:
    def trace_of(mode: CaptureMode) -> ExecutionTrace:
        agent = Agent("Poet", "Write", llm=ScriptedModel(["A line"]))
        ensemble = Ensemble(
            tasks=[Task("Write a line", agent=agent)], capture_mode=mode, trace_exporter=_Discard()
        )
        trace = ensemble.run().trace
        assert trace is not None
        return trace

    with pytest.raises(ValidationError, match=r"capture_mode=CaptureMode\.FULL"):
        ReplayModel.from_trace(trace_of(CaptureMode.STANDARD))
    older = dataclasses.replace(trace_of(CaptureMode.FULL), schema_version="1.4")
    with pytest.raises(ValidationError, match="did not keep the text of final answers"):
        ReplayModel.from_trace(older)


def replay_error(error: BaseException) -> ReplayError:
    """The `ReplayError` that caused `error`."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ReplayError):
        cause = cause.__cause__
    assert isinstance(cause, ReplayError), error
    return cause
