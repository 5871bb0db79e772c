"""Checkpoints and resume: completed tasks are recorded as they complete, and a resumed run
restores them (no model call) and runs the rest, giving what an uninterrupted run gives."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    CheckpointStore,
    Edge,
    Ensemble,
    ExitReason,
    FunctionModel,
    Graph,
    Loop,
    MapReduceEnsemble,
    Phase,
    RunOptions,
    Task,
    TaskExecutionError,
    ValidationError,
    Workflow,
    tool_call,
)
from agentensemble.models import Message, ToolResultMessage, ToolSpec, Usage, UserMessage


class Flaky:
    """A model that answers each task with ``done: <task>`` (tokens counted), and fails
    while `broken` names a word of the task's prompt."""

    def __init__(self, broken: str | None = None) -> None:
        self.broken = broken
        self.asked: list[str] = []
        self.model = FunctionModel(self.answer, usage=Usage(input_tokens=10, output_tokens=5))

    def answer(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        task = _task_line(messages)
        self.asked.append(task)
        if self.broken is not None and self.broken in task:
            raise RuntimeError(f"provider down while on {task}")
        return f"done: {task}"


def _task_line(messages: Sequence[Message]) -> str:
    """The task's description: the line after ``## Task`` in the first user message."""
    user = next(m for m in messages if isinstance(m, UserMessage))
    lines = user.text.splitlines()
    return lines[lines.index("## Task") + 1]


def _tasks(llm: Any, draft: str = "Draft an article") -> list[Task[Any]]:
    writer = Agent("Writer", "Write", llm=llm)
    first = Task("Research bees", "Notes", agent=writer)
    second = Task(draft, "A draft", agent=writer, context=[first])
    third = Task("Polish the draft", "Final text", agent=writer, context=[second])
    return [first, second, third]


def _comparable(output: Any) -> list[tuple[str, str, Any, int]]:
    return [
        (o.task_description, o.raw, o.parsed_output, o.metrics.total_tokens)
        for o in output.task_outputs
    ]


@pytest.mark.parametrize("workflow", [Workflow.SEQUENTIAL, Workflow.PARALLEL])
def test_a_failed_run_resumes_without_calling_completed_tasks_again(
    tmp_path: Path, workflow: Workflow
) -> None:
    model = Flaky(broken="Draft")
    ensemble = Ensemble(
        tasks=_tasks(model.model), workflow=workflow, checkpoint=tmp_path / "runs.db"
    )
    with pytest.raises(TaskExecutionError) as failed:
        ensemble.run(options=RunOptions(run_id="run-1"))
    assert "resume=" in "\n".join(getattr(failed.value, "__notes__", []))
    assert [o.raw for o in failed.value.completed_outputs] == ["done: Research bees"]

    model.broken, model.asked = None, []
    resumed = ensemble.run(resume="run-1")

    assert not any("Research" in asked for asked in model.asked)
    assert resumed.exit_reason is ExitReason.COMPLETED
    assert resumed.run_id == "run-1"
    fresh = Ensemble(tasks=_tasks(Flaky().model), workflow=workflow).run()
    assert _comparable(resumed) == _comparable(fresh)
    assert resumed.metrics.total_tokens == fresh.metrics.total_tokens
    restored = [t.restored for t in resumed.trace.task_traces]  # type: ignore[union-attr]
    assert restored == [True, False, False]


def test_a_new_process_sees_the_checkpoint_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    model = Flaky(broken="Polish")
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=_tasks(model.model), checkpoint=path).run(options=RunOptions(run_id="r"))
    store = CheckpointStore.sqlite(path)
    [info] = store.runs()
    assert (info.run_id, info.status, info.completed_tasks) == ("r", "ERROR", 2)
    again = Flaky()
    output = Ensemble(tasks=_tasks(again.model), checkpoint=store).run(resume="r")
    assert again.asked == ["Polish the draft"]
    assert output.raw == "done: Polish the draft"
    assert store.runs()[0].status == "COMPLETED"
    assert store.delete("r")
    assert store.runs() == []
    store.close()


def test_resume_after_the_ensemble_changed_names_what_changed() -> None:
    store = CheckpointStore.in_memory()
    model = Flaky(broken="Polish")
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=_tasks(model.model), checkpoint=store).run(options=RunOptions(run_id="r"))
    tasks = _tasks(Flaky().model)
    changed = _tasks(Flaky().model, draft="Draft a poem")
    with pytest.raises(
        ValidationError, match=r"task 2 changed.*'Draft an article'.*'Draft a poem'"
    ):
        Ensemble(tasks=changed, checkpoint=store).run(resume="r")
    with pytest.raises(ValidationError, match="planned 3 tasks, the ensemble now plans 2"):
        Ensemble(tasks=tasks[:2], checkpoint=store).run(resume="r")


