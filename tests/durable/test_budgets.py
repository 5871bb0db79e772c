"""Run and task budgets: `RunOptions` and `Task` ``max_tokens``, ``max_cost`` and
``max_model_calls``, checked before every model call (issue 26, item 3)."""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    CostConfiguration,
    Ensemble,
    EnsembleListener,
    ExitReason,
    FunctionModel,
    GuardrailInput,
    GuardrailResult,
    ParallelErrorStrategy,
    ParallelExecutionError,
    RunOptions,
    ScriptedModel,
    Task,
    TaskExecutionError,
    Usage,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.errors import BudgetExceededError
from agentensemble.execution._budget import RunBudget
from agentensemble.models import Message, ToolResultMessage, ToolSpec
from agentensemble.observability import RunWarningEvent, TaskFailedEvent

PRICES = CostConfiguration("0.001", "0")
"""Ten input tokens cost 0.01."""
TEN_TOKENS = Usage(input_tokens=10, output_tokens=0)

TWO_CALLS: dict[str, Any] = {"max_model_calls": 2, "max_tokens": 20, "max_cost": 0.02}
"""Each budget, set so that two calls of `TEN_TOKENS` spend it."""
RUN_SPENT = {
    "max_model_calls": "RunOptions max_model_calls=2: 2 model calls made; the run stops",
    "max_tokens": "RunOptions max_tokens=20: 20 tokens used; the run stops",
    "max_cost": "RunOptions max_cost=0.02: 0.02 USD spent; the run stops",
}
ONE_CALL: dict[str, Any] = {"max_model_calls": 1, "max_tokens": 10, "max_cost": 0.01}
TASK_SPENT = {
    "max_model_calls": "Task 'budgeted' max_model_calls=1: 1 model call made",
    "max_tokens": "Task 'budgeted' max_tokens=10: 10 tokens used",
    "max_cost": "Task 'budgeted' max_cost=0.01: 0.01 USD spent",
}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def task_line(messages: Sequence[Message]) -> str:
    """The task's description: the line after the user prompt's ``## Task``."""
    lines = (messages[1].text or "").splitlines()
    return lines[lines.index("## Task") + 1]


def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """``done: <task>``; a task whose description says "look" first looks something up."""
    task = task_line(messages)
    looked = any(isinstance(message, ToolResultMessage) for message in messages)
    if "look" in task and not looked:
        return tool_call("lookup", key=task)
    return f"done: {task}"


class Warnings(EnsembleListener):
    """The run's warnings and task failures, as its events (async: heard on the run's loop)."""

    def __init__(self) -> None:
        self.warnings: list[RunWarningEvent] = []
        self.failures: list[TaskFailedEvent] = []

    async def on_run_warning(self, event: RunWarningEvent) -> None:
        self.warnings.append(event)

    async def on_task_failed(self, event: TaskFailedEvent) -> None:
        self.failures.append(event)

    def said(self, code: str) -> list[str]:
        return [event.message for event in self.warnings if event.code == code]


# ---- a run's budget ends the run with its completed outputs ---------------------------------


def sequential(model: FunctionModel) -> Ensemble:
    first = Task("first", llm=model)
    second = Task("second", llm=model, context=[first])
    third = Task("third", llm=model, context=[second])
    return Ensemble(
        tasks=[first, second, third], workflow=Workflow.SEQUENTIAL, cost_configuration=PRICES
    )


def parallel(model: FunctionModel) -> Ensemble:
    first, second = Task("first", llm=model), Task("second", llm=model)
    third = Task("third", llm=model, context=[first, second])
    return Ensemble(
        tasks=[first, second, third], workflow=Workflow.PARALLEL, cost_configuration=PRICES
    )


