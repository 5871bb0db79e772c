"""Workflow.HIERARCHICAL: the manager, delegate_task, constraints and policies on a
researcher -> writer -> reviewer team (BEHAVIOUR 3.5, 3.6, 9.3, 9.4)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    ConstraintViolationError,
    DelegationPolicyContext,
    DelegationPolicyResult,
    DelegationRequest,
    DelegationStatus,
    Ensemble,
    FunctionModel,
    HierarchicalConstraints,
    ManagerPromptContext,
    MaxIterationsExceededError,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolConfigurationError,
    ToolResultMessage,
    ValidationError,
    Workflow,
    tool_call,
)
from agentensemble.observability import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    ExecutionTrace,
    TaskStartEvent,
    serialize_event,
)

from .helpers import Recorder, text_of, worker_model

ROLES = ("Researcher", "Writer", "Reviewer")


def team(**settings: Any) -> tuple[Ensemble, Recorder]:
    """Three workers, one task each, under a manager whose replies are `settings["manager"]`."""
    workers = worker_model()
    agents = [Agent(role, f"{role} goal", llm=workers) for role in ROLES]
    tasks = [
        Task("Research the topic", agent=agents[0]),
        Task("Write the article", agent=agents[1]),
        Task("Review the article", agent=agents[2]),
    ]
    recorder = Recorder()
    manager = settings.pop("manager")
    ensemble = Ensemble(
        tasks=tasks,
        workflow=Workflow.HIERARCHICAL,
        manager_llm=ScriptedModel(manager),
        listeners=[recorder],
        **settings,
    )
    return ensemble, recorder


def delegate(role: str, description: str = "Do your part") -> Any:
    return tool_call("delegate_task", agent_role=role, task_description=description)


def tool_results(ensemble: Ensemble) -> list[str]:
    """What the manager was told for each delegate_task call, in order."""
    model = ensemble.manager_model
    assert isinstance(model, ScriptedModel)
    last = model.requests[-1].messages
    return [message.text for message in last if isinstance(message, ToolResultMessage)]


def test_the_manager_delegates_to_each_worker_and_synthesizes() -> None:
    ensemble, recorder = team(
        manager=[
            delegate("Researcher", "Find three facts"),
            delegate("Writer", "Write it up"),
            delegate("Reviewer", "Check it"),
            "Final: facts, article, review",
        ]
    )
    output = ensemble.run()
    assert output.raw == "Final: facts, article, review"
    assert [o.agent_role for o in output.task_outputs] == [*ROLES, "Manager"]
    assert [o.raw for o in output.task_outputs[:3]] == [
        "Researcher did: Find three facts",
        "Writer did: Write it up",
        "Reviewer did: Check it",
    ]
    assert tool_results(ensemble) == [o.raw for o in output.task_outputs[:3]]
    assert output.task_outputs[0].trace is not None
    assert output.task_outputs[0].trace.expected_output == "Complete the assigned task thoroughly"
    assert recorder.log == [
        ("task_start", "Manager"),
        ("started", "Manager", "Researcher"),
        ("task_start", "Researcher"),
        ("task_complete", "Researcher"),
        ("completed", "Manager", "Researcher"),
        ("started", "Manager", "Writer"),
        ("task_start", "Writer"),
        ("task_complete", "Writer"),
        ("completed", "Manager", "Writer"),
        ("started", "Manager", "Reviewer"),
        ("task_start", "Reviewer"),
        ("task_complete", "Reviewer"),
        ("completed", "Manager", "Reviewer"),
        ("task_complete", "Manager"),
    ]


class Verdict(BaseModel):
    approved: bool
    summary: str


def test_the_managers_final_answer_is_parsed_against_the_last_tasks_output_type() -> None:
    workers = worker_model()
    writer = Agent("Writer", "Write", llm=workers)
    reviewer = Agent("Reviewer", "Review", llm=workers)
    manager = ScriptedModel(
        [
            delegate("Writer", "Write it"),
            "Looks good overall.",  # not JSON: the manager is asked again, as any task is
            '{"approved": true, "summary": "Writer did it"}',
        ]
    )
    ensemble = Ensemble(
        tasks=[
            Task("Write the article", agent=writer),
            Task("Approve it", agent=reviewer, output_type=Verdict),
        ],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
    )
    output = ensemble.run()
    final = output.task_outputs[-1]
    assert final.agent_role == "Manager"
    assert final.parsed_output == Verdict(approved=True, summary="Writer did it")
    assert "approved" in " ".join(map(text_of, manager.requests[0].messages))  # schema asked
    assert len(manager.requests) == 3


def test_events_are_correlated_by_delegation_id_and_task_ids() -> None:
    ensemble, recorder = team(manager=[delegate("Writer"), "done"])
    ensemble.run()
    manager_start, worker_start = recorder.of(TaskStartEvent)
    assert isinstance(manager_start, TaskStartEvent)
    assert isinstance(worker_start, TaskStartEvent)
    (started,) = recorder.of(DelegationStartedEvent)
    (completed,) = recorder.of(DelegationCompletedEvent)
    assert isinstance(started, DelegationStartedEvent)
    assert isinstance(completed, DelegationCompletedEvent)
    assert started.delegation_id == completed.delegation_id == worker_start.task_id
    assert started.task_id == completed.task_id == manager_start.task_id
    assert worker_start.parent_task_id == manager_start.task_id
    assert manager_start.parent_task_id is None
    assert (manager_start.task_index, manager_start.total_tasks) == (1, 1)
    assert started.delegation_depth == 1
    assert (started.priority, started.scope) == ("NORMAL", {})
    assert started.tool_call_id is not None
    assert serialize_event(started)["toolCallId"] == started.tool_call_id
    assert completed.status == DelegationStatus.SUCCESS
    assert completed.raw_output == "Writer did: Do your part"


def test_the_manager_prompts_follow_the_default_strategy() -> None:
    ensemble, _ = team(manager=["nothing to do"])
    ensemble.run()
    model = ensemble.manager_model
    assert isinstance(model, ScriptedModel)
    request = model.requests[0]
    system, user = text_of(request.messages[0]), text_of(request.messages[1])
    assert system.startswith(
        "You are Manager.\nYou have access to the following worker agents:\n\n"
        "1. Researcher\n   Goal: Researcher goal\n\n2. Writer\n   Goal: Writer goal\n\n"
        "3. Reviewer\n   Goal: Reviewer goal\n\nUse the delegate_task tool to assign work to "
        "your team members."
    )
    assert "\n\nYour personal goal is: Coordinate worker agents to complete all tasks" in system
    assert user.startswith(
        "## Task\nYou must coordinate your team to complete the following tasks:\n\n"
        "Task 1: Research the topic\nExpected output: Produce a complete and accurate "
        "response to the task.\n\nTask 2: Write the article\n"
    )
    assert user.endswith(
        "## Expected Output\nA comprehensive final response synthesizing the outputs of all "
        "delegated tasks"
    )
    assert [spec.name for spec in request.tools] == ["delegate_task"]
    assert request.tools[0].parameters["required"] == ["agent_role", "task_description"]


def test_odd_spacing_and_case_find_the_worker() -> None:
    ensemble, _ = team(manager=[delegate("  wRITER "), "done"])
    output = ensemble.run()
    assert [o.agent_role for o in output.task_outputs] == ["Writer", "Manager"]


@pytest.mark.parametrize(
    ("arguments", "told"),
    [
        (
            {"agent_role": "Editor", "task_description": "x"},
            "No agent found with role 'Editor'. Available roles: [Researcher, Writer, Reviewer]",
        ),
        (
            {"agent_role": " ", "task_description": "x"},
            "Error: agent_role must not be null or blank.",
        ),
        (
            {"agent_role": "Writer", "task_description": "  "},
            "Error: task_description must not be null or blank.",
        ),
        ({"task_description": "x"}, "Error: agent_role must not be null or blank."),
    ],
)
def test_bad_arguments_are_told_to_the_manager_and_the_run_goes_on(
    arguments: dict[str, str], told: str
) -> None:
    ensemble, recorder = team(manager=[tool_call("delegate_task", **arguments), "answered"])
    output = ensemble.run()
    assert output.raw == "answered"
    assert tool_results(ensemble) == [told]
    assert recorder.log[1:-1] == [("failed", "Manager", told)]
    (failed,) = recorder.of(DelegationFailedEvent)
    assert isinstance(failed, DelegationFailedEvent)
    assert failed.error_type is None  # refused, not a worker that failed
    assert failed.status == DelegationStatus.FAILURE
    assert failed.errors == (told,)
    assert output.trace is not None
    (entry,) = output.trace.task_traces[-1].delegations
    assert (entry.status, entry.error, entry.worker_trace) == ("FAILURE", told, None)


def test_stages_order_the_workers() -> None:
    constraints = HierarchicalConstraints(required_stages=[["researcher"], ["Writer", "Reviewer"]])
    ensemble, _ = team(
        hierarchical_constraints=constraints,
        manager=[delegate("Writer"), delegate("Researcher"), delegate("Writer"), "done"],
    )
    output = ensemble.run()
    assert tool_results(ensemble) == [
        "Delegation rejected by policy: Worker 'Writer' cannot be delegated to yet: stage 0 "
        "worker 'Researcher' has not yet completed. All workers in earlier stages must "
        "complete before this stage can begin.",
        "Researcher did: Do your part",
        "Writer did: Do your part",
    ]
    assert [o.agent_role for o in output.task_outputs] == ["Researcher", "Writer", "Manager"]


def test_caps_count_approved_attempts() -> None:
    constraints = HierarchicalConstraints(
        max_calls_per_worker={"Researcher": 1}, global_max_delegations=2
    )
    ensemble, recorder = team(
        hierarchical_constraints=constraints,
        manager=[
            delegate("Researcher"),
            delegate("researcher"),
            delegate("Writer"),
            delegate("Reviewer"),
            "done",
        ],
    )
    ensemble.run()
    assert tool_results(ensemble)[1:] == [
        "Delegation rejected by policy: Worker 'Researcher' has reached its per-worker "
        "delegation cap of 1.",
        "Writer did: Do your part",
        "Delegation rejected by policy: global delegation cap of 2 reached. No further "
        "delegations are permitted in this run.",
    ]
    assert len(recorder.of(DelegationStartedEvent)) == 2


def test_a_worker_outside_the_allow_list_is_refused() -> None:
    constraints = HierarchicalConstraints(allowed_workers={"Writer", "Researcher"})
    ensemble, _ = team(hierarchical_constraints=constraints, manager=[delegate("Reviewer"), "ok"])
    ensemble.run()
    assert tool_results(ensemble) == [
        "Delegation rejected by policy: Worker 'Reviewer' is not in the allowed workers list. "
        "Allowed: [Researcher, Writer]"
    ]


def test_missing_required_workers_fail_the_run_with_the_completed_outputs() -> None:
    constraints = HierarchicalConstraints(required_workers={"Writer", "Reviewer", "Researcher"})
    ensemble, _ = team(hierarchical_constraints=constraints, manager=[delegate("Writer"), "done"])
    with pytest.raises(ConstraintViolationError) as caught:
        ensemble.run()
    assert caught.value.violations == (
        "Required worker 'Researcher' was not delegated to during this run.",
        "Required worker 'Reviewer' was not delegated to during this run.",
    )
    assert [o.raw for o in caught.value.completed_outputs] == ["Writer did: Do your part"]


def test_a_failed_worker_does_not_count_as_completed() -> None:
    broken = Agent("Researcher", "find", llm=FunctionModel(_raise))
    ensemble = Ensemble(
        tasks=[Task("Research", agent=broken)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=ScriptedModel([delegate("Researcher"), "I did it myself"]),
        hierarchical_constraints=HierarchicalConstraints(required_workers={"Researcher"}),
    )
    with pytest.raises(ConstraintViolationError) as caught:
        ensemble.run()
    assert caught.value.completed_outputs == ()


def _raise(messages: object, tools: object) -> str:
    raise ConnectionError("provider down")


def test_a_failing_worker_is_told_to_the_manager() -> None:
    recorder = Recorder()
    broken = Agent("Researcher", "find", llm=FunctionModel(_raise))
    manager = ScriptedModel([delegate("Researcher"), "answered anyway"])
    output = Ensemble(
        tasks=[Task("Research", agent=broken)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
        listeners=[recorder],
    ).run()
    assert output.raw == "answered anyway"
    told = text_of(manager.requests[1].messages[-1])
    assert told.startswith("Error: Delegation to 'Researcher' failed: ")
    assert "provider down" in told
    (failed,) = recorder.of(DelegationFailedEvent)
    assert isinstance(failed, DelegationFailedEvent)
    assert failed.error_type == "AgentExecutionError"
    assert [name for name, *_ in recorder.log].count("started") == 1


def rewrite_to_reviewer(
    request: DelegationRequest, context: DelegationPolicyContext
) -> DelegationPolicyResult:
    if request.agent_role == "Writer":
        return DelegationPolicyResult.modify(request.with_changes(agent_role="Reviewer"))
    return DelegationPolicyResult.allow()


def test_a_policy_rewrites_the_target() -> None:
    ensemble, recorder = team(
        delegation_policies=[rewrite_to_reviewer], manager=[delegate("Writer", "Polish it"), "done"]
    )
    output = ensemble.run()
    assert tool_results(ensemble) == ["Reviewer did: Polish it"]
    assert recorder.log[1] == ("started", "Manager", "Reviewer")
    assert [o.agent_role for o in output.task_outputs] == ["Reviewer", "Manager"]


def test_a_policy_that_rewrites_to_nobody_is_told_to_the_manager() -> None:
    def to_nobody(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        return DelegationPolicyResult.modify(request.with_changes(agent_role="Ghost"))

    ensemble, _ = team(delegation_policies=[to_nobody], manager=[delegate("Writer"), "ok"])
    ensemble.run()
    assert tool_results(ensemble) == [
        "A policy modified agent_role to 'Ghost' but no agent found with that role. "
        "Available roles: [Researcher, Writer, Reviewer]"
    ]


def test_a_rejecting_policy_short_circuits_and_sees_the_context() -> None:
    seen: list[tuple[DelegationRequest, DelegationPolicyContext]] = []

    def no_reviews(
        request: DelegationRequest, context: DelegationPolicyContext
    ) -> DelegationPolicyResult:
        seen.append((request, context))
        if request.agent_role.lower() == "reviewer":
            return DelegationPolicyResult.reject("reviews are frozen")
        return DelegationPolicyResult.allow()

    def never_called(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        raise AssertionError("a rejection ends the chain")

    ensemble, recorder = team(
        delegation_policies=[no_reviews, never_called], manager=[delegate("Reviewer"), "ok"]
    )
    ensemble.run()
    assert tool_results(ensemble) == ["Delegation rejected by policy: reviews are frozen"]
    assert not recorder.of(DelegationStartedEvent)
    ((_, context),) = seen
    assert context == DelegationPolicyContext(
        delegating_agent_role="Manager",
        current_depth=0,
        max_depth=3,
        available_worker_roles=ROLES,
    )


def test_a_policy_returning_no_verdict_stops_the_run() -> None:
    def sloppy(request: DelegationRequest, context: object) -> object:
        return True

    ensemble, recorder = team(delegation_policies=[sloppy], manager=[delegate("Writer"), "ok"])
    with pytest.raises(TaskExecutionError) as caught:
        ensemble.run()
    cause: BaseException | None = caught.value
    while cause is not None and not isinstance(cause, ToolConfigurationError):
        cause = cause.__cause__
    assert cause is not None
    assert "returned True; a policy must return DelegationPolicyResult.allow()" in str(cause)
    assert not recorder.of(DelegationStartedEvent)


def test_a_manager_that_keeps_delegating_past_its_limit_fails_with_the_workers_outputs() -> None:
    ensemble, _ = team(manager_max_iterations=2, manager=[delegate("Writer")] * 6)
    with pytest.raises(TaskExecutionError) as caught:
        ensemble.run()
    assert caught.value.agent_role == "Manager"
    assert str(caught.value).startswith("Hierarchical workflow manager failed: ")
    assert [o.agent_role for o in caught.value.completed_outputs] == ["Writer", "Writer"]


def test_a_manager_past_every_cap_still_answers() -> None:
    constraints = HierarchicalConstraints(global_max_delegations=1)
    ensemble, _ = team(
        hierarchical_constraints=constraints,
        manager=[delegate("Writer"), delegate("Writer"), delegate("Reviewer"), "best effort"],
    )
    output = ensemble.run()
    assert output.raw == "best effort"
    assert sum(text.startswith("Delegation rejected") for text in tool_results(ensemble)) == 2


class Briefing:
    def build_system_prompt(self, context: ManagerPromptContext) -> str:
        return "Workers: " + ", ".join(agent.role for agent in context.agents)

    def build_user_prompt(self, context: ManagerPromptContext) -> str:
        return (
            ""
            if len(context.tasks) > 5
            else f"{len(context.tasks)} tasks: {context.tasks[0].description}"
        )


def test_a_custom_prompt_strategy_sees_resolved_tasks() -> None:
    ensemble, _ = team(manager=["ok"], manager_prompt_strategy=Briefing())
    ensemble.run()
    model = ensemble.manager_model
    assert isinstance(model, ScriptedModel)
    assert text_of(model.requests[0].messages[0]).startswith(
        "You are Manager.\nWorkers: Researcher, Writer, Reviewer\n\n"
    )
    assert text_of(model.requests[0].messages[1]).startswith(
        "## Task\n3 tasks: Research the topic\n"
    )


def test_manager_model_selection_order() -> None:
    ensemble_model = ScriptedModel(["from the ensemble model"])
    agent_model = ScriptedModel(["from the first agent's model"])
    agent = Agent("Writer", "write", llm=agent_model)
    assert (
        Ensemble(
            tasks=[Task("Write", agent=agent)], workflow=Workflow.HIERARCHICAL, llm=ensemble_model
        )
        .run()
        .raw
        == "from the ensemble model"
    )
    assert (
        Ensemble(tasks=[Task("Write", agent=agent)], workflow=Workflow.HIERARCHICAL).run().raw
        == "from the first agent's model"
    )


def test_workers_metrics_and_traces_roll_up_into_the_run() -> None:
    ensemble, _ = team(manager=[delegate("Writer"), delegate("Reviewer"), "done"])
    output = ensemble.run()
    assert output.metrics.total_llm_call_count == 3 + 2
    trace = output.trace
    assert trace is not None
    manager_trace = trace.task_traces[-1]
    assert [d.worker_role for d in manager_trace.delegations] == ["Writer", "Reviewer"]
    nested = manager_trace.delegations[0].worker_trace
    assert nested is not None
    assert nested.final_output == "Writer did: Do your part"
    again = ExecutionTrace.from_json(trace.to_json())
    assert again.task_traces[-1].delegations == manager_trace.delegations


def test_templates_resolve_before_the_manager_sees_the_tasks() -> None:
    templated = Ensemble(
        tasks=[Task("Research {topic}", agent=Agent("Researcher", "r", llm=worker_model()))],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=ScriptedModel(["ok"]),
    )
    templated.run(inputs={"topic": "bees"})
    model = templated.manager_model
    assert isinstance(model, ScriptedModel)
    assert "Task 1: Research bees\n" in text_of(model.requests[0].messages[1])


# ---- validation, before any model call -------------------------------------------------------


def untouched() -> ScriptedModel:
    """A model with no replies: any call fails the test with ScriptExhaustedError."""
    return ScriptedModel([])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: Ensemble(
                tasks=[Task("x", agent=Agent("manager ", "g", llm=untouched()))],
                workflow=Workflow.HIERARCHICAL,
            ),
            "Agent role 'Manager' is reserved for the virtual manager in HIERARCHICAL workflow. "
            "Choose a different role for agent 'manager '.",
        ),
        (
            lambda: Ensemble(
                tasks=[
                    Task("x", agent=Agent("Writer", "g", llm=untouched())),
                    Task("y", agent=Agent("writer", "g", llm=untouched())),
                ],
                workflow=Workflow.HIERARCHICAL,
            ),
            "Duplicate agent role 'writer' detected in HIERARCHICAL workflow. All agent roles "
            "must be unique (case-insensitive) to avoid ambiguous delegation.",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("x", handler=lambda context: "done")],
                workflow=Workflow.HIERARCHICAL,
                llm=untouched(),
            ),
            "Deterministic handler tasks are not supported in HIERARCHICAL workflow. Task 'x' "
            "has a handler configured.",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("x", output_type=int), Task("y")],
                workflow=Workflow.HIERARCHICAL,
                llm=untouched(),
            ),
            "Task 'x' sets output_type, which HIERARCHICAL workflow applies only to the last "
            "task: the manager's final answer is parsed against the last task's output_type",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("x")],
                workflow=Workflow.HIERARCHICAL,
                llm=untouched(),
                manager_max_iterations=0,
            ),
            "Ensemble manager_max_iterations must be > 0 for HIERARCHICAL workflow, got: 0",
        ),
        (
            lambda: Ensemble(tasks=[Task("x")], llm=untouched(), manager_llm=untouched()),
            "Ensemble manager_llm applies only to Workflow.HIERARCHICAL, but the workflow is "
            "SEQUENTIAL",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("x")],
                llm=untouched(),
                workflow=Workflow.PARALLEL,
                hierarchical_constraints=HierarchicalConstraints(),
            ),
            "Ensemble hierarchical_constraints applies only to Workflow.HIERARCHICAL",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("x", agent=Agent("Writer", "g", llm=untouched()))],
                workflow=Workflow.HIERARCHICAL,
                llm=untouched(),
                hierarchical_constraints=HierarchicalConstraints(required_workers={"Editor"}),
            ),
            "HierarchicalConstraints.required_workers references unknown agent: 'Editor'",
        ),
    ],
)
def test_configuration_errors_come_before_any_model_call(build: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        build().run()
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_delegation_depth": 0}, "Ensemble max_delegation_depth must be > 0, got: 0"),
        ({"delegation_policies": [42]}, "Ensemble delegation_policies[0] must be callable"),
        ({"manager_prompt_strategy": object()}, "Ensemble manager_prompt_strategy must have"),
        ({"hierarchical_constraints": {}}, "Ensemble hierarchical_constraints must be a "),
        ({"manager_max_iterations": "5"}, "Ensemble manager_max_iterations must be an int"),
    ],
)
def test_bad_delegation_settings_fail_at_construction(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Ensemble(tasks=[Task("x")], **settings)
    assert str(caught.value).startswith(message)


class Blank:
    def build_system_prompt(self, context: ManagerPromptContext) -> str:
        return ""

    def build_user_prompt(self, context: ManagerPromptContext) -> Any:
        return "  " if context.tasks else None


def test_a_blank_manager_task_falls_back_to_the_default() -> None:
    ensemble, _ = team(manager=["ok"], manager_prompt_strategy=Blank())
    ensemble.run()
    model = ensemble.manager_model
    assert isinstance(model, ScriptedModel)
    assert text_of(model.requests[0].messages[1]).startswith(
        "## Task\nCoordinate your team to complete all assigned tasks and synthesize a "
        "comprehensive final response.\n\n## Expected Output\n"
    )
    assert text_of(model.requests[0].messages[0]).startswith(
        "You are Manager.\n\nYour personal goal is:"
    )


def test_a_strategy_that_returns_no_text_is_a_configuration_error() -> None:
    class Broken(Blank):
        def build_user_prompt(self, context: ManagerPromptContext) -> Any:
            return None

    ensemble, _ = team(manager=[], manager_prompt_strategy=Broken())
    with pytest.raises(
        ValidationError,
        match=r"Ensemble manager_prompt_strategy.build_user_prompt must return a string, "
        r"got: None",
    ):
        ensemble.run()


def test_a_policy_cannot_rewrite_past_the_constraints() -> None:
    ensemble, recorder = team(
        hierarchical_constraints=HierarchicalConstraints(allowed_workers={"Writer"}),
        delegation_policies=[rewrite_to_reviewer],
        manager=[delegate("Writer"), "ok"],
    )
    output = ensemble.run()
    assert tool_results(ensemble) == [
        "Delegation rejected by policy: Worker 'Reviewer' is not in the allowed workers list. "
        "Allowed: [Writer]"
    ]
    assert [o.agent_role for o in output.task_outputs] == ["Manager"]
    assert not recorder.of(DelegationStartedEvent)


def test_a_rewritten_request_keeps_the_attempts_id() -> None:
    def fresh(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        return DelegationPolicyResult.modify(
            DelegationRequest(agent_role="Reviewer", task_description="Fresh")
        )

    ensemble, recorder = team(delegation_policies=[fresh], manager=[delegate("Writer"), "ok"])
    ensemble.run()
    (started,) = recorder.of(DelegationStartedEvent)
    (completed,) = recorder.of(DelegationCompletedEvent)
    assert isinstance(started, DelegationStartedEvent)
    assert isinstance(completed, DelegationCompletedEvent)
    assert started.delegation_id == completed.delegation_id
    assert tool_results(ensemble) == ["Reviewer did: Fresh"]


def test_refusals_are_failed_tool_calls_with_the_exact_text() -> None:
    outcomes: list[tuple[str, str]] = []
    ensemble = Ensemble(
        tasks=[Task("Write", agent=Agent("Writer", "w", llm=worker_model()))],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=ScriptedModel([delegate("Nobody"), delegate("Writer"), "ok"]),
        on_tool_call=lambda event: outcomes.append((event.outcome, event.tool_result)),
    )
    ensemble.run()
    assert outcomes == [
        ("FAILURE", "No agent found with role 'Nobody'. Available roles: [Writer]"),
        ("SUCCESS", "Writer did: Do your part"),
    ]


def test_synthesised_workers_with_one_role_are_ambiguous() -> None:
    ensemble = Ensemble(
        tasks=[Task("Research cats"), Task("Research dogs")],
        workflow=Workflow.HIERARCHICAL,
        llm=untouched(),
    )
    with pytest.raises(ValidationError, match="Duplicate agent role 'Researcher' detected"):
        ensemble.run()


def test_a_role_repeated_within_one_stage_is_fine() -> None:
    constraints = HierarchicalConstraints(required_stages=[["Writer", "writer"], ["Reviewer"]])
    ensemble, _ = team(hierarchical_constraints=constraints, manager=["ok"])
    assert ensemble.run().raw == "ok"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"manager_max_iterations": 5},
            "Ensemble manager_max_iterations applies only to Workflow.HIERARCHICAL",
        ),
        (
            {"delegation_policies": [rewrite_to_reviewer]},
            "Ensemble delegation_policies applies to delegations, but no agent of the run may "
            "delegate",
        ),
        ({"max_delegation_depth": 1}, "Ensemble max_delegation_depth applies to delegations"),
    ],
)
def test_delegation_settings_that_would_do_nothing_are_errors(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Ensemble(tasks=[Task("x")], llm=untouched(), **settings).run()
    assert str(caught.value).startswith(message)


def test_a_task_timeout_is_not_silently_dropped() -> None:
    with pytest.raises(ValidationError, match="Task 'x' sets timeout, which HIERARCHICAL"):
        Ensemble(
            tasks=[Task("x", timeout=5)], workflow=Workflow.HIERARCHICAL, llm=untouched()
        ).run()


def test_constraints_are_checked_before_template_resolution_when_every_agent_is_known() -> None:
    ensemble = Ensemble(
        tasks=[Task("Write about {topic}", agent=Agent("Writer", "w", llm=untouched()))],
        workflow=Workflow.HIERARCHICAL,
        hierarchical_constraints=HierarchicalConstraints(allowed_workers={"Editor"}),
    )
    with pytest.raises(ValidationError, match="allowed_workers references unknown agent"):
        ensemble.run()  # no inputs: the template error would come second


def test_concurrent_delegations_cannot_both_take_the_last_place_under_a_cap() -> None:
    async def slow_allow(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        for _ in range(3):
            await asyncio.sleep(0)
        return DelegationPolicyResult.allow()

    ensemble, _ = team(
        hierarchical_constraints=HierarchicalConstraints(global_max_delegations=1),
        delegation_policies=[slow_allow],
        manager=[[delegate("Writer"), delegate("Reviewer")], "ok"],
    )
    output = ensemble.run()
    assert len(output.task_outputs) == 2
    assert sorted(tool_results(ensemble))[0].startswith(
        "Delegation rejected by policy: global delegation cap of 1 reached."
    )


def test_a_manager_that_keeps_delegating_fails_with_a_one_line_message() -> None:
    manager = FunctionModel(
        lambda messages, tools: tool_call(
            "delegate_task", agent_role="Writer", task_description="x"
        )
    )
    writer = Agent("Writer", "Write", llm=ScriptedModel(["text"] * 50))
    ensemble = Ensemble(
        tasks=[Task("Write a report", agent=writer)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
        manager_max_iterations=1,
    )
    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()
    cause = raised.value.__cause__
    assert isinstance(cause, MaxIterationsExceededError)
    assert "\n" not in str(cause)
    assert len(str(cause)) < 400


def test_a_manager_that_delegates_nothing_is_a_warning_in_the_output_and_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agentensemble import Agent, Ensemble, ScriptedModel, Task, Workflow

    manager = ScriptedModel(["I wrote it myself."])
    writer = Agent("Writer", "Write", llm=ScriptedModel(["unused"]))
    output = Ensemble(
        tasks=[Task("Write a post", agent=writer)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
    ).run()
    assert output.raw == "I wrote it myself."
    [warning] = output.warnings
    assert warning.startswith("The manager delegated nothing")
    assert output.trace is not None
    assert output.trace.warnings == (warning,)
    assert "The manager delegated nothing" in caplog.text


def test_the_managers_tool_names_the_worker_roles_in_its_schema() -> None:
    """A server that constrains tool arguments to the schema (llama.cpp's grammar) can then
    only name a real worker."""
    from agentensemble import Agent, Ensemble, ScriptedModel, Task, Workflow
    from agentensemble.models import SystemMessage

    manager = ScriptedModel(["Final report"])
    workers = [Agent(role, "Help", llm=ScriptedModel([])) for role in ("Researcher", "Writer")]
    Ensemble(
        tasks=[Task("Report on bees", "A report")],
        agents=workers,
        workflow=Workflow.HIERARCHICAL,
        llm=manager,
    ).run()
    [spec] = manager.requests[0].tools
    assert spec.name == "delegate_task"
    roles = spec.parameters["properties"]["agent_role"]["enum"]
    assert {"Researcher", "Writer"} <= set(roles)  # and the task's own agent, synthesised
    system = manager.requests[0].messages[0]
    assert isinstance(system, SystemMessage)
    assert all(role in system.text for role in roles)
