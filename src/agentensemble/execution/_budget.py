"""Run and task budgets (`RunOptions` and `Task` ``max_tokens``, ``max_cost`` and
``max_model_calls``), checked before every model call of the agent loop.

`RunBudget` is built once per run, and only when the run or one of its tasks sets a
budget: a run without one checks nothing. The tokens (and so the cost) spent are read
from the run's trace fold, as the before-hooks read usage. The run's model calls are
counted as they are admitted, so tasks running at once never start more calls than
``max_model_calls`` together; a call may start while the tokens and cost spent are under
their budgets, so tasks running at once go over those by at most what their calls in
flight use. A call that fails or is cancelled before it is counted gives its place back.

A spent run budget ends the run: `BudgetSpent` is a control-flow signal, so the run
returns its completed outputs with ``ExitReason.BUDGET``. A spent task budget fails that
task with `BudgetExceededError`, and the workflow's error strategy applies. Either is
announced first by a ``budget_exceeded`` run warning naming the budget. A token or cost
budget that cannot be counted (the model reports no usage) is announced once by a
``budget_unmeasured`` warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agentensemble._control import ControlFlowSignal
from agentensemble.enums import ExitReason
from agentensemble.errors import BudgetExceededError, ValidationError
from agentensemble.observability._metrics import add_known

if TYPE_CHECKING:
    from agentensemble.execution._context import TaskContext
    from agentensemble.observability._cost import CostConfiguration
    from agentensemble.observability._trace_fold import Usage
    from agentensemble.options import RunOptions
    from agentensemble.task import Task

__all__ = ["BudgetSpent", "Limits", "ModelCall", "RunBudget", "Spent", "has_budget"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The budgets one owner sets: the run's options, or one task."""

    owner: str
    """How messages name the owner: ``RunOptions`` or ``Task 'write'``."""
    max_tokens: int | None
    max_cost: Decimal | None
    max_model_calls: int | None

    @classmethod
    def of(cls, owner: str, source: RunOptions | Task[Any]) -> Limits | None:
        """The budgets `source` sets (checked when it was made); None when it sets none."""
        tokens, cost, calls = source.max_tokens, source.max_cost, source.max_model_calls
        if tokens is None and cost is None and calls is None:
            return None
        return cls(owner, tokens, None if cost is None else Decimal(str(cost)), calls)

    @classmethod
    def of_task(cls, task: Task[Any]) -> Limits | None:
        """The budgets of one task, named by its name (else its description)."""
        return cls.of(f"Task '{task.label}'", task) if has_budget(task) else None

    def spent(self, calls: int, usage: Usage, prices: CostConfiguration | None) -> Spent | None:
        """The first of these budgets that `calls` model calls using `usage` have spent
        (None: another call may start). Unknown token counts spend nothing."""
        if self.max_model_calls is not None and calls >= self.max_model_calls:
            return Spent(self.owner, "max_model_calls", self.max_model_calls, calls, "model call")
        tokens = add_known(usage.input_tokens, usage.output_tokens)
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return Spent(self.owner, "max_tokens", self.max_tokens, tokens, "token")
        if self.max_cost is None or prices is None:
            return None
        cost = prices.estimate(usage.input_tokens, usage.output_tokens)
        if cost is not None and cost >= self.max_cost:
            return Spent(self.owner, "max_cost", self.max_cost, cost, prices.currency)
        return None

    def unmeasured(self, usage: Usage) -> str | None:
        """The token or cost budget that `usage` cannot be checked against (the model
        reported no token counts), if any."""
        if usage.input_tokens >= 0 and usage.output_tokens >= 0:
            return None
        if self.max_tokens is not None:
            return "max_tokens"
        return "max_cost" if self.max_cost is not None else None

    def require_prices(self, prices: CostConfiguration | None) -> None:
        """A cost budget needs token prices to count cost with."""
        if self.max_cost is not None and prices is None:
            raise ValidationError(
                f"{self.owner} max_cost={self.max_cost} needs token prices to count the "
                "cost: give the Ensemble a cost_configuration=CostConfiguration(...)"
            )


@dataclass(frozen=True, slots=True)
class Spent:
    """A budget that is spent: which, its value, and what was used."""

    owner: str
    budget: str
    """``max_tokens``, ``max_cost`` or ``max_model_calls``."""
    limit: int | Decimal
    used: int | Decimal
    unit: str
    """``token``, ``model call`` (made plural as needed) or the cost's currency."""

    def __str__(self) -> str:
        """``RunOptions max_tokens=1000: 1,034 tokens used``."""
        budget = f"{self.owner} {self.budget}={self.limit}"
        if isinstance(self.used, Decimal):
            return f"{budget}: {_amount(self.used)} {self.unit} spent"
        unit = self.unit if self.used == 1 else f"{self.unit}s"
        verb = "made" if self.budget == "max_model_calls" else "used"
        return f"{budget}: {self.used:,} {unit} {verb}"


def _amount(value: Decimal) -> str:
    """A cost as people write it: ``0.0512``, ``3``."""
    return f"{value.normalize():f}"


