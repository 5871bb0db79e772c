"""Peer delegation: the ``delegate`` tool of agents with allow_delegation=True, its guards,
depth limit, policies, and what the run reports (BEHAVIOUR 3.6, 9.5)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from agentensemble import (
    Agent,
    DelegationPolicyResult,
    DelegationRequest,
    DelegationStatus,
    Ensemble,
    FunctionModel,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolContext,
    ToolResultMessage,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import ToolCall
from agentensemble.observability import (
    ConsoleProgress,
    DelegationFailedEvent,
    DelegationStartedEvent,
    ExecutionTrace,
    TaskStartEvent,
)

from .helpers import Recorder, text_of, worker_model


def delegate(role: str, description: str = "Help me") -> Any:
    return tool_call("delegate", agent_role=role, task_description=description)


def told(model: ScriptedModel) -> list[str]:
    """The tool results a model saw in its last request."""
    return [
        text_of(message)
        for message in model.requests[-1].messages
        if isinstance(message, ToolResultMessage)
    ]


def chain(depth: int) -> tuple[Ensemble, dict[str, ScriptedModel], Recorder]:
    """A delegates to B, B tries to delegate to C; C answers."""
    models = {
        "A": ScriptedModel([delegate("B", "Part for B"), "A's answer"]),
        "B": ScriptedModel([delegate("C", "Part for C"), "B's answer"]),
        "C": ScriptedModel(["C's answer"]),
    }
    agents = {
        role: Agent(role, f"{role} goal", llm=model, allow_delegation=role != "C")
        for role, model in models.items()
    }
    recorder = Recorder()
    ensemble = Ensemble(
        tasks=[Task("Main job", agent=agents["A"])],
        agents=[agents["B"], agents["C"]],
        max_delegation_depth=depth,
        listeners=[recorder],
    )
    return ensemble, models, recorder


def test_a_delegates_to_b_who_delegates_to_c_at_depth_two() -> None:
    ensemble, models, recorder = chain(depth=2)
    output = ensemble.run()
    assert output.raw == "A's answer"
    assert [o.agent_role for o in output.task_outputs] == ["A"]
    assert told(models["B"]) == ["C's answer"]
    assert told(models["A"]) == ["B's answer"]
    assert recorder.log == [
        ("task_start", "A"),
        ("started", "A", "B"),
        ("task_start", "B"),
        ("started", "B", "C"),
        ("task_start", "C"),
        ("task_complete", "C"),
        ("completed", "B", "C"),
        ("task_complete", "B"),
        ("completed", "A", "B"),
        ("task_complete", "A"),
    ]
    depths = [e.delegation_depth for e in recorder.of(DelegationStartedEvent)]  # type: ignore[attr-defined]
    assert depths == [1, 2]
    a, b, c = recorder.of(TaskStartEvent)
    assert isinstance(a, TaskStartEvent)
    assert isinstance(b, TaskStartEvent)
    assert isinstance(c, TaskStartEvent)
    assert (a.parent_task_id, b.parent_task_id, c.parent_task_id) == (None, a.task_id, b.task_id)
    assert output.trace is not None
    (to_b,) = output.trace.task_traces[0].delegations
    assert to_b.worker_trace is not None
    (to_c,) = to_b.worker_trace.delegations
    assert (to_c.worker_role, to_c.raw_output) == ("C", "C's answer")
    assert output.metrics.total_llm_call_count == 2 + 2 + 1


def test_at_depth_one_b_is_told_to_do_it_itself() -> None:
    ensemble, models, recorder = chain(depth=1)
    output = ensemble.run()
    assert output.raw == "A's answer"
    assert told(models["B"]) == [
        "Delegation depth limit reached (max: 1, current: 1). Complete this task yourself "
        "without further delegation."
    ]
    assert told(models["A"]) == ["B's answer"]
    assert models["C"].requests == []
    assert ("failed", "B", told(models["B"])[0]) in recorder.log


@pytest.mark.parametrize("spelling", ["A", " a "])
def test_self_delegation_is_refused(spelling: str) -> None:
    model = ScriptedModel([delegate(spelling), "did it myself"])
    agent = Agent("A", "goal", llm=model, allow_delegation=True)
    output = Ensemble(tasks=[Task("Job", agent=agent)]).run()
    assert output.raw == "did it myself"
    assert told(model) == ["Cannot delegate to yourself (role: 'A'). Choose a different agent."]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"agent_role": "", "task_description": "x"},
            "Error: agent_role must not be null or blank. Provide the target agent's role.",
        ),
        (
            {"agent_role": "B"},
            "Error: task_description must not be null or blank. Provide a clear subtask "
            "description.",
        ),
        (
            {"agent_role": "Z", "task_description": "x"},
            "Agent not found with role 'Z'. Available roles: [A, B]",
        ),
    ],
)
def test_guards_answer_the_model(arguments: dict[str, str], message: str) -> None:
    model = ScriptedModel([tool_call("delegate", **arguments), "fine"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "goal", llm=ScriptedModel([]))
    recorder = Recorder()
    output = Ensemble(tasks=[Task("Job", agent=a)], agents=[b], listeners=[recorder]).run()
    assert told(model) == [message]
    (failed,) = recorder.of(DelegationFailedEvent)
    assert isinstance(failed, DelegationFailedEvent)
    assert (failed.failure_reason, failed.error_type) == (message, None)
    assert failed.task_description == arguments.get("task_description", "")
    assert not recorder.of(DelegationStartedEvent)
    assert output.trace is not None
    (refused,) = output.trace.task_traces[0].delegations
    assert (refused.task_description, refused.status, refused.error) == (
        failed.task_description,
        "FAILURE",
        message,
    )


def test_the_delegate_tool_comes_first_and_only_for_agents_that_may_delegate() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return "results"

    lead = ScriptedModel(["ok"])
    helper = ScriptedModel(["ok"])
    a = Agent("A", "goal", llm=lead, tools=[search], allow_delegation=True)
    b = Agent("B", "goal", llm=helper, tools=[search])
    Ensemble(tasks=[Task("One", agent=a), Task("Two", agent=b)]).run()
    spec = lead.requests[0].tools[0]
    assert [t.name for t in lead.requests[0].tools] == ["delegate", "search"]
    assert [t.name for t in helper.requests[0].tools] == ["search"]
    assert spec.description.startswith("Delegate a subtask to another agent in the ensemble.")
    assert spec.parameters["properties"]["agent_role"]["description"] == (
        "The role of the agent to delegate to. Must match one of the available agent roles."
    )


def test_a_peer_worker_sees_the_subtask_and_no_context() -> None:
    seen: list[str] = []

    def helper(messages: Any, tools: Any) -> str:
        seen.append(text_of(messages[1]))
        return "helped"

    lead = ScriptedModel([delegate("B", "Check the numbers"), "done"])
    first = Task("Gather", agent=Agent("C", "g", llm=ScriptedModel(["numbers"])))
    a = Agent("A", "goal", llm=lead, allow_delegation=True)
    b = Agent("B", "goal", llm=FunctionModel(helper))
    Ensemble(tasks=[first, Task("Job", agent=a, context=[first])], agents=[b]).run()
    assert seen == [
        "## Task\nCheck the numbers\n\n## Expected Output\nComplete the assigned subtask thoroughly"
    ]


def test_policies_apply_to_peers_and_a_rewrite_to_the_caller_is_refused() -> None:
    def back_to_a(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        return DelegationPolicyResult.modify(request.with_changes(agent_role="a"))

    model = ScriptedModel([delegate("B"), "ok"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "goal", llm=ScriptedModel([]))
    Ensemble(tasks=[Task("Job", agent=a)], agents=[b], delegation_policies=[back_to_a]).run()
    assert told(model) == [
        "A policy modified agent_role to 'a' which results in self-delegation. Choose a "
        "different target."
    ]


async def test_async_policies_are_awaited() -> None:
    async def rejecting(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        await asyncio.sleep(0)
        return DelegationPolicyResult.reject("not today")

    model = ScriptedModel([delegate("B"), "ok"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "goal", llm=ScriptedModel([]))
    await Ensemble(tasks=[Task("Job", agent=a)], agents=[b], delegation_policies=[rejecting]).arun()
    assert told(model) == ["Delegation rejected by policy: not today"]


def test_a_tool_can_delegate_through_its_context() -> None:
    responses: list[Any] = []

    @tool
    async def ask_expert(context: ToolContext, question: str) -> str:
        """Ask the expert."""
        response = await context.delegate("Expert", question)
        responses.append(response)
        return f"expert says: {response.raw_output}"

    model = ScriptedModel([tool_call("ask_expert", question="Why?"), "done"])
    a = Agent("A", "goal", llm=model, tools=[ask_expert], allow_delegation=True)
    expert = Agent("Expert", "knows", llm=worker_model())
    Ensemble(tasks=[Task("Job", agent=a)], agents=[expert]).run()
    assert told(model) == ["expert says: Expert did: Why?"]
    assert responses[0].status is DelegationStatus.SUCCESS


def test_a_tool_of_an_agent_that_may_not_delegate_fails_the_task() -> None:
    @tool
    async def ask_expert(context: ToolContext, question: str) -> str:
        """Ask the expert."""
        assert not context.can_delegate
        response = await context.delegate("Expert", question)
        return str(response)

    model = ScriptedModel([tool_call("ask_expert", question="Why?"), "done"])
    a = Agent("A", "goal", llm=model, tools=[ask_expert])
    with pytest.raises(TaskExecutionError, match="Agent 'A' cannot delegate: give it"):
        Ensemble(tasks=[Task("Job", agent=a)]).run()


def test_an_agent_with_its_own_delegate_tool_cannot_allow_delegation() -> None:
    @tool
    def delegate(text: str) -> str:
        """Mine."""
        return text

    with pytest.raises(ValidationError, match="has allow_delegation=True and a tool named"):
        Agent("A", "goal", llm=ScriptedModel([]), tools=[delegate], allow_delegation=True)


def test_concurrent_delegations_in_one_turn() -> None:
    model = ScriptedModel([[delegate("B", "one"), delegate("C", "two")], "merged"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "g", llm=worker_model())
    c = Agent("C", "g", llm=worker_model())
    output = Ensemble(tasks=[Task("Job", agent=a)], agents=[b, c]).run()
    assert told(model) == ["B did: one", "C did: two"]
    assert output.trace is not None
    assert {d.worker_role for d in output.trace.task_traces[0].delegations} == {"B", "C"}


async def test_cancelling_during_a_delegation_keeps_what_completed() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    exported: list[ExecutionTrace] = []

    class Keep:
        def export(self, trace: ExecutionTrace) -> None:
            exported.append(trace)

    async def stuck(messages: Any, tools: Any) -> str:
        entered.set()
        await release.wait()
        return "never"

    first = Task("First", agent=Agent("Solo", "g", llm=ScriptedModel(["first done"])))
    lead = Agent("A", "g", llm=ScriptedModel([delegate("B"), "x"]), allow_delegation=True)
    slow = Agent("B", "g", llm=FunctionModel(stuck))
    ensemble = Ensemble(
        tasks=[first, Task("Second", agent=lead)], agents=[slow], trace_exporter=Keep()
    )
    running = asyncio.create_task(ensemble.arun())
    await entered.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    (trace,) = exported
    assert [t.final_output for t in trace.task_traces] == ["first done"]
    assert trace.exit_reason == "ERROR"


def test_the_console_shows_delegations() -> None:
    stream = io.StringIO()
    model = ScriptedModel([delegate("B", "Check"), delegate("Nobody"), "ok"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "g", llm=worker_model())
    Ensemble(
        tasks=[Task("Job", agent=a)], agents=[b], listeners=[ConsoleProgress(stream, rich=False)]
    ).run()
    lines = stream.getvalue().splitlines()
    assert "  ⇢ A → B: Check" in lines
    assert any(line.startswith("  ⇠ B answered A in ") for line in lines)
    assert "  ⇢ A → Nobody ✗ Agent not found with role 'Nobody'. Available roles: [A, B]" in lines
    assert lines[-1].endswith("· 1 tasks · 2 tool calls · tokens unknown")


def test_agents_listed_only_on_the_ensemble_are_peers_not_tasks() -> None:
    model = ScriptedModel([delegate("Helper"), "ok"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    helper = Agent("Helper", "g", llm=worker_model())
    output = Ensemble(tasks=[Task("Job", agent=a)], agents=[helper]).run()
    assert [o.agent_role for o in output.task_outputs] == ["A"]
    assert told(model) == ["Helper did: Help me"]


def test_hierarchical_workers_may_delegate_to_each_other() -> None:
    manager = ScriptedModel(
        [tool_call("delegate_task", agent_role="A", task_description="Go"), "ok"]
    )
    a = Agent("A", "g", llm=ScriptedModel([delegate("B", "Sub"), "A done"]), allow_delegation=True)
    b = Agent("B", "g", llm=worker_model())
    output = Ensemble(
        tasks=[Task("t1", agent=a), Task("t2", agent=b)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
    ).run()
    assert [o.agent_role for o in output.task_outputs] == ["A", "Manager"]
    assert output.metrics.total_llm_call_count == 2 + 2 + 1


def test_a_policy_can_give_the_worker_a_scope_and_an_expected_output() -> None:
    seen: list[str] = []

    def helper(messages: Any, tools: Any) -> str:
        seen.append(text_of(messages[1]))
        return "scoped answer"

    def narrow(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        return DelegationPolicyResult.modify(
            request.with_changes(
                scope={"region": "EU", "years": [2024, 2025]},
                expected_output_schema='{"total": number}',
            )
        )

    model = ScriptedModel([delegate("B", "Sum the sales"), "ok"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "goal", llm=FunctionModel(helper))
    Ensemble(tasks=[Task("Job", agent=a)], agents=[b], delegation_policies=[narrow]).run()
    assert seen == [
        '## Scope\n{"region":"EU","years":[2024,2025]}\n\n## Task\nSum the sales\n\n'
        '## Expected Output\n{"total": number}'
    ]


def test_a_cancelled_worker_ends_its_delegation() -> None:
    async def scenario() -> list[object]:
        entered = asyncio.Event()

        async def stuck(messages: Any, tools: Any) -> str:
            entered.set()
            await asyncio.Event().wait()
            return "never"

        recorder = Recorder()
        lead = Agent("A", "g", llm=ScriptedModel([delegate("B"), "x"]), allow_delegation=True)
        slow = Agent("B", "g", llm=FunctionModel(stuck))
        ensemble = Ensemble(tasks=[Task("Job", agent=lead)], agents=[slow], listeners=[recorder])
        running = asyncio.create_task(ensemble.arun())
        await entered.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return recorder.of(DelegationFailedEvent)

    (failed,) = asyncio.run(scenario())
    assert isinstance(failed, DelegationFailedEvent)
    assert failed.error_type == "CancelledError"


async def test_concurrent_delegations_are_not_bound_by_the_tool_batch_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentensemble.execution import _tool_calls

    monkeypatch.setattr(_tool_calls, "TOOL_BATCH_TIMEOUT", 0.0)

    async def patient(messages: Any, tools: Any) -> str:
        for _ in range(3):
            await asyncio.sleep(0)
        return "patient answer"

    model = ScriptedModel([[delegate("B", "one"), delegate("C", "two")], "merged"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "g", llm=FunctionModel(patient))
    c = Agent("C", "g", llm=FunctionModel(patient))
    output = await Ensemble(tasks=[Task("Job", agent=a)], agents=[b, c]).arun()
    assert output.raw == "merged"
    assert told(model) == ["patient answer", "patient answer"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"expected_output_schema": {"type": "object"}}, "expected_output_schema must be a string"),
        ({"scope": "abc"}, "scope must be a mapping, got: 'abc'"),
        ({"metadata": None}, "metadata must be a mapping, got: None"),
    ],
)
def test_request_fields_are_checked(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=f"DelegationRequest {message}"):
        DelegationRequest(agent_role="B", task_description="x", **changes)


def test_peers_sharing_a_role_are_refused_before_any_model_call() -> None:
    llm = ScriptedModel(["never"])
    lead = Agent("Lead", "Lead", llm=llm, allow_delegation=True)
    first, second = Agent("Billing", "Bill", llm=llm), Agent("billing ", "Bill too", llm=llm)
    ensemble = Ensemble(tasks=[Task("Job", agent=lead)], agents=[first, second])
    with pytest.raises(ValidationError, match="Agents 'Billing' and 'billing ' share a role"):
        ensemble.run()
    assert llm.requests == []


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"], ids=["broken", "not-an-object"])
def test_arguments_that_are_not_a_json_object_are_answered_with_how_to_call(
    arguments: str,
) -> None:
    model = ScriptedModel([ToolCall("c1", "delegate", arguments), "fine"])
    lead = Agent("A", "goal", llm=model, allow_delegation=True)
    helper = Agent("B", "goal", llm=ScriptedModel([]))
    Ensemble(tasks=[Task("Job", agent=lead)], agents=[helper]).run()
    assert told(model) == [
        'Error: the arguments of delegate are not a JSON object: call it with {"agent_role": '
        '"<role>", "task_description": "<what to do>"}'
    ]
