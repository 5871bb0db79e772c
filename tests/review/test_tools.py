"""Tool approvals and the `human_input` tool (BEHAVIOUR 7.6): a tool asks the ensemble's
review handler during a task, through `ToolContext`."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    ExitReason,
    HumanInputTool,
    ReviewDecision,
    ReviewRequest,
    ReviewTiming,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolContext,
    tool,
    tool_call,
)
from agentensemble.observability import ReviewRequestedEvent, TaskFailedEvent, TaskStartEvent
from agentensemble.review import ExitEarlyRequested, OnTimeoutAction, ReviewTimeoutError
from tests.review.helpers import Events, Scripted, Silent

written: dict[str, str] = {}


@tool
async def save_note(context: ToolContext, name: str, text: str) -> str:
    """Save a note (asks a reviewer first)."""
    decision = await context.request_approval(f"Save note '{name}': {text}", require_handler=True)
    if isinstance(decision, ReviewDecision.ExitEarly):
        return f"Note save rejected by reviewer: {name}"
    if isinstance(decision, ReviewDecision.Edit):
        text = decision.revised_output
    written[name] = text
    return f"saved {name}"


@tool
async def polite(context: ToolContext) -> str:
    """Ask for approval when someone can give it."""
    decision = await context.request_approval("Do the polite thing")
    return decision.kind


def saving_agent(*replies: str) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([tool_call("save_note", name="todo", text="buy milk"), *replies])
    return Agent("Clerk", "Keep notes", llm=model, tools=[save_note, polite]), model


def tool_result_seen(model: ScriptedModel, request_index: int = 1) -> str:
    return model.requests[request_index].messages[-1].text or ""


@pytest.fixture(autouse=True)
def _clear_notes() -> None:
    written.clear()


def test_a_tool_that_requires_approval_fails_the_run_without_a_handler() -> None:
    agent, model = saving_agent("never reached")
    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(tasks=[Task("Note it", agent=agent)]).run()
    assert (
        "Tool 'save_note' requires approval but no ReviewHandler is configured on the "
        "ensemble. Add review_handler=ReviewHandler.console() to the Ensemble."
    ) in str(raised.value)
    assert len(model.requests) == 1  # the error was not shown to the model
    assert not written


def test_an_approved_call_runs_and_the_request_describes_it() -> None:
    agent, _ = saving_agent("Saved.")
    handler = Scripted(lambda request: ReviewDecision.Continue())
    output = Ensemble(tasks=[Task("Note it", agent=agent)], review_handler=handler).run()
    assert output.raw == "Saved."
    assert written == {"todo": "buy milk"}
    request = handler.requests[0]
    assert request.timing is ReviewTiming.DURING_EXECUTION
    assert request.tool_name == "save_note"
    assert request.task_output == "Save note 'todo': buy milk"
    assert request.task_description == "Note it"
    assert request.timeout == timedelta(minutes=5)
    assert request.on_timeout is OnTimeoutAction.EXIT_EARLY


def test_an_edit_replaces_the_tool_input() -> None:
    agent, _ = saving_agent("Saved.")
    handler = Scripted(lambda request: ReviewDecision.Edit("buy oat milk"))
    Ensemble(tasks=[Task("Note it", agent=agent)], review_handler=handler).run()
    assert written == {"todo": "buy oat milk"}


def test_a_rejection_goes_back_to_the_model_as_the_tool_result() -> None:
    agent, model = saving_agent("I could not save it.")
    handler = Scripted(lambda request: ReviewDecision.ExitEarly())
    output = Ensemble(tasks=[Task("Note it", agent=agent)], review_handler=handler).run()
    assert output.exit_reason is ExitReason.COMPLETED  # the tool decides what a refusal means
    assert tool_result_seen(model) == "Note save rejected by reviewer: todo"
    assert not written


def test_without_require_handler_a_tool_is_approved_when_nobody_can_review() -> None:
    model = ScriptedModel([tool_call("polite"), "ok"])
    agent = Agent("Clerk", "Keep notes", llm=model, tools=[polite])
    Ensemble(tasks=[Task("Be polite", agent=agent)]).run()
    assert tool_result_seen(model) == "CONTINUE"


def test_a_handler_failure_during_a_tool_fails_the_run_instead_of_reaching_the_model() -> None:
    class Broken(Scripted):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            raise RuntimeError("review service down")

    agent, model = saving_agent("never reached")
    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(
            tasks=[Task("Note it", agent=agent)],
            review_handler=Broken(lambda request: ReviewDecision.Continue()),
        ).run()
    assert "Review handler failed: review service down" in str(raised.value)
    assert isinstance(raised.value.__cause__, Exception)
    assert len(model.requests) == 1


def test_an_approval_that_times_out_with_fail_fails_the_run() -> None:
    @tool
    async def strict(context: ToolContext) -> str:
        """Needs an answer."""
        await context.request_approval("go?", timeout=0.02, on_timeout="FAIL")
        return "went"

    model = ScriptedModel([tool_call("strict"), "done"])
    agent = Agent("Clerk", "Keep notes", llm=model, tools=[strict])
    with pytest.raises(ReviewTimeoutError, match="waiting for a decision on task: Go"):
        Ensemble(tasks=[Task("Go", agent=agent)], review_handler=Silent()).run()


def test_tools_see_whether_someone_can_review() -> None:
    seen: list[bool] = []

    @tool
    def probe(context: ToolContext) -> str:
        """Look."""
        seen.append(context.can_request_review)
        return "looked"

    for handler in (None, Scripted(lambda request: ReviewDecision.Continue())):
        model = ScriptedModel([tool_call("probe"), "done"])
        agent = Agent("Clerk", "Look", llm=model, tools=[probe])
        Ensemble(tasks=[Task("Look", agent=agent)], review_handler=handler).run()
    assert seen == [False, True]


# ---- human_input -------------------------------------------------------------------------


def asking_agent(*replies: str) -> tuple[Agent, ScriptedModel]:
    question = tool_call("human_input", question="Which colour?")
    model = ScriptedModel([question, *replies])
    return Agent("Designer", "Design", llm=model, tools=[HumanInputTool()]), model


def test_human_input_without_a_handler_tells_the_agent_to_use_its_judgment() -> None:
    agent, model = asking_agent("Blue, then.")
    Ensemble(tasks=[Task("Pick a colour", agent=agent)]).run()
    assert tool_result_seen(model) == (
        "No reviewer is available. Please proceed with your best judgment."
    )


@pytest.mark.parametrize(
    ("decision", "seen"),
    [
        (ReviewDecision.Continue(), "Understood. Please continue."),
        (ReviewDecision.Edit("Green"), "Green"),
    ],
)
def test_human_input_answers(decision: ReviewDecision, seen: str) -> None:
    agent, model = asking_agent("Done.")
    handler = Scripted(lambda request: decision)
    Ensemble(tasks=[Task("Pick a colour", agent=agent)], review_handler=handler).run()
    assert tool_result_seen(model) == seen
    request = handler.requests[0]
    assert request.task_output == "Which colour?"
    assert request.tool_name == "human_input"
    assert request.on_timeout is OnTimeoutAction.CONTINUE


def test_human_input_exit_early_ends_the_run_keeping_what_completed() -> None:
    agent, model = asking_agent("never reached")
    first = Task("Brief", handler=lambda context: "the brief")
    events = Events()
    output = Ensemble(
        tasks=[first, Task("Pick a colour", agent=agent), Task("Paint", agent=agent)],
        review_handler=Scripted(lambda request: ReviewDecision.ExitEarly()),
        listeners=[events],
    ).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert [done.raw for done in output.task_outputs] == ["the brief"]
    assert len(model.requests) == 1
    failed = events.of(TaskFailedEvent)
    assert [event.task_description for event in failed] == ["Pick a colour"]
    assert failed[0].error_type == ExitEarlyRequested.__name__
    assert failed[0].reason == "Human reviewer requested early exit via HumanInputTool"


def test_human_input_that_nobody_answers_continues_by_default() -> None:
    agent = Agent(
        "Designer",
        "Design",
        llm=ScriptedModel([tool_call("human_input", question="Which?"), "Done."]),
        tools=[HumanInputTool(timeout=timedelta(milliseconds=20))],
    )
    events = Events()
    output = Ensemble(
        tasks=[Task("Pick", agent=agent)], review_handler=Silent(), listeners=[events]
    ).run()
    assert output.raw == "Done."
    assert [event.timing for event in events.of(ReviewRequestedEvent)] == ["DURING_EXECUTION"]


def test_human_input_that_times_out_with_exit_early_ends_with_timeout() -> None:
    agent = Agent(
        "Designer",
        "Design",
        llm=ScriptedModel([tool_call("human_input", question="Which?"), "Done."]),
        tools=[HumanInputTool(timeout=0.02, on_timeout="EXIT_EARLY")],
    )
    output = Ensemble(tasks=[Task("Pick", agent=agent)], review_handler=Silent()).run()
    assert output.exit_reason is ExitReason.TIMEOUT
    assert output.task_outputs == ()


def test_human_input_exit_in_a_delegated_worker_ends_the_whole_run() -> None:
    worker, _ = asking_agent("never reached")
    lead_model = ScriptedModel(
        [tool_call("delegate", agent_role="Designer", task_description="Pick")]
    )
    lead = Agent("Lead", "Lead", llm=lead_model, allow_delegation=True)
    events = Events()
    output = Ensemble(
        tasks=[Task("Plan", agent=lead)],
        agents=[worker],
        review_handler=Scripted(lambda request: ReviewDecision.ExitEarly()),
        listeners=[events],
    ).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert output.task_outputs == ()
    requested = events.of(ReviewRequestedEvent)[0]
    lead_task = events.of(TaskStartEvent)[0]
    assert requested.parent_task_id == lead_task.task_id  # asked inside the delegated worker
