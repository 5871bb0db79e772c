"""Loops (BEHAVIOUR 9.8): build rules, stop reasons, output and memory modes, feedback,
loops in SEQUENTIAL and PARALLEL runs, events and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    Loop,
    LoopMemoryMode,
    LoopOutputMode,
    MaxIterationsAction,
    MaxLoopIterationsExceededError,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
)
from agentensemble.memory import MemoryEntry, MemoryStore
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import JsonTraceExporter, LoopIterationCompletedEvent, load_trace


class Recording:
    """A model answering from a script and keeping each prompt it was sent."""

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def model(self) -> FunctionModel:
        def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            self.prompts.append(str(getattr(messages[-1], "text", "")))
            return self.answers[len(self.prompts) - 1]

        return FunctionModel(answer)


def writer_and_critic(
    drafts: Sequence[str], verdicts: Sequence[str]
) -> tuple[Task[None], Task[None], Recording, Recording]:
    writing, critique = Recording(drafts), Recording(verdicts)
    write = Task(
        description="Write a tagline",
        expected_output="One line",
        agent=Agent(role="Writer", goal="Write", llm=writing.model()),
        name="write",
    )
    review = Task(
        description="Critique the tagline",
        expected_output="APPROVED, or REVISE and why",
        agent=Agent(role="Critic", goal="Judge", llm=critique.model()),
        context=[write],
        name="critique",
    )
    return write, review, writing, critique


def approved(context: Any) -> bool:
    return bool(context.last_output.raw.startswith("APPROVED"))


# ---- build rules ---------------------------------------------------------------------------


def task(description: str = "Do it", **options: Any) -> Task[None]:
    return Task(description=description, expected_output="Done", **options)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Loop(" ", [task()]), "Loop name must be non-blank"),
        (lambda: Loop("l", []), "Loop 'l' body must contain at least one task"),
        (lambda: Loop("l", [task()], max_iterations=0), "Loop 'l' max_iterations must be >= 1"),
        (
            lambda: Loop("l", [task()], max_iterations=None),
            "Loop 'l' must declare either an 'until' predicate or a positive max_iterations",
        ),
        (lambda: Loop("l", [task(), task()]), "Loop 'l' has two body tasks named 'Do it'"),
        (lambda: Loop("l", ["x"]), "Loop 'l' tasks\\[0\\] must be a Task, got: str"),  # type: ignore[list-item]
        (
            lambda: Loop("l", [task()], memory_mode=LoopMemoryMode.WINDOW),
            "Loop 'l' memory_mode WINDOW needs memory_window_size >= 1, got: None",
        ),
        (
            lambda: Loop("l", [task()], memory_window_size=3),
            "Loop 'l' memory_window_size is only used with memory_mode WINDOW",
        ),
        (
            lambda: Loop("l", [task()], output_mode="EVERYTHING"),
            "Loop 'l' output_mode must be one of LAST_ITERATION, FINAL_TASK_ONLY, ALL_ITERATIONS",
        ),
        (lambda: Loop("l", [task()], until="yes"), "Loop 'l' until must be callable"),  # type: ignore[arg-type]
    ],
)
def test_build_rules(build: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        build()


def test_max_iterations_is_checked_before_the_stop_condition() -> None:
    with pytest.raises(ValidationError, match="max_iterations must be >= 1, got: -1"):
        Loop("l", [task()], max_iterations=-1)


def test_a_body_task_may_not_wait_for_a_task_outside_the_body() -> None:
    outside = task("Outside")
    with pytest.raises(ValidationError, match=r"Loop\(context=\[\.\.\.\]\)"):
        Loop("l", [task(context=[outside])])


def test_mixing_rules_are_checked_before_any_model_call() -> None:
    llm = ScriptedModel([])
    loop = Loop("l", [task()])
    from agentensemble import Phase

    with pytest.raises(ValidationError, match="Cannot mix loops and phases"):
        Ensemble(loops=[loop], phases=[Phase("p", [task("Other")])], llm=llm).run()
    with pytest.raises(ValidationError, match=r"Workflow\.HIERARCHICAL does not support loops"):
        Ensemble(loops=[loop], tasks=[task("Other")], workflow=Workflow.HIERARCHICAL, llm=llm).run()
    with pytest.raises(ValidationError, match="Duplicate loop name 'l' detected"):
        Ensemble(loops=[loop, Loop("l", [task("Again")])], llm=llm)
    with pytest.raises(ValidationError, match="body task 'Do it' has no LLM source"):
        Ensemble(loops=[loop]).run()
    assert llm.requests == []


def test_a_flat_task_cannot_wait_for_a_loop_body() -> None:
    body = task("Inside")
    after = task("After", context=[body])
    with pytest.raises(ValidationError, match="a body task of loop 'l'"):
        Ensemble(tasks=[after], loops=[Loop("l", [body])], llm=ScriptedModel([])).run()


# ---- running -------------------------------------------------------------------------------


def test_stops_when_the_predicate_holds_and_feeds_back_the_last_output() -> None:
    write, review, writing, _ = writer_and_critic(
        ["Bees: busy.", "Bees: they dance."], ["REVISE: dull", "APPROVED"]
    )
    loop = Loop("refine", [write, review], until=approved, max_iterations=4)
    output = Ensemble(loops=[loop]).run()
    assert output.loop_termination_reason("refine") == "predicate"
    assert not output.loop_stopped_by_max_iterations("refine")
    history = output.loop_history("refine")
    assert [list(iteration) for iteration in history] == [["write", "critique"]] * 2
    assert [iteration["write"].raw for iteration in history] == ["Bees: busy.", "Bees: they dance."]
    assert output.raw == "APPROVED"
    assert [o.raw for o in output.task_outputs] == ["Bees: they dance.", "APPROVED"]
    assert "Revision Instructions" not in writing.prompts[0]
    second = writing.prompts[1]
    assert "## Revision Instructions (Attempt 2)" in second
    assert (
        "### Feedback\nLoop iteration 2 of 4. Prior iteration's final body output is shown "
        "above; revise based on it."
    ) in second
    assert "### Previous Output\nREVISE: dull" in second


def test_without_feedback_the_prompt_is_the_same_every_iteration() -> None:
    write, review, writing, _ = writer_and_critic(["a", "b"], ["REVISE", "APPROVED"])
    loop = Loop("l", [write, review], until=approved, inject_feedback=False)
    Ensemble(loops=[loop]).run()
    assert writing.prompts[0] == writing.prompts[1]


@pytest.mark.parametrize(
    ("action", "stopped_by_max"),
    [(MaxIterationsAction.RETURN_LAST, False), (MaxIterationsAction.RETURN_WITH_FLAG, True)],
)
def test_running_out_of_iterations_returns_the_last(
    action: MaxIterationsAction, stopped_by_max: bool
) -> None:
    write, review, _, _ = writer_and_critic(["a", "b"], ["REVISE", "REVISE"])
    loop = Loop("l", [write, review], until=approved, max_iterations=2, on_max_iterations=action)
    output = Ensemble(loops=[loop]).run()
    assert output.loop_stopped_by_max_iterations("l") is stopped_by_max
    assert output.loop_termination_reason("l") == "max_iterations"
    assert [o.raw for o in output.task_outputs] == ["b", "REVISE"]


def test_throw_raises_with_every_completed_output() -> None:
    write, review, _, _ = writer_and_critic(["a", "b"], ["REVISE", "REVISE"])
    first = Task(description="Research", expected_output="Notes", llm=ScriptedModel(["notes"]))
    loop = Loop("l", [write, review], until=approved, max_iterations=2, on_max_iterations="THROW")
    with pytest.raises(MaxLoopIterationsExceededError) as raised:
        Ensemble(tasks=[first], loops=[loop]).run()
    assert str(raised.value) == "Loop 'l' did not converge after 2 iterations"
    assert [o.raw for o in raised.value.completed_outputs] == ["notes", "b", "REVISE"]


def test_max_iterations_alone_runs_them_all() -> None:
    write, review, writing, _ = writer_and_critic(["a", "b", "c"], ["x", "y", "z"])
    output = Ensemble(loops=[Loop("l", [write, review], max_iterations=3)]).run()
    assert len(writing.prompts) == 3
    assert output.loop_termination_reason("l") == "max_iterations"


def test_output_modes() -> None:
    def run(mode: LoopOutputMode) -> list[str]:
        write, review, _, _ = writer_and_critic(["a", "b"], ["REVISE", "APPROVED"])
        loop = Loop("l", [write, review], until=approved, output_mode=mode)
        return [o.raw for o in Ensemble(loops=[loop]).run().task_outputs]

    assert run(LoopOutputMode.LAST_ITERATION) == ["b", "APPROVED"]
    assert run(LoopOutputMode.FINAL_TASK_ONLY) == ["APPROVED"]
    assert run(LoopOutputMode.ALL_ITERATIONS) == [
        "a\n\n--- iteration 2 ---\n\nb",
        "REVISE\n\n--- iteration 2 ---\n\nAPPROVED",
    ]


def test_the_predicate_sees_the_iteration_and_the_history() -> None:
    seen: list[tuple[int, int, list[str]]] = []

    def until(context: Any) -> bool:
        seen.append((context.iteration, len(context.history), list(context.last_outputs)))
        return bool(context.iteration == 2)

    write, review, _, _ = writer_and_critic(["a", "b"], ["x", "y"])
    Ensemble(loops=[Loop("l", [write, review], until=until)]).run()
    assert seen == [(1, 1, ["write", "critique"]), (2, 2, ["write", "critique"])]


async def test_an_async_predicate_is_awaited() -> None:
    async def until(context: Any) -> bool:
        await asyncio.sleep(0)
        return True

    write, review, _, _ = writer_and_critic(["a"], ["x"])
    output = await Ensemble(loops=[Loop("l", [write, review], until=until)]).arun()
    assert len(output.loop_history("l")) == 1


def test_the_iteration_event_fires_before_the_predicate() -> None:
    order: list[str] = []

    class Listener:
        async def on_loop_iteration_completed(self, event: LoopIterationCompletedEvent) -> None:
            order.append(f"event {event.iteration}: {event.outputs['critique']}")

    def until(context: Any) -> bool:
        order.append(f"predicate {context.iteration}")
        return approved(context)

    write, review, _, _ = writer_and_critic(["a", "b"], ["REVISE", "APPROVED"])
    Ensemble(loops=[Loop("l", [write, review], until=until)], listeners=[Listener()]).run()
    assert order == ["event 1: REVISE", "predicate 1", "event 2: APPROVED", "predicate 2"]


def test_sequential_loops_run_after_the_flat_tasks_and_see_their_context() -> None:
    research = Task(description="Research", expected_output="Notes", llm=ScriptedModel(["N"]))
    write, review, writing, _ = writer_and_critic(["a"], ["APPROVED"])
    loop = Loop("l", [write, review], until=approved, context=[research])
    output = Ensemble(tasks=[research], loops=[loop], workflow=Workflow.SEQUENTIAL).run()
    assert [o.raw for o in output.task_outputs] == ["N", "a", "APPROVED"]
    assert "### Writer" not in writing.prompts[0]
    assert "N" in writing.prompts[0].split("## Task")[0]  # the loop's context, before the task


async def test_under_parallel_a_loop_waits_for_its_context() -> None:
    gate, started = asyncio.Event(), asyncio.Event()

    async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        started.set()
        await gate.wait()
        return "Notes"

    research = Task(description="Research", expected_output="Notes", llm=FunctionModel(slow))
    write, review, writing, _ = writer_and_critic(["a"], ["APPROVED"])
    loop = Loop("l", [write, review], until=approved, context=[research])
    independent = Task(description="Other", expected_output="x", llm=ScriptedModel(["other"]))
    running = asyncio.create_task(
        Ensemble(tasks=[research, independent], loops=[loop], workflow=Workflow.PARALLEL).arun()
    )
    await started.wait()
    assert writing.prompts == []  # the loop waits for research
    gate.set()
    output = await running
    assert sorted(o.raw for o in output.task_outputs) == sorted(["Notes", "other", "a", "APPROVED"])
    assert "Notes" in writing.prompts[0]


async def test_cancelling_mid_iteration_keeps_the_completed_iterations(tmp_path: Path) -> None:
    gate = asyncio.Event()
    calls = 0

    async def critic(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            gate.set()
            await asyncio.Event().wait()  # never answers: the run is cancelled here
        return "REVISE"

    write = Task(
        description="Write", expected_output="x", llm=ScriptedModel(["a", "b"]), name="write"
    )
    review = Task(
        description="Critique",
        expected_output="x",
        llm=FunctionModel(critic),
        context=[write],
        name="critique",
    )
    ensemble = Ensemble(
        loops=[Loop("l", [write, review], max_iterations=3)],
        trace_exporter=JsonTraceExporter(str(tmp_path)),
    )
    running = asyncio.create_task(ensemble.arun())
    await gate.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [saved] = await asyncio.to_thread(lambda: list(tmp_path.glob("*.json")))
    trace = await asyncio.to_thread(load_trace, saved)
    assert [t.final_output for t in trace.task_traces] == ["b", "REVISE"]


class Recorder(MemoryStore):
    """An in-memory store that says what was cleared and evicted."""

    def __init__(self) -> None:
        self.inner = MemoryStore.in_memory()
        self.calls: list[str] = []

    async def store(self, scope: str, entry: MemoryEntry) -> None:
        await self.inner.store(scope, entry)

    async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
        return await self.inner.retrieve(scope, query, max_results)

    async def evict(self, scope: str, policy: Any) -> int:
        self.calls.append(f"evict {scope}")
        return await self.inner.evict(scope, policy)

    async def clear(self, scope: str) -> None:
        self.calls.append(f"clear {scope}")
        await self.inner.clear(scope)


@pytest.mark.parametrize(
    ("mode", "size", "expected"),
    [
        (LoopMemoryMode.ACCUMULATE, None, (0, 0)),
        (LoopMemoryMode.FRESH_PER_ITERATION, None, (2, 0)),
        (LoopMemoryMode.WINDOW, 2, (0, 2)),
    ],
)
def test_memory_modes(mode: LoopMemoryMode, size: int | None, expected: tuple[int, int]) -> None:
    store = Recorder()
    write = Task(
        description="Write",
        expected_output="x",
        llm=ScriptedModel(["a", "b", "c"]),
        memory=["drafts"],
    )
    loop = Loop("l", [write], max_iterations=3, memory_mode=mode, memory_window_size=size)
    Ensemble(loops=[loop], memory_store=store).run()
    clears = [call for call in store.calls if call == "clear drafts"]
    evictions = [call for call in store.calls if call == "evict drafts"]
    assert (len(clears), len(evictions)) == expected


def test_an_unknown_loop_name_says_which_loops_there_are() -> None:
    write, review, _, _ = writer_and_critic(["a"], ["APPROVED"])
    output = Ensemble(loops=[Loop("refine", [write, review], until=approved)]).run()
    with pytest.raises(KeyError, match=r"no loop named 'draft'.*'refine'"):
        output.loop_history("draft")


def test_the_trace_and_the_console_show_the_iterations() -> None:
    import io

    from agentensemble.observability import ConsoleProgress

    stream = io.StringIO()
    write, review, _, _ = writer_and_critic(["a", "b"], ["REVISE", "APPROVED"])
    loop = Loop("refine", [write, review], until=approved, max_iterations=4)
    output = Ensemble(loops=[loop], listeners=[ConsoleProgress(stream, rich=False)]).run()
    assert output.trace is not None
    assert [
        (i.loop_name, i.iteration, i.outputs["critique"]) for i in output.trace.loop_iterations
    ] == [
        ("refine", 1, "REVISE"),
        ("refine", 2, "APPROVED"),
    ]
    assert [t.task_description for t in output.trace.task_traces] == [
        "Write a tagline",
        "Critique the tagline",
    ]
    text = stream.getvalue()
    assert "⟳ loop 'refine' iteration 1/4 done" in text
    assert "⟳ loop 'refine' iteration 2/4 done" in text


def test_review_gates_on_body_tasks_fire_every_iteration() -> None:
    from agentensemble import Review, ReviewHandler

    asked: list[str] = []

    class Approver(ReviewHandler):
        async def review(self, request: Any) -> Any:
            asked.append(request.task_output)
            from agentensemble.review import ReviewDecision

            return ReviewDecision.Continue()

    draft = Task("Draft", llm=ScriptedModel(["one", "two"]), name="draft", review=Review.required())
    Ensemble(loops=[Loop("l", [draft], max_iterations=2)], review_handler=Approver()).run()
    assert asked == ["one", "two"]


async def test_the_runs_deadline_stops_a_loop_keeping_its_iterations() -> None:
    from agentensemble import ExitReason, RunOptions

    calls = 0

    async def slow_after_two(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls > 2:
            await asyncio.Event().wait()  # the run's deadline ends this
        return f"draft {calls}"

    draft = Task("Draft", llm=FunctionModel(slow_after_two), name="draft")
    ensemble = Ensemble(loops=[Loop("l", [draft], max_iterations=5)])
    output = await ensemble.arun(options=RunOptions(timeout=0.5))
    assert output.exit_reason is ExitReason.TIMEOUT
    assert len(output.loop_history("l")) == 2
    assert output.loop_termination_reason("l") is None


# ---- what a review of the first version found ---------------------------------------------


def test_body_tasks_are_checked_like_the_ensembles_tasks() -> None:
    from agentensemble import Review

    llm = ScriptedModel([])
    reviewed = Loop("l", [task("Draft", review=Review.required())])
    with pytest.raises(ValidationError, match="sets review, but the ensemble has no review"):
        Ensemble(loops=[reviewed], llm=llm).run()
    remembering = Loop("l", [task("Draft", memory=["notes"])])
    with pytest.raises(ValidationError, match="memory"):
        Ensemble(loops=[remembering], llm=llm).run()
    shared = task("Shared")
    with pytest.raises(ValidationError, match="'Shared' is in the ensemble's tasks and loops"):
        Ensemble(tasks=[shared], loops=[Loop("l", [shared])], llm=llm).run()
    with pytest.raises(ValidationError, match="'Shared' is in the ensemble's tasks and loops"):
        Ensemble(loops=[Loop("a", [shared]), Loop("b", [shared])], llm=llm).run()
    with pytest.raises(ValidationError, match="Loop name must not contain braces"):
        Loop("{topic}", [task()])
    assert llm.requests == []


def test_a_body_failure_names_the_body_task() -> None:
    from agentensemble import TaskExecutionError

    def broken(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        raise RuntimeError("model down")

    body = Task("Draft the post", llm=FunctionModel(broken), name="draft")
    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(loops=[Loop("l", [body])]).run()
    assert raised.value.task_description == "Draft the post"
    assert str(raised.value).startswith("Task 'Draft the post' failed: ")
    assert str(raised.value).endswith("model down")


async def test_under_fail_fast_a_loop_stops_once_a_sibling_fails() -> None:
    from agentensemble import TaskExecutionError

    loop_running, sibling_failed = asyncio.Event(), asyncio.Event()
    iterations = 0

    async def failing(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        await loop_running.wait()
        raise RuntimeError("sibling broke")

    async def drafting(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal iterations
        iterations += 1
        loop_running.set()
        if iterations == 2:
            await sibling_failed.wait()
        return "draft"

    class Watch:
        async def on_task_failed(self, event: Any) -> None:
            if event.task_description == "Sibling":
                sibling_failed.set()

    sibling = Task("Sibling", llm=FunctionModel(failing))
    body = Task("Draft", llm=FunctionModel(drafting), name="draft")
    never = Loop("l", [body], until=lambda context: False, max_iterations=None)
    ensemble = Ensemble(
        tasks=[sibling], loops=[never], workflow=Workflow.PARALLEL, listeners=[Watch()]
    )
    with pytest.raises(TaskExecutionError, match="sibling broke"):
        await ensemble.arun()
    assert iterations == 2  # the iteration in flight finished; no other started


def test_raw_is_the_last_body_output_when_a_reviewer_ends_the_run_in_the_body() -> None:
    from agentensemble import ExitReason, Review, ReviewHandler
    from agentensemble.review import ReviewDecision

    class ExitOnSecond(ReviewHandler):
        async def review(self, request: Any) -> Any:
            if request.task_output == "two":
                return ReviewDecision.ExitEarly()
            return ReviewDecision.Continue()

    flat = Task("Flat", llm=ScriptedModel(["flat"]))
    body = Task("Draft", llm=ScriptedModel(["one", "two", "three"]), review=Review.required())
    output = Ensemble(
        tasks=[flat],
        loops=[Loop("l", [body], max_iterations=3)],
        review_handler=ExitOnSecond(),
        workflow=Workflow.SEQUENTIAL,
    ).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert output.raw == "two"
    assert output.loop_termination_reason("l") is None
    assert [next(iter(it.values())).raw for it in output.loop_history("l")] == ["one"]


def test_histories_keep_outputs_without_their_traces() -> None:
    write, review, _, _ = writer_and_critic(["a", "b"], ["REVISE", "APPROVED"])
    output = Ensemble(loops=[Loop("l", [write, review], until=approved)]).run()
    assert all(o.trace is None for it in output.loop_history("l") for o in it.values())


def test_a_loop_that_never_started_has_no_reason_yet() -> None:
    from agentensemble import ExitReason, Review, ReviewHandler
    from agentensemble.review import ReviewDecision

    class ExitAtOnce(ReviewHandler):
        async def review(self, request: Any) -> Any:
            return ReviewDecision.ExitEarly()

    flat = Task("Flat", llm=ScriptedModel(["flat"]), review=Review.required())
    write, review, _, _ = writer_and_critic(["a"], ["APPROVED"])
    output = Ensemble(
        tasks=[flat],
        loops=[Loop("l", [write, review], until=approved)],
        review_handler=ExitAtOnce(),
        workflow=Workflow.SEQUENTIAL,
    ).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert output.loop_termination_reason("l") is None
    assert output.loop_history("l") == []
