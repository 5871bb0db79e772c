"""Review gates before and after tasks (BEHAVIOUR 9.1, 9.2, 10): when they fire, what each
decision does, exits at every position, timeouts with each action."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    Ensemble,
    ExitReason,
    OutputParsingError,
    ParallelErrorStrategy,
    Phase,
    Review,
    ReviewDecision,
    ReviewPolicy,
    ReviewRequest,
    ReviewTiming,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolContext,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.errors import ReviewTimeoutError
from agentensemble.observability import (
    EnsembleCompletedEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
    serialize_event,
)
from agentensemble.review import OnTimeoutAction
from tests.review.helpers import Events, Scripted, Silent, asked, echo_model

CONTINUE = ReviewDecision.Continue()


def approve(request: ReviewRequest) -> ReviewDecision:
    return CONTINUE


def three_tasks(
    reviews: Mapping[str, Review] | None = None, before: Mapping[str, Review] | None = None
) -> list[Task[Any]]:
    """Tasks a, b, c (b and c see the previous output); `reviews` maps a name to its review,
    `before` to its before-review."""
    after, gates = reviews or {}, before or {}
    a = Task("a", review=after.get("a"), before_review=gates.get("a"))
    b = Task("b", context=[a], review=after.get("b"), before_review=gates.get("b"))
    c = Task("c", context=[b], review=after.get("c"), before_review=gates.get("c"))
    return [a, b, c]


# ---- when gates fire ---------------------------------------------------------------------

REQUIRED, SKIP = Review.required(), Review.skip()


@pytest.mark.parametrize(
    ("policy", "reviews", "fired"),
    [
        (ReviewPolicy.NEVER, {}, []),
        (None, {}, []),
        (ReviewPolicy.NEVER, {"b": REQUIRED}, ["b"]),
        (ReviewPolicy.NEVER, {"b": SKIP}, []),
        (ReviewPolicy.AFTER_EVERY_TASK, {}, ["a", "b", "c"]),
        (ReviewPolicy.AFTER_EVERY_TASK, {"b": SKIP}, ["a", "c"]),
        (ReviewPolicy.AFTER_EVERY_TASK, {"b": REQUIRED}, ["a", "b", "c"]),
        (ReviewPolicy.AFTER_LAST_TASK, {}, ["c"]),
        (ReviewPolicy.AFTER_LAST_TASK, {"c": SKIP}, []),
        (ReviewPolicy.AFTER_LAST_TASK, {"a": REQUIRED}, ["a", "c"]),
    ],
)
def test_sequential_gates_fire_by_the_task_review_then_the_policy(
    policy: ReviewPolicy | None, reviews: dict[str, Review], fired: list[str]
) -> None:
    handler = Scripted(approve)
    output = Ensemble(
        tasks=three_tasks(reviews),
        llm=echo_model(),
        workflow=Workflow.SEQUENTIAL,
        review_handler=handler,
        review_policy=policy,
    ).run()
    assert handler.reviewed() == fired
    assert output.exit_reason is ExitReason.COMPLETED
    assert {request.timing for request in handler.requests} <= {ReviewTiming.AFTER_EXECUTION}


@pytest.mark.parametrize(
    ("policy", "reviews", "fired"),
    [
        (ReviewPolicy.NEVER, {}, set()),
        (ReviewPolicy.NEVER, {"b": REQUIRED}, {"b"}),
        (ReviewPolicy.AFTER_EVERY_TASK, {}, {"a", "b", "c"}),
        (ReviewPolicy.AFTER_EVERY_TASK, {"a": SKIP}, {"b", "c"}),
    ],
)
def test_parallel_gates_fire_by_the_task_review_then_the_policy(
    policy: ReviewPolicy, reviews: dict[str, Review], fired: set[str]
) -> None:
    handler = Scripted(approve)
    tasks = [Task(name, review=reviews.get(name)) for name in ("a", "b", "c")]
    Ensemble(
        tasks=tasks,
        llm=echo_model(),
        workflow=Workflow.PARALLEL,
        review_handler=handler,
        review_policy=policy,
    ).run()
    assert set(handler.reviewed()) == fired
    assert len(handler.reviewed()) == len(fired)


def test_after_last_task_in_a_parallel_run_is_rejected_as_it_could_never_fire() -> None:
    ensemble = Ensemble(
        tasks=[Task("a"), Task("b")],
        llm=echo_model(),
        workflow=Workflow.PARALLEL,
        review_handler=Scripted(approve),
        review_policy=ReviewPolicy.AFTER_LAST_TASK,
    )
    with pytest.raises(ValidationError, match=r"AFTER_LAST_TASK never fires .* PARALLEL"):
        ensemble.run()


def test_after_last_task_in_phases_reviews_the_last_task_of_a_sequential_last_phase() -> None:
    handler = Scripted(approve)
    first = Phase.of("first", Task("a"), Task("b"))
    last = Phase("last", [Task("c")], after=[first])
    Ensemble(
        phases=[first, last],
        llm=echo_model(),
        review_handler=handler,
        review_policy=ReviewPolicy.AFTER_LAST_TASK,
    ).run()
    assert handler.reviewed() == ["c"]


# ---- decisions ---------------------------------------------------------------------------


def test_an_edit_replaces_the_output_for_downstream_tasks_and_the_final_raw() -> None:
    def edit_a_and_c(request: ReviewRequest) -> ReviewDecision:
        return ReviewDecision.Edit(f"edited {request.task_description}")

    model, events = echo_model(), Events()
    tasks = three_tasks({"a": Review.required(), "c": Review.required()})
    output = Ensemble(
        tasks=tasks, llm=model, review_handler=Scripted(edit_a_and_c), listeners=[events]
    ).run()
    assert [done.raw for done in output.task_outputs] == ["edited a", "done: b", "edited c"]
    assert output.raw == "edited c"
    second_prompt = model.requests[1].messages[1].text or ""
    assert "edited a" in second_prompt
    assert "done: a" not in second_prompt
    assert output.trace is not None
    assert output.trace.task_traces[0].final_output == "edited a"
    decided = [
        event for event in events.of(ReviewDecidedEvent) if isinstance(event, ReviewDecidedEvent)
    ]
    assert [(event.decision, event.revised_output) for event in decided] == [
        ("EDIT", "edited a"),
        ("EDIT", "edited c"),
    ]


class Verdict(BaseModel):
    score: int


def test_an_edit_of_a_typed_task_is_parsed_again() -> None:
    task = Task("Score it", output_type=Verdict, review=Review.required())
    model = echo_model()
    model_answers = Ensemble(
        tasks=[task],
        llm=lambda_model('{"score": 1}'),
        review_handler=Scripted(lambda request: ReviewDecision.Edit('{"score": 9}')),
    ).run()
    assert model_answers.task_outputs[0].parsed(Verdict) == Verdict(score=9)
    assert not model.requests


def test_an_edit_of_a_typed_task_that_does_not_parse_fails_the_task() -> None:
    task = Task("Score it", output_type=Verdict, review=Review.required())
    ensemble = Ensemble(
        tasks=[task],
        llm=lambda_model('{"score": 1}'),
        review_handler=Scripted(lambda request: ReviewDecision.Edit("nine")),
    )
    with pytest.raises(OutputParsingError) as raised:
        ensemble.run()
    assert raised.value.raw_output == "nine"


def lambda_model(answer: str) -> Any:
    from agentensemble import FunctionModel

    return FunctionModel(lambda messages, tools: answer)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_exit_early_after_each_position_keeps_that_task_and_everything_before(
    position: int,
) -> None:
    names = ["a", "b", "c"]

    def exit_at_position(request: ReviewRequest) -> ReviewDecision:
        if request.task_description == names[position]:
            return ReviewDecision.ExitEarly()
        return CONTINUE

    model, events = echo_model(), Events()
    output = Ensemble(
        tasks=three_tasks(),
        llm=model,
        review_handler=Scripted(exit_at_position),
        review_policy=ReviewPolicy.AFTER_EVERY_TASK,
        listeners=[events],
    ).run()
    kept = names[: position + 1]
    assert [done.raw for done in output.task_outputs] == [f"done: {name}" for name in kept]
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert output.is_complete is False
    assert output.raw == f"done: {names[position]}"
    assert asked(model) == kept  # nothing after the exit asked the model
    assert len(events.of(TaskCompleteEvent)) == len(kept)
    assert events.types()[-1] == "ensemble_completed"


@pytest.mark.parametrize("position", [0, 1, 2])
def test_exit_early_before_each_position_runs_nothing_from_there(position: int) -> None:
    names = ["a", "b", "c"]
    tasks = three_tasks(before={names[position]: Review.required("Start it?")})
    handler = Scripted(lambda request: ReviewDecision.ExitEarly())
    model, events = echo_model(), Events()
    output = Ensemble(tasks=tasks, llm=model, review_handler=handler, listeners=[events]).run()
    assert [done.raw for done in output.task_outputs] == [f"done: {n}" for n in names[:position]]
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert asked(model) == names[:position]
    assert len(events.of(TaskStartEvent)) == position  # the reviewed task never started
    assert handler.requests[0].timing is ReviewTiming.BEFORE_EXECUTION
    assert handler.requests[0].task_output is None
    assert handler.requests[0].prompt == "Start it?"


def test_an_edit_before_a_task_counts_as_continue() -> None:
    model = echo_model()
    output = Ensemble(
        tasks=[Task("write", before_review=Review.required())],
        llm=model,
        review_handler=Scripted(lambda request: ReviewDecision.Edit("something else")),
    ).run()
    assert output.raw == "done: write"
    assert asked(model) == ["write"]


def test_a_before_review_fires_before_the_task_start_event() -> None:
    events = Events()
    Ensemble(
        tasks=[Task("write", before_review=Review.required(), review=Review.required())],
        llm=echo_model(),
        review_handler=Scripted(approve),
        listeners=[events],
    ).run()
    kinds = [kind for kind in events.types() if kind.startswith(("review", "task"))]
    assert kinds == [
        "review_requested",
        "review_decided",
        "task_started",
        "task_input",
        "review_requested",
        "review_decided",
        "task_completed",
    ]


def test_gates_work_on_deterministic_handler_tasks() -> None:
    task = Task("compute", handler=lambda context: "42", review=Review.required())
    output = Ensemble(
        tasks=[task], review_handler=Scripted(lambda request: ReviewDecision.Edit("43"))
    ).run()
    assert output.raw == "43"


def test_a_sync_handler_runs_in_a_thread() -> None:
    import threading

    threads: list[str] = []

    class SyncHandler:
        def review(self, request: ReviewRequest) -> ReviewDecision:
            threads.append(threading.current_thread().name)
            return ReviewDecision.Edit("from a thread")

    output = Ensemble(
        tasks=[Task("a", review=Review.required())],
        llm=echo_model(),
        review_handler=SyncHandler(),  # type: ignore[arg-type]  # duck-typed handlers work
    ).run()
    assert output.raw == "from a thread"
    assert threads[0] != threading.main_thread().name


def test_a_handler_that_returns_something_else_fails_the_task_clearly() -> None:
    class Wrong:
        async def review(self, request: ReviewRequest) -> object:
            return "yes"

    ensemble = Ensemble(
        tasks=[Task("a", review=Review.required())],
        llm=echo_model(),
        review_handler=Wrong(),  # type: ignore[arg-type]
    )
    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()
    assert "returned 'yes'" in str(raised.value)
    assert isinstance(raised.value.__cause__, ValidationError)


# ---- parallel runs -----------------------------------------------------------------------


async def test_a_parallel_exit_lets_running_tasks_finish_and_skips_the_rest() -> None:
    other_done = asyncio.Event()

    def slow_sibling(context: object) -> str:
        return "sibling finished"

    async def exit_once_the_sibling_finished(request: ReviewRequest) -> ReviewDecision:
        await other_done.wait()
        return ReviewDecision.ExitEarly()

    class WaitsForSibling(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            self.requests.append(request)
            return await exit_once_the_sibling_finished(request)

    class SiblingWatcher(Events):
        async def on_event(self, event: Any) -> None:
            await super().on_event(event)
            if event.type == "task_completed" and event.task_description == "sibling":
                other_done.set()

    reviewed = Task("reviewed", review=Review.required())
    dependent = Task("dependent", context=[reviewed])
    sibling = Task("sibling", handler=slow_sibling)
    model, events = echo_model(), SiblingWatcher()
    output = await Ensemble(
        tasks=[reviewed, dependent, sibling],
        llm=model,
        workflow=Workflow.PARALLEL,
        review_handler=WaitsForSibling(approve),
        listeners=[events],
    ).arun()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert {done.raw for done in output.task_outputs} == {"done: reviewed", "sibling finished"}
    assert output.output_for(dependent) is None
    assert asked(model) == ["reviewed"]


async def test_parallel_gates_take_turns() -> None:
    active, most = 0, 0
    ran = {name: asyncio.Event() for name in "abcd"}

    def work(name: str) -> Any:
        async def handler(context: object) -> str:
            ran[name].set()
            return name

        return handler

    class Counting(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            nonlocal active, most
            active += 1
            most = max(most, active)
            self.requests.append(request)
            for event in ran.values():  # meanwhile every task finished its work
                await event.wait()
            active -= 1
            return CONTINUE

    handler = Counting(approve)
    await Ensemble(
        tasks=[Task(name, handler=work(name)) for name in ran],
        workflow=Workflow.PARALLEL,
        review_handler=handler,
        review_policy=ReviewPolicy.AFTER_EVERY_TASK,
    ).arun()
    assert len(handler.requests) == 4
    assert most == 1


def test_a_parallel_exit_wins_over_a_failure_and_later_gates_are_not_asked() -> None:
    sibling_ran = asyncio.Event()

    async def sibling(context: object) -> str:
        sibling_ran.set()
        return "sibling"

    async def broken(context: object) -> str:
        await sibling_ran.wait()
        raise RuntimeError("broken")

    class ExitOnceTheSiblingRan(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            self.requests.append(request)
            await sibling_ran.wait()  # both are running: the other gate waits for its turn
            return ReviewDecision.ExitEarly()

    handler = ExitOnceTheSiblingRan(approve)
    output = Ensemble(
        tasks=[
            Task("a", review=Review.required()),
            Task("sibling", handler=sibling, review=Review.required()),
            Task("boom", handler=broken),
        ],
        llm=echo_model(),
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
        review_handler=handler,
    ).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert len(handler.requests) == 1  # the other gate saw the run ending and passed
    assert sorted(done.raw for done in output.task_outputs) == ["done: a", "sibling"]


# ---- timeouts ----------------------------------------------------------------------------

QUICK = timedelta(milliseconds=20)


def test_a_timeout_with_continue_keeps_the_output_and_goes_on() -> None:
    events = Events()
    tasks = three_tasks({"a": Review(timeout=QUICK, on_timeout=OnTimeoutAction.CONTINUE)})
    output = Ensemble(
        tasks=tasks, llm=echo_model(), review_handler=Silent(), listeners=[events]
    ).run()
    assert output.exit_reason is ExitReason.COMPLETED
    assert [done.raw for done in output.task_outputs] == ["done: a", "done: b", "done: c"]
    timed_out = events.of(ReviewTimedOutEvent)
    assert len(timed_out) == 1
    assert timed_out[0].action == "CONTINUE"
    assert not events.of(ReviewDecidedEvent)
    assert serialize_event(timed_out[0])["type"] == "review_timed_out"


def test_a_timeout_with_exit_early_ends_the_run_with_timeout_keeping_the_task() -> None:
    tasks = three_tasks({"b": Review(timeout=QUICK)})  # on_timeout defaults to EXIT_EARLY
    output = Ensemble(tasks=tasks, llm=echo_model(), review_handler=Silent()).run()
    assert output.exit_reason is ExitReason.TIMEOUT
    assert [done.raw for done in output.task_outputs] == ["done: a", "done: b"]


def test_a_timeout_with_fail_raises_with_the_completed_outputs() -> None:
    tasks = three_tasks({"b": Review(timeout=QUICK, on_timeout="FAIL")})
    events = Events()
    ensemble = Ensemble(tasks=tasks, llm=echo_model(), review_handler=Silent(), listeners=[events])
    with pytest.raises(ReviewTimeoutError) as raised:
        ensemble.run()
    error = raised.value
    assert [done.raw for done in error.completed_outputs] == ["done: a"]
    assert error.task_description == "b"
    assert error.timeout == QUICK
    assert str(error) == "Review gate timed out after 20ms waiting for a decision on task: b"
    assert [event.task_description for event in events.of(TaskFailedEvent)] == ["b"]
    completed = events.of(EnsembleCompletedEvent)[0]
    assert completed.exit_reason == "ERROR"


def test_a_zero_timeout_waits_for_the_decision() -> None:
    handler = Scripted(approve)
    Ensemble(
        tasks=[Task("a", review=Review(timeout=0))], llm=echo_model(), review_handler=handler
    ).run()
    assert handler.requests[0].timeout == timedelta(0)


def test_the_time_a_reviewer_takes_does_not_count_against_the_task_timeout() -> None:
    from agentensemble.execution._deadlines import Deadlines

    async def check() -> None:
        deadlines, child = Deadlines(), None
        async with asyncio.timeout(60) as limit:  # noqa: ASYNC100 (only its schedule is read)
            with deadlines.registered(limit):
                child = Deadlines(deadlines)
                before = limit.when()
                with child.paused():  # a worker's review suspends its caller's deadline
                    assert limit.when() is None
                    with deadlines.paused():
                        assert limit.when() is None
                    assert limit.when() is None
                after = limit.when()
                assert before is not None
                assert after is not None
                assert after >= before
        assert child is not None

    asyncio.run(check())


def test_a_deadline_registered_while_a_person_decides_starts_when_they_have() -> None:
    from agentensemble.execution._deadlines import Deadlines

    async def check() -> None:
        deadlines = Deadlines()
        with contextlib.ExitStack() as review:
            review.enter_context(deadlines.paused())
            async with asyncio.timeout(60) as limit:  # noqa: ASYNC100 (only its schedule is read)
                with deadlines.registered(limit):
                    assert limit.when() is None  # suspended as it is registered
                    review.close()  # the decision came
                    resumed = limit.when()
                    assert resumed is not None
                    assert resumed > asyncio.get_running_loop().time() + 59

    asyncio.run(check())


# ---- events ------------------------------------------------------------------------------


def test_review_events_carry_the_request_and_go_on_the_wire() -> None:
    events = Events()
    Ensemble(
        tasks=[Task("a", review=Review(prompt="Is it right?", required_role="editor"))],
        llm=echo_model(),
        review_handler=Scripted(approve),
        listeners=[events],
    ).run()
    requested = serialize_event(events.of(ReviewRequestedEvent)[0])
    decided = serialize_event(events.of(ReviewDecidedEvent)[0])
    assert requested["reviewId"] == decided["reviewId"]
    assert requested["taskId"] == events.of(TaskStartEvent)[0].task_id
    assert {key: requested[key] for key in ("taskOutput", "timing", "prompt")} == {
        "taskOutput": "done: a",
        "timing": "AFTER_EXECUTION",
        "prompt": "Is it right?",
    }
    assert requested["timeoutMs"] == 300_000
    assert requested["onTimeout"] == "EXIT_EARLY"
    assert requested["requiredRole"] == "editor"
    assert decided["decision"] == "CONTINUE"


# ---- reviews take turns, and an exit holds for every task not yet started -----------------


async def test_a_task_waiting_at_its_before_gate_does_not_start_after_an_exit() -> None:
    sibling_ran = asyncio.Event()

    async def sibling(context: object) -> str:
        sibling_ran.set()
        return "sibling"

    class ExitWhenTheSiblingRan(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            self.requests.append(request)
            await sibling_ran.wait()  # meanwhile the other gate queued for its turn
            return ReviewDecision.ExitEarly()

    handler, model = ExitWhenTheSiblingRan(approve), echo_model()
    output = await Ensemble(
        tasks=[
            Task("a", before_review=Review.required()),
            Task("b", before_review=Review.required()),
            Task("sibling", handler=sibling),
        ],
        llm=model,
        workflow=Workflow.PARALLEL,
        review_handler=handler,
    ).arun()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert len(handler.requests) == 1
    assert not model.requests  # neither gated task started
    assert [done.raw for done in output.task_outputs] == ["sibling"]


def test_waiting_for_another_review_does_not_count_against_the_task_timeout() -> None:
    from agentensemble.review import ReviewHandler

    tasks = [Task(name, timeout=0.05, review=Review.required()) for name in ("a", "b")]
    output = Ensemble(
        tasks=tasks,
        llm=echo_model(),
        workflow=Workflow.PARALLEL,
        review_handler=ReviewHandler.auto_approve_with_delay(0.2),  # a slow person
    ).run()
    assert output.exit_reason is ExitReason.COMPLETED
    assert len(output.task_outputs) == 2


def test_a_review_inside_a_delegated_worker_does_not_count_against_its_callers_timeout() -> None:
    from agentensemble.review import ReviewHandler

    @tool
    async def guarded(context: ToolContext) -> str:
        """Ask a person before acting."""
        await context.request_approval("May I?")
        return "acted"

    worker = Agent(
        "Worker",
        "Act",
        llm=ScriptedModel([tool_call("guarded"), "worker done"]),
        tools=[guarded],
    )
    caller = Agent(
        "Lead",
        "Lead",
        llm=ScriptedModel(
            [tool_call("delegate", agent_role="Worker", task_description="Act"), "lead done"]
        ),
        allow_delegation=True,
    )
    output = Ensemble(
        tasks=[Task("Lead the work", agent=caller, timeout=0.05)],  # the worker's review is slower
        agents=[caller, worker],
        review_handler=ReviewHandler.auto_approve_with_delay(0.2),
    ).run()
    assert output.raw == "lead done"


async def test_a_review_timeout_starts_once_the_review_has_its_turn() -> None:
    first_review_began = asyncio.Event()

    async def after_the_first_review_began(context: object) -> str:
        await first_review_began.wait()
        return "b"

    class SlowOnTheFirst(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            self.requests.append(request)
            if request.task_description == "a":
                first_review_began.set()
                await asyncio.sleep(0.2)  # a person thinking; "b" queues meanwhile
            return CONTINUE

    handler = SlowOnTheFirst(approve)
    output = await Ensemble(
        tasks=[
            Task("a", handler=lambda context: "a", review=Review(timeout=5)),
            Task("b", handler=after_the_first_review_began, review=Review(timeout=0.05)),
        ],
        workflow=Workflow.PARALLEL,
        review_handler=handler,
    ).arun()
    assert output.exit_reason is ExitReason.COMPLETED  # "b" was asked, not timed out
    assert handler.reviewed() == ["a", "b"]


def test_in_phases_an_exit_wins_over_a_failure_too() -> None:
    sibling_ran = asyncio.Event()

    async def broken(context: object) -> str:
        sibling_ran.set()
        raise RuntimeError("broken")

    class ExitOnceItBroke(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            self.requests.append(request)
            await sibling_ran.wait()
            return ReviewDecision.ExitEarly()

    phase = Phase(
        "only",
        [Task("a", review=Review.required()), Task("boom", handler=broken)],
        workflow=Workflow.PARALLEL,
    )
    output = Ensemble(
        phases=[phase],
        llm=echo_model(),
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
        review_handler=ExitOnceItBroke(approve),
    ).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert [done.raw for done in output.task_outputs] == ["done: a"]


def test_a_blocked_sync_handler_holds_no_thread_of_the_run() -> None:
    import threading

    from agentensemble import tool, tool_call

    released = threading.Event()

    class StuckPerson:
        def review(self, request: ReviewRequest) -> ReviewDecision:
            released.wait()
            return CONTINUE

    @tool
    def sync_tool() -> str:
        """Needs a thread of the run."""
        return "ran"

    from agentensemble import Agent, ScriptedModel

    model = ScriptedModel([tool_call("sync_tool"), "done"])
    agent = Agent("Worker", "Work", llm=model, tools=[sync_tool])
    try:
        output = Ensemble(
            tasks=[
                Task(
                    "a",
                    handler=lambda context: "a",
                    review=Review(timeout=0.02, on_timeout="CONTINUE"),
                ),
                Task("b", agent=agent),
            ],
            review_handler=StuckPerson(),  # type: ignore[arg-type]
            max_sync_threads=1,
        ).run()
    finally:
        released.set()
    assert output.raw == "done"
    assert model.requests[1].messages[-1].text == "ran"


def test_a_review_that_ends_without_a_decision_still_ends_on_the_wire() -> None:

    @tool(timeout=0.02)
    async def impatient(context: ToolContext) -> str:
        """Asks, but gives up first."""
        await context.request_approval("go?", timeout=0)
        return "went"

    events = Events()
    model = ScriptedModel([tool_call("impatient"), "gave up"])
    agent = Agent("Worker", "Work", llm=model, tools=[impatient])
    Ensemble(tasks=[Task("a", agent=agent)], review_handler=Silent(), listeners=[events]).run()
    decided = events.of(ReviewDecidedEvent)
    assert [event.decision for event in decided] == ["NONE"]
    requested = events.of(ReviewRequestedEvent)
    assert decided[0].review_id == requested[0].review_id
