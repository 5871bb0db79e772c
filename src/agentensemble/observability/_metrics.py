"""Per-task and per-run execution metrics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from agentensemble._frozen import direct_init, direct_new

__all__ = ["NO_TIME", "ExecutionMetrics", "TaskMetrics", "add_known"]

UNKNOWN = -1
"""Token count reported when a provider gave no usage."""
NO_TIME = timedelta(0)
"""Zero time, made once: building `timedelta(0)` costs more than adding to it, and one
object serves every record that has spent none. (The fields' defaults stay written as
`timedelta(0)`: the API reference shows them as written.)"""


def add_known(left: int, right: int | None) -> int:
    """Sum two token counts where -1 (or None) means unknown and stays unknown."""
    if left == UNKNOWN or right is None or right == UNKNOWN:
        return UNKNOWN
    return left + right


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskMetrics:
    """What one task cost. Token counts are -1 when any model call reported no usage."""

    input_tokens: int = UNKNOWN
    output_tokens: int = UNKNOWN
    total_tokens: int = UNKNOWN
    llm_latency: timedelta = timedelta(0)
    """Time spent waiting for the model."""
    tool_execution_time: timedelta = timedelta(0)
    """Time spent running tools."""
    prompt_build_time: timedelta = timedelta(0)
    memory_retrieval_time: timedelta = timedelta(0)
    llm_call_count: int = 0
    tool_call_count: int = 0
    memory_operations: int = 0
    cost_estimate: Decimal | None = None
    """Estimated cost, when a cost configuration is set and tokens are known."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionMetrics:
    """Totals over every task of a run; -1 token totals when any task's tokens are unknown."""

    total_input_tokens: int = 0
    total_output_tokens: int = 0
    total_tokens: int = 0
    total_llm_latency: timedelta = timedelta(0)
    total_tool_execution_time: timedelta = timedelta(0)
    total_llm_call_count: int = 0
    total_tool_calls: int = 0
    total_memory_operations: int = 0
    total_memory_retrieval_time: timedelta = timedelta(0)
    total_cost_estimate: Decimal | None = None
    """Sum of the known task costs (None when no task has one)."""

    @classmethod
    def of(cls, tasks: Iterable[TaskMetrics]) -> ExecutionMetrics:
        """Aggregate task metrics."""
        inputs = outputs = 0
        latency = tool_time = memory_time = NO_TIME
        calls = tool_calls = memory_operations = 0
        cost: Decimal | None = None
        for metrics in tasks:
            inputs = add_known(inputs, metrics.input_tokens)
            outputs = add_known(outputs, metrics.output_tokens)
            latency += metrics.llm_latency
            tool_time += metrics.tool_execution_time
            calls += metrics.llm_call_count
            tool_calls += metrics.tool_call_count
            memory_operations += metrics.memory_operations
            memory_time += metrics.memory_retrieval_time
            if metrics.cost_estimate is not None:
                cost = (cost or Decimal(0)) + metrics.cost_estimate
        # a subclass is built as the caller's class would be built
        make = direct_new(ExecutionMetrics) if cls is ExecutionMetrics else cls
        return make(
            total_input_tokens=inputs,
            total_output_tokens=outputs,
            total_tokens=add_known(inputs, outputs),
            total_llm_latency=latency,
            total_tool_execution_time=tool_time,
            total_llm_call_count=calls,
            total_tool_calls=tool_calls,
            total_memory_operations=memory_operations,
            total_memory_retrieval_time=memory_time,
            total_cost_estimate=cost,
        )
