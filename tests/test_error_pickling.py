"""Errors cross process and queue boundaries: they pickle and copy with their attributes."""

from __future__ import annotations

import copy
import pickle
from datetime import timedelta

import pytest

from agentensemble import (
    AgentExecutionError,
    GuardrailType,
    GuardrailViolationError,
    MaxIterationsExceededError,
    OutputParsingError,
    ParallelExecutionError,
    PromptTemplateError,
    RateLimitTimeoutError,
    Task,
    TaskExecutionError,
    ToolExecutionError,
    ValidationError,
)
from agentensemble.errors import AgentEnsembleError, BudgetExceededError

ERRORS: list[AgentEnsembleError] = [
    ValidationError("Agent role must not be blank"),
    PromptTemplateError(["topic"], "About {topic}"),
    TaskExecutionError(
        "Task failed: x", task_description="x", agent_role="r", completed_outputs=()
    ),
    ParallelExecutionError(completed_outputs=(), failed_tasks={Task("x"): ValueError("boom")}),
    AgentExecutionError("Agent 'r' failed: boom", agent_role="r", task_description="x"),
    BudgetExceededError(
        budget="max_tokens",
        limit=100,
        used=120,
        spent="Task 'x' max_tokens=100: 120 tokens used",
        agent_role="r",
        task_description="x",
    ),
    MaxIterationsExceededError(
        agent_role="r", task_description="x", max_iterations=2, tool_calls_made=2
    ),
    RateLimitTimeoutError(
        requests=1, period=timedelta(seconds=1), wait_timeout=timedelta(seconds=2)
    ),
    ToolExecutionError("bad", tool_name="t", tool_input="{}"),
    OutputParsingError(
        "Structured output parsing failed",
        raw_output="nope",
        parse_errors=["no JSON"],
        attempt_count=1,
        output_type=int,
        task_description="x",
        agent_role="r",
    ),
    GuardrailViolationError(
        guardrail_type=GuardrailType.INPUT,
        violation_message="no",
        task_description="x",
        agent_role="r",
    ),
]


@pytest.mark.parametrize("error", ERRORS, ids=[type(e).__name__ for e in ERRORS])
def test_errors_pickle_and_copy_with_their_attributes(error: AgentEnsembleError) -> None:
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(clone) is type(error)
        assert str(clone) == str(error)
        assert {k: repr(v) for k, v in vars(clone).items()} == {
            k: repr(v) for k, v in vars(error).items()
        }
