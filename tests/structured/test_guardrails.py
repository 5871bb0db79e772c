"""Input and output guardrails (BEHAVIOUR 6.1 steps 2 and 9)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleListener,
    GuardrailCheckedEvent,
    GuardrailInput,
    GuardrailOutput,
    GuardrailResult,
    GuardrailType,
    GuardrailViolationError,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ValidationError,
)

from .models import Report

REPORT_JSON = '{"title": "Q3", "score": 8, "tags": []}'


def _agent(model: ScriptedModel) -> Agent:
    return Agent("Analyst", "Analyse", llm=model)


def _violation(task: Task[object], *others: Task[object]) -> GuardrailViolationError:
    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(tasks=[*others, task]).run()
    cause = raised.value.__cause__
    assert isinstance(cause, GuardrailViolationError)
    return cause


def test_a_failing_input_guardrail_stops_the_task_before_any_model_call() -> None:
    model = ScriptedModel(["never"])

    def no_secrets(value: GuardrailInput) -> GuardrailResult:
        if "password" in value.task_description:
            return GuardrailResult.failure("the task mentions a password")
        return GuardrailResult.success()

    task = Task("Find the password", agent=_agent(model), input_guardrails=[no_secrets])
    error = _violation(task)

    assert model.requests == []
    assert error.guardrail_type is GuardrailType.INPUT
    assert error.violation_message == "the task mentions a password"
    assert error.task_description == "Find the password"
    assert error.agent_role == "Analyst"
    assert str(error) == (
        "INPUT guardrail violation on agent 'Analyst' task 'Find the password': "
        "the task mentions a password"
    )


def test_input_guardrails_see_the_resolved_task_and_its_context() -> None:
    seen: list[GuardrailInput] = []

    def record(value: GuardrailInput) -> GuardrailResult:
        seen.append(value)
        return GuardrailResult.success()

    first = Task("Research {topic}", agent=_agent(ScriptedModel(["facts"])))
    second = Task(
        "Write about {topic}",
        "An essay",
        agent=_agent(ScriptedModel(["essay"])),
        context=[first],
        input_guardrails=[record],
    )
    Ensemble(tasks=[first, second]).run(inputs={"topic": "bees"})

    (value,) = seen
    assert value.task_description == "Write about bees"
    assert value.expected_output == "An essay"
    assert [o.raw for o in value.context_outputs] == ["facts"]
    assert value.agent_role == "Analyst"


def test_output_guardrails_see_the_parsed_object() -> None:
    seen: list[GuardrailOutput] = []

    def score_in_range(value: GuardrailOutput) -> GuardrailResult:
        seen.append(value)
        report = value.parsed_output
        assert isinstance(report, Report)
        return GuardrailResult.failure(f"score {report.score} is above 5")

    task = Task(
        "Rate Q3",
        agent=_agent(ScriptedModel(["Here: " + REPORT_JSON])),
        output_type=Report,
        output_guardrails=[score_in_range],
    )
    error = _violation(task)

    assert error.guardrail_type is GuardrailType.OUTPUT
    assert error.violation_message == "score 8 is above 5"
    assert seen[0].raw_response == "Here: " + REPORT_JSON
    assert seen[0].parsed_output == Report(title="Q3", score=8, tags=[])


def test_guardrails_run_in_order_and_the_first_failure_wins() -> None:
    calls: list[str] = []

    def passing(value: GuardrailOutput) -> GuardrailResult:
        calls.append("passing")
        return GuardrailResult.success()

    def first_failure(value: GuardrailOutput) -> GuardrailResult:
        calls.append("first_failure")
        return GuardrailResult.failure("first")

    def second_failure(value: GuardrailOutput) -> GuardrailResult:
        calls.append("second_failure")
        return GuardrailResult.failure("second")

    task = Task(
        "Answer",
        agent=_agent(ScriptedModel(["ok"])),
        output_guardrails=[passing, first_failure, second_failure],
    )
    assert _violation(task).violation_message == "first"
    assert calls == ["passing", "first_failure"]


def test_async_guardrails_run_on_the_loop_and_sync_ones_in_a_thread() -> None:
    where: dict[str, bool] = {}

    async def async_check(value: GuardrailInput) -> GuardrailResult:
        await asyncio.sleep(0)
        # run() from plain sync code runs its event loop on the calling thread
        where["async on the loop thread"] = threading.current_thread() is threading.main_thread()
        return GuardrailResult.success()

    def sync_check(value: GuardrailOutput) -> GuardrailResult:
        where["sync in a worker"] = threading.current_thread().name.startswith("agentensemble-sync")
        return GuardrailResult.success()

    task = Task(
        "Answer",
        agent=_agent(ScriptedModel(["ok"])),
        input_guardrails=[async_check],
        output_guardrails=[sync_check],
    )
    output = Ensemble(tasks=[task]).run()
    assert output.raw == "ok"
    assert where == {"async on the loop thread": True, "sync in a worker": True}


def test_a_guardrail_that_raises_is_a_failure_of_that_guardrail() -> None:
    def broken(value: GuardrailOutput) -> GuardrailResult:
        raise KeyError("score")

    later_called = False

    def later(value: GuardrailOutput) -> GuardrailResult:
        nonlocal later_called
        later_called = True
        return GuardrailResult.success()

    task = Task("Answer", agent=_agent(ScriptedModel(["ok"])), output_guardrails=[broken, later])
    error = _violation(task)
    assert error.violation_message == (
        "guardrail test_a_guardrail_that_raises_is_a_failure_of_that_guardrail.<locals>.broken "
        "raised KeyError: 'score'"
    )
    assert isinstance(error.__cause__, KeyError)
    assert later_called is False


def test_a_guardrail_returning_something_else_is_a_failure_saying_so() -> None:
    task = Task(
        "Answer",
        agent=_agent(ScriptedModel(["ok"])),
        output_guardrails=[lambda value: True],  # type: ignore[list-item,return-value]
    )
    assert "returned bool, not a GuardrailResult" in _violation(task).violation_message


def test_handler_tasks_run_guardrails_too() -> None:
    calls: list[str] = []

    def check_in(value: GuardrailInput) -> GuardrailResult:
        calls.append(f"in:{value.agent_role}")
        return GuardrailResult.success()

    def check_out(value: GuardrailOutput) -> GuardrailResult:
        calls.append(f"out:{value.raw_response}")
        return GuardrailResult.failure("not today")

    task = Task(
        "Compute",
        handler=lambda ctx: "42",
        input_guardrails=[check_in],
        output_guardrails=[check_out],
    )
    assert _violation(task).agent_role == "(deterministic)"
    assert calls == ["in:(deterministic)", "out:42"]


def test_guardrails_must_be_callable() -> None:
    with pytest.raises(ValidationError) as raised:
        Task("x", output_guardrails=[GuardrailResult.success(), "nope"])  # type: ignore[list-item]
    assert str(raised.value).startswith(
        "Task output_guardrails element at index 0 must be a callable taking a GuardrailOutput"
    )


def test_a_violation_keeps_the_outputs_completed_before_it() -> None:
    done = Task("Before", agent=_agent(ScriptedModel(["kept"])))
    rejected = Task(
        "After",
        agent=_agent(ScriptedModel(["never"])),
        input_guardrails=[lambda value: GuardrailResult.failure("no")],
    )
    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(tasks=[done, rejected]).run()
    assert [o.raw for o in raised.value.completed_outputs] == ["kept"]


def test_each_verdict_is_a_guardrail_checked_event() -> None:
    checked: list[GuardrailCheckedEvent] = []

    class Verdicts(EnsembleListener):
        def on_guardrail_checked(self, event: GuardrailCheckedEvent) -> None:
            checked.append(event)

    def short(value: GuardrailInput) -> GuardrailResult:
        return GuardrailResult.success()

    def polite(value: GuardrailOutput) -> GuardrailResult:
        return GuardrailResult.failure("too rude")

    task = Task(
        "Answer",
        agent=_agent(ScriptedModel(["rude words"])),
        input_guardrails=[short],
        output_guardrails=[polite],
    )
    with pytest.raises(TaskExecutionError):
        Ensemble(tasks=[task], listeners=[Verdicts()]).run()
    assert [(e.guardrail_type, e.guardrail, e.passed, e.reason) for e in checked] == [
        ("INPUT", short.__qualname__, True, None),
        ("OUTPUT", polite.__qualname__, False, "too rude"),
    ]
    assert {e.agent_role for e in checked} == {"Analyst"}