def hierarchical(model: FunctionModel) -> Ensemble:
    """The manager delegates to the researcher, then to the writer, then answers; its
    model counts like the workers'."""
    manager = ScriptedModel(
        [
            tool_call("delegate_task", agent_role="Researcher", task_description="first"),
            tool_call("delegate_task", agent_role="Writer", task_description="second"),
            "the report",
        ],
        usage=TEN_TOKENS,
    )
    researcher = Agent("Researcher", "Research", llm=model)
    writer = Agent("Writer", "Write", llm=model)
    return Ensemble(
        tasks=[Task("Research", agent=researcher), Task("Write", agent=writer)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
        cost_configuration=PRICES,
    )


@pytest.mark.parametrize("budget", sorted(TWO_CALLS))
@pytest.mark.parametrize(
    ("build", "kept"),
    [
        (sequential, ["done: first", "done: second"]),
        (parallel, ["done: first", "done: second"]),
        (hierarchical, ["done: first"]),  # the manager's call 1, the researcher's call 2
    ],
    ids=["sequential", "parallel", "hierarchical"],
)
def test_a_spent_run_budget_stops_the_run_with_the_completed_outputs(
    build: Any, kept: list[str], budget: str
) -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    listener = Warnings()
    ensemble = build(model)
    output = ensemble.run(options=RunOptions(listeners=[listener], **{budget: TWO_CALLS[budget]}))

    assert output.exit_reason is ExitReason.BUDGET
    assert sorted(o.raw for o in output.task_outputs) == kept
    manager = ensemble.manager_model
    calls = len(model.requests) + (len(manager.requests) if manager is not None else 0)
    assert calls == 2
    assert listener.said("budget_exceeded") == [RUN_SPENT[budget]]
    assert output.warnings == (RUN_SPENT[budget],)
    assert output.trace.exit_reason == "BUDGET"
    assert output.trace.warnings == (RUN_SPENT[budget],)


def test_the_run_budget_counts_the_managers_and_the_workers_calls() -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    ensemble = hierarchical(model)
    output = ensemble.run(options=RunOptions(max_model_calls=2))

    manager = ensemble.manager_model
    assert isinstance(manager, ScriptedModel)
    assert (len(manager.requests), len(model.requests)) == (1, 1)
    assert output.exit_reason is ExitReason.BUDGET


def test_a_run_within_its_budget_completes() -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    output = sequential(model).run(options=RunOptions(max_model_calls=3, max_tokens=31))

    assert output.exit_reason is ExitReason.COMPLETED
    assert len(output.task_outputs) == 3
    assert output.warnings == ()


def test_a_budget_of_tokens_the_model_does_not_report_is_said_to_be_unchecked() -> None:
    model = FunctionModel(answer)  # no usage
    output = sequential(model).run(options=RunOptions(max_tokens=5))

    assert output.exit_reason is ExitReason.COMPLETED
    assert output.warnings == (
        "RunOptions max_tokens cannot be checked: the model reported no token usage for a "
        "call, so the tokens and cost spent are unknown",
    )


# ---- tasks running at once ---------------------------------------------------------------


class Gate(EnsembleListener):
    """A model whose calls wait, all together, until `open_at` calls have started or the
    run has refused a call (a listener: it hears the refusal's warning)."""

    def __init__(self, open_at: int, usage: Usage | None = None) -> None:
        self.open_at = open_at
        self.started = 0
        self.open = asyncio.Event()
        self.model = FunctionModel(self.answer, usage=usage)

    async def answer(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        self.started += 1
        if self.started >= self.open_at:
            self.open.set()
        await self.open.wait()
        return answer(messages, tools)

    async def on_run_warning(self, event: RunWarningEvent) -> None:
        if event.code == "budget_exceeded":
            self.open.set()


async def test_tasks_running_at_once_never_start_more_calls_than_max_model_calls() -> None:
    gate = Gate(open_at=4)  # a fourth call would open it (and fail the test), not hang it
    tasks = [Task(f"task {n}", llm=gate.model) for n in range(6)]
    ensemble = Ensemble(tasks=tasks, workflow=Workflow.PARALLEL)

    output = await ensemble.arun(options=RunOptions(max_model_calls=3, listeners=[gate]))

    assert gate.started == 3  # three calls in flight when the fourth was refused
    assert output.exit_reason is ExitReason.BUDGET
    assert len(output.task_outputs) == 3
    assert output.warnings == ("RunOptions max_model_calls=3: 3 model calls made; the run stops",)


async def test_tasks_running_at_once_overshoot_tokens_by_their_calls_in_flight_only() -> None:
    """Four first calls start under the budget (nothing is spent yet) and each spends more
    than all of it: the budget is overshot by the calls in flight, and no call starts
    after."""
    gate = Gate(open_at=4, usage=Usage(input_tokens=20, output_tokens=0))
    agent = Agent("Looker", "Look things up", llm=gate.model, tools=[lookup])
    tasks = [Task(f"look up {n}", agent=agent) for n in range(4)]
    ensemble = Ensemble(tasks=tasks, workflow=Workflow.PARALLEL)

    output = await ensemble.arun(options=RunOptions(max_tokens=15))

    assert gate.started == 4
    assert output.exit_reason is ExitReason.BUDGET
    assert output.task_outputs == ()
    assert re.fullmatch(
        r"RunOptions max_tokens=15: (20|40|60|80) tokens used; the run stops", output.warnings[0]
    )


async def test_a_call_that_fails_gives_its_place_back() -> None:
    """With one call allowed, a task whose call fails leaves it to the next task."""
    failed = asyncio.Event()

    class Failures(EnsembleListener):
        async def on_task_failed(self, event: TaskFailedEvent) -> None:
            failed.set()

    async def after_the_failure(value: GuardrailInput) -> GuardrailResult:
        await failed.wait()
        return GuardrailResult.success()

    def flaky(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if task_line(messages) == "breaks":
            raise RuntimeError("the provider is down")
        return "done"

    model = FunctionModel(flaky)
    breaks = Task("breaks", llm=model)
    waits = Task("waits", llm=model, input_guardrails=[after_the_failure])
    ensemble = Ensemble(
        tasks=[breaks, waits],
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )

    with pytest.raises(ParallelExecutionError) as raised:
        await ensemble.arun(options=RunOptions(max_model_calls=1, listeners=[Failures()]))

    assert list(raised.value.failed_tasks) == [breaks]
    assert [o.raw for o in raised.value.completed_outputs] == ["done"]
    assert len(model.requests) == 2


# ---- a task's budget fails the task ------------------------------------------------------


def budgeted_task(model: FunctionModel, budget: str) -> Task[None]:
    """A task that looks something up (call 1) and then answers (call 2): one call spends
    its budget."""
    agent = Agent("Looker", "Look things up", llm=model, tools=[lookup])
    return Task("look it up", agent=agent, name="budgeted", **{budget: ONE_CALL[budget]})


@pytest.mark.parametrize("budget", sorted(ONE_CALL))
def test_a_spent_task_budget_fails_the_task_of_a_sequential_run(budget: str) -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    first = Task("first", llm=model)
    spent = budgeted_task(model, budget)
    last = Task("last", llm=model, context=[spent])
    listener = Warnings()
    ensemble = Ensemble(
        tasks=[first, spent, last],
        workflow=Workflow.SEQUENTIAL,
        cost_configuration=PRICES,
        listeners=[listener],
    )

    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()

    cause = raised.value.__cause__
    assert isinstance(cause, BudgetExceededError)
    assert (cause.budget, cause.agent_role) == (budget, "Looker")
    assert cause.limit == Decimal(str(ONE_CALL[budget]))
    assert cause.used == cause.limit
    assert str(cause) == (
        f"Budget spent: {TASK_SPENT[budget]}; agent 'Looker' may make no more model calls "
        "for this task"
    )
    assert [o.raw for o in raised.value.completed_outputs] == ["done: first"]
    assert len(model.requests) == 2  # first's call, and the lookup; never the answer
    assert listener.said("budget_exceeded") == [f"{TASK_SPENT[budget]}; the task fails"]
    assert [TASK_SPENT[budget] in event.reason for event in listener.failures] == [True]


def test_a_spent_task_budget_under_continue_on_error_lets_independent_work_finish() -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    spent = budgeted_task(model, "max_model_calls")
    other = Task("other", llm=model)
    after_other = Task("after other", llm=model, context=[other])
    after_spent = Task("after budgeted", llm=model, context=[spent])
    ensemble = Ensemble(
        tasks=[spent, other, after_other, after_spent],
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )

    with pytest.raises(ParallelExecutionError) as raised:
        ensemble.run()

    assert list(raised.value.failed_tasks) == [spent]
    assert isinstance(raised.value.failed_tasks[spent], BudgetExceededError)
    assert sorted(o.raw for o in raised.value.completed_outputs) == [
        "done: after other",
        "done: other",
    ]
    assert "after budgeted" not in [task_line(r.messages) for r in model.requests]


def test_a_spent_task_budget_under_fail_fast_fails_the_run() -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    spent = budgeted_task(model, "max_tokens")
    after_spent = Task("after budgeted", llm=model, context=[spent])
    ensemble = Ensemble(
        tasks=[spent, after_spent],
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.FAIL_FAST,
        cost_configuration=PRICES,
    )

    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()

    assert isinstance(raised.value.__cause__, BudgetExceededError)
    assert raised.value.completed_outputs == ()
    assert len(model.requests) == 1


class Report(BaseModel):
    title: str


def test_structured_output_corrections_count_against_the_task_budget() -> None:
    model = ScriptedModel(["not JSON", '{"title": "fixed"}'])
    task = Task("Report", llm=model, output_type=Report, max_model_calls=1)

    with pytest.raises(TaskExecutionError) as raised:
        Ensemble(tasks=[task]).run()

    assert isinstance(raised.value.__cause__, BudgetExceededError)
    assert len(model.requests) == 1


def test_a_task_budget_counts_each_execution_of_the_task_alone() -> None:
    model = FunctionModel(answer, usage=TEN_TOKENS)
    tasks = [Task(f"task {n}", llm=model, max_model_calls=1) for n in range(3)]

    output = Ensemble(tasks=tasks, workflow=Workflow.PARALLEL).run()

    assert output.exit_reason is ExitReason.COMPLETED
    assert len(output.task_outputs) == 3


# ---- bad budgets are refused before any model call ---------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_tokens", 0, "max_tokens must be > 0 when set, got: 0"),
        ("max_tokens", -5, "max_tokens must be > 0 when set, got: -5"),
        ("max_tokens", "10", "max_tokens must be an integer, got: '10'"),
        ("max_tokens", 1.5, "max_tokens must be an integer, got: 1.5"),
        ("max_model_calls", True, "max_model_calls must be an integer, got: True"),
        ("max_model_calls", 0, "max_model_calls must be > 0 when set, got: 0"),
        ("max_cost", 0, "max_cost must be a positive number when set, got: 0"),
        ("max_cost", -0.5, "max_cost must be a positive number when set, got: -0.5"),
        ("max_cost", float("nan"), "max_cost must be a positive number when set, got: nan"),
        ("max_cost", "0.05", "max_cost must be a positive number when set, got: '0.05'"),
        ("max_cost", False, "max_cost must be a positive number when set, got: False"),
    ],
)
@pytest.mark.parametrize("owner", ["RunOptions", "Task"])
def test_a_bad_budget_names_its_field_and_value(
    owner: str, field: str, value: object, message: str
) -> None:
    settings: dict[str, Any] = {field: value}
    make = RunOptions if owner == "RunOptions" else functools.partial(Task, "Write")
    with pytest.raises(ValidationError, match=f"^{re.escape(f'{owner} {message}')}$"):
        make(**settings)


def test_a_cost_is_kept_as_the_decimal_written() -> None:
    assert RunOptions(max_cost=0.1).max_cost == Decimal("0.1")
    assert Task("Write", max_cost=3).max_cost == Decimal("3")


@pytest.mark.parametrize("owner", ["RunOptions", "Task"])
def test_a_cost_budget_needs_token_prices(owner: str) -> None:
    model = ScriptedModel(["done"])
    task = Task("Write", llm=model, max_cost=0.05 if owner == "Task" else None)
    options = RunOptions(max_cost=0.05) if owner == "RunOptions" else None
    owner_name = "Task 'Write'" if owner == "Task" else "RunOptions"

    with pytest.raises(ValidationError) as raised:
        Ensemble(tasks=[task]).run(options=options)

    assert str(raised.value) == (
        f"{owner_name} max_cost=0.05 needs token prices to count the cost: give the Ensemble "
        "a cost_configuration=CostConfiguration(...)"
    )
    assert model.requests == []


def test_a_hierarchical_task_budget_is_refused() -> None:
    agent = Agent("Writer", "Write", llm=ScriptedModel([]))
    ensemble = Ensemble(
        tasks=[Task("Write", agent=agent, max_tokens=100)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=ScriptedModel([]),
    )

    with pytest.raises(ValidationError, match=r"Task 'Write' sets max_tokens, which HIERARCHICAL"):
        ensemble.run()


def test_a_handler_task_has_no_budget() -> None:
    with pytest.raises(ValidationError, match="Task cannot have both a handler and a budget"):
        Task("Sum", handler=lambda context: "3", max_model_calls=1)


def test_a_run_without_budgets_has_no_budget_to_check() -> None:
    tasks = [Task("Write"), Task("Edit")]
    assert RunBudget.of(RunOptions(), tasks, None) is None
    assert RunBudget.of(RunOptions(), [*tasks, Task("Check", max_tokens=5)], None) is not None
    assert RunBudget.of(RunOptions(max_model_calls=1), tasks, None) is not None


def test_an_ensemble_file_sets_task_budgets(tmp_path: Path) -> None:
    path = tmp_path / "crew.yaml"
    path.write_text(
        "tasks:\n  write:\n    description: Write\n    max_tokens: 500\n    max_model_calls: 3\n",
        encoding="utf-8",
    )
    task = Ensemble.from_yaml(path, llm=ScriptedModel([])).tasks[0]
    assert (task.max_tokens, task.max_model_calls) == (500, 3)