def test_bad_resume_requests_are_refused_before_any_model_call() -> None:
    model = Flaky()
    with pytest.raises(ValidationError, match="resume needs the ensemble's checkpoint"):
        Ensemble(tasks=_tasks(model.model)).run(resume="r")
    with pytest.raises(ValidationError, match="no run with that id"):
        Ensemble(tasks=_tasks(model.model), checkpoint=CheckpointStore.in_memory()).run(
            resume="missing"
        )
    with pytest.raises(ValidationError, match="resume must be the id"):
        Ensemble(tasks=_tasks(model.model), checkpoint=CheckpointStore.in_memory()).run(resume=" ")
    with pytest.raises(ValidationError, match="Ensemble checkpoint must be"):
        Ensemble(tasks=_tasks(model.model), checkpoint=42)  # type: ignore[arg-type]
    assert model.asked == []


def test_inputs_are_recorded_and_reused(tmp_path: Path) -> None:
    model = Flaky(broken="about")
    writer = Agent("Writer", "Write", llm=model.model)
    tasks = [
        Task("Research {topic}", "Notes", agent=writer),
        Task("Write about {topic}", "Text", agent=writer),
    ]
    ensemble = Ensemble(tasks=tasks, checkpoint=CheckpointStore.in_memory())
    with pytest.raises(TaskExecutionError):
        ensemble.run({"topic": "bees"}, RunOptions(run_id="r"))
    model.broken, model.asked = None, []
    assert ensemble.run(resume="r").raw == "done: Write about bees"
    assert model.asked == ["Write about bees"]


class Verdict(BaseModel):
    score: int


def test_structured_outputs_come_back_typed() -> None:
    model = Flaky()
    store = CheckpointStore.in_memory()
    typed = FunctionModel(lambda m, t: '{"score": 7}')
    writer = Agent("Judge", "Judge", llm=typed)
    tasks = [
        Task("Score the essay", "A score", agent=writer, output_type=Verdict),
        Task("Explain the score", "Text", agent=Agent("W", "W", llm=model.model)),
    ]
    model.broken = "Explain"
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=tasks, checkpoint=store).run(options=RunOptions(run_id="r"))
    model.broken = None
    output = Ensemble(tasks=tasks, checkpoint=store).run(resume="r")
    assert output.output_for(tasks[0]).parsed_output == Verdict(score=7)  # type: ignore[union-attr]
    assert len(typed.requests) == 1