class BudgetSpent(ControlFlowSignal):
    """A `RunOptions` budget is spent: the run ends with its completed outputs and
    ``ExitReason.BUDGET``."""

    exit_reason = ExitReason.BUDGET

    def __init__(self, spent: Spent) -> None:
        super().__init__(str(spent))
        self.spent = spent


def has_budget(task: Task[Any]) -> bool:
    """Whether `task` sets a budget of its own."""
    return (
        task.max_tokens is not None or task.max_cost is not None or task.max_model_calls is not None
    )


class RunBudget:
    """The budgets of one run and the model calls admitted against them."""

    __slots__ = ("_calls", "_ended", "_prices", "_unmeasured", "limits")

    def __init__(self, limits: Limits | None, prices: CostConfiguration | None) -> None:
        self.limits = limits
        """The run's own budgets (`RunOptions`); None when only tasks set budgets."""
        self._prices = prices
        self._calls = 0
        """The run's model calls admitted: made, or in flight."""
        self._ended: Spent | None = None
        """The run budget that ended the run, once one has."""
        self._unmeasured: set[str] = set()
        """Owners already told their token or cost budget cannot be counted."""

    @classmethod
    def of(
        cls, options: RunOptions, tasks: Sequence[Task[Any]], prices: CostConfiguration | None
    ) -> RunBudget | None:
        """The budget of a run with `options` over `tasks` (with `prices`, the ensemble's
        cost configuration); None when neither sets one. Raises `ValidationError` (before
        any model call) for a cost budget without prices."""
        limits = Limits.of("RunOptions", options)
        if limits is None and not tasks:  # the common case: no budget anywhere
            return None
        owners = [limits] if limits is not None else []
        owners.extend(found for found in map(Limits.of_task, tasks) if found is not None)
        if not owners:
            return None
        for owner in owners:
            owner.require_prices(prices)
        return cls(limits, prices)

    def model_call(self, task: TaskContext) -> ModelCall:
        """One model call of `task` within the budgets: its `admit` raises `BudgetSpent` or
        `BudgetExceededError` instead of letting it start; `settle` once it is over."""
        return ModelCall(self, task)

    async def admit(self, task: TaskContext) -> None:
        """Count one more model call of `task`, or refuse it: the run's budgets first (a
        spent one ends the run), then the task's. Nothing is awaited between the checks and
        the count, so tasks running at once cannot take the same last place."""
        run, own = task.run.trace.run_usage, task.run.trace.usage(task.task_id)
        task_limits = Limits.of_task(task.planned.source)
        await self._note_unmeasured(task, self.limits, run)
        await self._note_unmeasured(task, task_limits, own)
        spent = self._ended
        if spent is None and self.limits is not None:
            spent = self.limits.spent(self._calls, run, self._prices)
        if spent is not None:
            await self._end_run(task, spent)
        if task_limits is not None:
            spent = task_limits.spent(own.model_calls, own, self._prices)
            if spent is not None:
                await self._fail_task(task, spent)
        self._calls += 1

    def restored(self, calls: int) -> None:
        """Count the model calls of a task a resumed run restored (made in the run it
        resumes): a run's budget covers the whole run, however many processes ran it."""
        self._calls += calls

    def release(self) -> None:
        """Give back the place of an admitted call that was never counted."""
        self._calls -= 1

    async def _end_run(self, task: TaskContext, spent: Spent) -> None:
        signal = BudgetSpent(spent)
        if self._ended is None:  # the first task to find it spent tells; the others stop
            self._ended = spent
            task.run.stop.request(signal)
            await task.run.warn("budget_exceeded", f"{spent}; the run stops")
        raise signal

    async def _fail_task(self, task: TaskContext, spent: Spent) -> None:
        await task.run.warn("budget_exceeded", f"{spent}; the task fails")
        raise BudgetExceededError(
            budget=spent.budget,
            limit=spent.limit,
            used=spent.used,
            spent=str(spent),
            agent_role=task.planned.role,
            task_description=task.planned.description,
        )

    async def _note_unmeasured(
        self, task: TaskContext, limits: Limits | None, usage: Usage
    ) -> None:
        if limits is None or limits.owner in self._unmeasured:
            return
        budget = limits.unmeasured(usage)
        if budget is None:
            return
        self._unmeasured.add(limits.owner)
        await task.run.warn(
            "budget_unmeasured",
            f"{limits.owner} {budget} cannot be checked: the model reported no token usage "
            "for a call, so the tokens and cost spent are unknown",
        )


class ModelCall:
    """One model call's place within the run's budgets, from its admission until the trace
    counts it; a call that fails or is cancelled before that gives its place back."""

    __slots__ = ("_before", "_budget", "_task")

    def __init__(self, budget: RunBudget, task: TaskContext) -> None:
        self._budget = budget
        self._task = task
        self._before = 0

    def _counted(self) -> int:
        """The task's model calls the trace has counted (one task calls one at a time)."""
        return self._task.run.trace.usage(self._task.task_id).model_calls

    async def admit(self) -> None:
        """Take the call's place, or raise if the budgets are spent."""
        self._before = self._counted()
        await self._budget.admit(self._task)

    def settle(self) -> None:
        """The call is over: give its place back if the trace did not count it."""
        if self._counted() == self._before:
            self._budget.release()
