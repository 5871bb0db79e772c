"""Metrics, -1 propagation and cost arithmetic (BEHAVIOUR §13)."""

from decimal import Decimal

import pytest

from agentensemble import (
    AssistantMessage,
    ChatResponse,
    CostConfiguration,
    Ensemble,
    ScriptedModel,
    Task,
    Usage,
    ValidationError,
    Workflow,
)
from agentensemble.observability import ExecutionMetrics, TaskMetrics


def test_cost_is_rate_times_tokens_rounded_half_up_to_eight_places() -> None:
    config = CostConfiguration("0.000000015", "0.000000025")
    # 0.000000015 * 3 = 0.000000045 -> 0.00000005 (half up); 0.000000025 * 1 -> 0.00000003
    assert config.estimate(3, 1) == Decimal("0.00000008")
    assert config.estimate(1000, 2000) == Decimal("0.000015") + Decimal("0.00005")
    assert config.estimate(-1, 10) is None
    assert config.estimate(10, -1) is None
    assert CostConfiguration(0.5, 1).estimate(2, 3) == Decimal("4")
    assert CostConfiguration(1, 1).currency == "USD"


@pytest.mark.parametrize("rate", [-1, "abc", float("nan"), None])
def test_invalid_rates(rate: object) -> None:
    with pytest.raises(
        ValidationError, match="CostConfiguration input_token_rate must be a non-negative number"
    ):
        CostConfiguration(rate, 1)  # type: ignore[arg-type]  # None is not a rate


def test_task_and_run_costs() -> None:
    llm = ScriptedModel(["a", "b"], usage=Usage(1000, 500))
    config = CostConfiguration("0.000001", "0.000002")
    output = Ensemble(
        tasks=[Task("A"), Task("B")],
        llm=llm,
        cost_configuration=config,
        workflow=Workflow.SEQUENTIAL,
    ).run()
    assert [o.metrics.cost_estimate for o in output.task_outputs] == [Decimal("0.002")] * 2
    assert output.metrics.total_cost_estimate == Decimal("0.004")
    assert output.trace is not None
    assert output.trace.total_cost_estimate == Decimal("0.004")


def test_unknown_tokens_propagate_and_make_cost_unknown() -> None:
    known = ChatResponse(AssistantMessage(text="a"), Usage(10, 5))
    unknown = ChatResponse(AssistantMessage(text="b"), Usage(None, 5))
    output = Ensemble(
        tasks=[Task("A"), Task("B")],
        llm=ScriptedModel([known, unknown]),
        cost_configuration=CostConfiguration(1, 1),
    ).run()
    first, second = (o.metrics for o in output.task_outputs)
    assert (first.input_tokens, first.total_tokens, first.cost_estimate) == (10, 15, Decimal(15))
    assert (second.input_tokens, second.output_tokens, second.total_tokens) == (-1, 5, -1)
    assert second.cost_estimate is None
    totals = output.metrics
    assert (totals.total_input_tokens, totals.total_output_tokens, totals.total_tokens) == (
        -1,
        10,
        -1,
    )
    assert totals.total_cost_estimate == 15  # the sum of the costs that are known


def test_aggregation() -> None:
    metrics = ExecutionMetrics.of(
        [
            TaskMetrics(
                input_tokens=1,
                output_tokens=2,
                total_tokens=3,
                llm_call_count=1,
                tool_call_count=2,
                cost_estimate=Decimal("0.1"),
            ),
            TaskMetrics(
                input_tokens=4, output_tokens=5, total_tokens=9, llm_call_count=2, tool_call_count=0
            ),
        ]
    )
    assert (metrics.total_input_tokens, metrics.total_output_tokens, metrics.total_tokens) == (
        5,
        7,
        12,
    )
    assert (metrics.total_llm_call_count, metrics.total_tool_calls) == (3, 2)
    assert metrics.total_cost_estimate == Decimal("0.1")
    assert ExecutionMetrics.of([]).total_cost_estimate is None