def test_a_timed_out_run_resumes(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def slow_second(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        task = _task_line(messages)
        if "Draft" in task:
            await gate.wait()  # never set: the run's deadline ends it
        return f"done: {task}"

    store = CheckpointStore.in_memory()
    ensemble = Ensemble(tasks=_tasks(FunctionModel(slow_second)), checkpoint=store)
    timed_out = ensemble.run(options=RunOptions(run_id="t", timeout=0.5))
    assert timed_out.exit_reason is ExitReason.TIMEOUT
    assert timed_out.run_id == "t"
    assert store.runs()[0].status == "TIMEOUT"
    model = Flaky()
    output = Ensemble(tasks=_tasks(model.model), checkpoint=store).run(resume="t")
    assert model.asked == ["Draft an article", "Polish the draft"]
    assert output.is_complete


def test_phases_resume() -> None:
    model = Flaky(broken="Publish")
    writer = Agent("Writer", "Write", llm=model.model)
    research = Phase("research", [Task("Research bees", "Notes", agent=writer)])
    publish = Phase("publish", [Task("Publish it", "Post", agent=writer)], after=[research])
    store = CheckpointStore.in_memory()
    with pytest.raises(TaskExecutionError):
        Ensemble(phases=[research, publish], checkpoint=store).run(options=RunOptions(run_id="p"))
    model.broken, model.asked = None, []
    output = Ensemble(phases=[research, publish], checkpoint=store).run(resume="p")
    assert model.asked == ["Publish it"]
    assert [o.raw for o in output.phase_outputs["research"]] == ["done: Research bees"]


def test_a_loop_resumes_at_the_iteration_that_failed() -> None:
    model = Flaky()
    calls = {"n": 0}

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        calls["n"] += 1
        if calls["n"] == 3 and model.broken:
            raise RuntimeError("provider down")
        return f"draft {calls['n']}"

    llm = FunctionModel(answer)
    writer = Agent("Writer", "Write", llm=llm)
    loop = Loop("revise", [Task("Revise the draft", "A draft", agent=writer)], max_iterations=4)
    store = CheckpointStore.in_memory()
    model.broken = "yes"
    with pytest.raises(TaskExecutionError):
        Ensemble(loops=[loop], checkpoint=store).run(options=RunOptions(run_id="l"))
    model.broken = None
    output = Ensemble(loops=[loop], checkpoint=store).run(resume="l")
    assert calls["n"] == 5  # two recorded iterations restored, then 3 and 4 run
    history = output.loop_history("revise")
    assert [step["Revise the draft"].raw for step in history] == [
        "draft 1",
        "draft 2",
        "draft 4",
        "draft 5",
    ]


def test_hierarchical_workers_are_restored_when_the_manager_asks_again() -> None:
    worker_calls: list[str] = []

    def worker(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        task = _task_line(messages)
        worker_calls.append(task)
        return f"worker did: {task}"

    broken = {"on": True}

    def manager(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        answered = sum(1 for m in messages if isinstance(m, ToolResultMessage))
        if answered == 0:
            return tool_call(
                "delegate_task", agent_role="Researcher", task_description="Find bee facts"
            )
        if broken["on"]:
            raise RuntimeError("manager's provider down")
        return "Final: bees dance"

    researcher = Agent("Researcher", "Find facts", llm=FunctionModel(worker))
    tasks = [Task("Report on bees", "A report")]
    store = CheckpointStore.in_memory()

    def ensemble() -> Ensemble:
        return Ensemble(
            tasks=tasks,
            agents=[researcher],
            llm=researcher.llm,
            workflow=Workflow.HIERARCHICAL,
            manager_llm=FunctionModel(manager),
            checkpoint=store,
        )

    with pytest.raises(TaskExecutionError):
        ensemble().run(options=RunOptions(run_id="h"))
    assert worker_calls == ["Find bee facts"]
    broken["on"] = False
    output = ensemble().run(resume="h")
    assert worker_calls == ["Find bee facts"]  # restored by its delegation
    assert output.raw == "Final: bees dance"


def test_map_reduce_resumes_its_levels() -> None:
    broken = {"on": True}
    asked: list[str] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        text = "\n".join(m.text for m in messages if isinstance(m, UserMessage))
        if "Combine" in text and broken["on"]:
            raise RuntimeError("provider down")
        asked.append("reduce" if "Combine" in text else "map")
        return "summary"

    llm = FunctionModel(answer)

    def make() -> MapReduceEnsemble[str]:
        return MapReduceEnsemble(
            items=["a", "b", "c", "d"],
            map_agent=lambda item: Agent("Reader", "Read", llm=llm),
            map_task=lambda item, agent: Task(f"Read {item}", "Notes", agent=agent),
            reduce_agent=lambda: Agent("Editor", "Combine", llm=llm),
            reduce_task=lambda agent, chunk: Task(
                "Combine the notes", "Summary", agent=agent, context=chunk
            ),
            chunk_size=2,
            checkpoint=store,
        )

    store = CheckpointStore.in_memory()
    with pytest.raises(Exception):  # noqa: B017, PT011  # whichever error the workflow raises
        make().run(options=RunOptions(run_id="m"))
    assert asked == ["map"] * 4
    broken["on"] = False
    output = make().run(resume="m")
    assert asked == ["map"] * 4 + ["reduce"] * 3
    assert output.raw == "summary"
    assert output.trace is not None
    restored = [task for task in output.trace.task_traces if task.restored]
    assert len(restored) == 4  # the maps, restored with their place in the tree
    assert {(task.node_type, task.map_reduce_level) for task in restored} == {("map", 0)}


def test_an_adaptive_map_reduce_resumes_with_each_task_in_its_place() -> None:
    broken = {"on": True}

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        text = "\n".join(m.text for m in messages if isinstance(m, UserMessage))
        if "Combine" in text and broken["on"]:
            raise RuntimeError("provider down")
        return "summary"

    llm = FunctionModel(answer)

    def make() -> MapReduceEnsemble[str]:
        return MapReduceEnsemble(
            items=["a", "b", "c", "d"],
            map_task=lambda item: Task(f"Read {item}", "Notes", llm=llm),
            reduce_task=lambda chunk: Task("Combine the notes", "Summary", llm=llm, context=chunk),
            target_token_budget=100,
            checkpoint=store,
        )

    store = CheckpointStore.in_memory()
    with pytest.raises(Exception):  # noqa: B017, PT011  # whichever error the workflow raises
        make().run(options=RunOptions(run_id="a"))
    broken["on"] = False
    output = make().run(resume="a")
    assert output.trace is not None
    places = {
        (task.task_description, task.restored): (task.node_type, task.map_reduce_level)
        for task in output.trace.task_traces
    }
    assert places == {
        **{(f"Read {item}", True): ("map", 0) for item in "abcd"},
        ("Combine the notes", False): ("final-reduce", 1),
    }


def test_concurrent_runs_on_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    model = Flaky()
    ensemble = Ensemble(tasks=_tasks(model.model), checkpoint=path)
    outputs = ensemble.run_many([{}] * 12, max_concurrency=12)
    assert all(not isinstance(o, Exception) and o.is_complete for o in outputs)
    store = CheckpointStore.sqlite(path)
    runs = store.runs()
    assert len(runs) == 12
    assert {(r.status, r.completed_tasks) for r in runs} == {("COMPLETED", 3)}
    store.close()


def test_a_resumed_runs_budget_counts_what_its_restored_tasks_used() -> None:
    store = CheckpointStore.in_memory()
    ensemble = Ensemble(tasks=_tasks(Flaky().model), checkpoint=store)
    stopped = ensemble.run(options=RunOptions(run_id="b", max_model_calls=2))
    assert stopped.exit_reason is ExitReason.BUDGET
    again = Flaky()
    resumed = Ensemble(tasks=_tasks(again.model), checkpoint=store)
    still = resumed.run(resume="b", options=RunOptions(max_model_calls=2))
    assert still.exit_reason is ExitReason.BUDGET  # the two restored calls spent it
    assert again.asked == []
    done = resumed.run(resume="b", options=RunOptions(max_model_calls=3, max_tokens=45))
    assert done.exit_reason is ExitReason.COMPLETED
    assert again.asked == ["Polish the draft"]
    assert done.metrics.total_tokens == 45


def test_run_options_resume_is_the_same_as_the_keyword() -> None:
    store = CheckpointStore.in_memory()
    model = Flaky(broken="Polish")
    ensemble = Ensemble(tasks=_tasks(model.model), checkpoint=store)
    with pytest.raises(TaskExecutionError):
        ensemble.run(options=RunOptions(run_id="o"))
    model.broken, model.asked = None, []
    assert ensemble.run(options=RunOptions(resume="o")).run_id == "o"
    assert model.asked == ["Polish the draft"]
    with pytest.raises(ValidationError, match="name different runs"):
        ensemble.run(resume="o", options=RunOptions(resume="other"))
    with pytest.raises(ValidationError, match="RunOptions resume must not be blank"):
        RunOptions(resume=" ")


def test_a_graph_walk_resumes_on_the_same_path() -> None:
    store = CheckpointStore.in_memory()
    broken = {"on": True}
    calls: list[str] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        task = _task_line(messages)
        calls.append(task)
        if task == "Review the draft":
            reviews = calls.count(task)
            if reviews == 2 and broken["on"]:
                raise RuntimeError("provider down")
            return "again" if reviews == 1 else "approved"
        return f"draft {calls.count(task)}"

    def make() -> Ensemble:
        llm = FunctionModel(answer)
        graph = Graph(
            "editing",
            states={
                "draft": Task("Write the draft", "A draft", llm=llm),
                "review": Task("Review the draft", "A verdict", llm=llm),
            },
            start="draft",
            edges=[
                Edge("draft", "review"),
                Edge("review", "draft", when=lambda output: output.raw == "again"),
                Edge("review", Graph.END),
            ],
        )
        return Ensemble(graph=graph, checkpoint=store)

    with pytest.raises(TaskExecutionError):
        make().run(options=RunOptions(run_id="g"))
    assert calls == ["Write the draft", "Review the draft", "Write the draft", "Review the draft"]
    broken["on"], calls[:] = False, ["Review the draft"]  # the first review was made
    output = make().run(resume="g")
    assert calls == ["Review the draft", "Review the draft"]  # only the failed review again
    assert [(step.state, step.output.raw) for step in output.graph_history] == [
        ("draft", "draft 1"),
        ("review", "again"),
        ("draft", "draft 2"),
        ("review", "approved"),
    ]
    assert output.graph_termination_reason == "terminal"
