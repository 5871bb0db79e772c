"""Guardrails: checks that run before a task's first model call and after its answer.

A guardrail is a callable, sync or async, that takes a `GuardrailInput` (input guardrails)
or a `GuardrailOutput` (output guardrails) and returns a `GuardrailResult`::

    def no_secrets(output: GuardrailOutput) -> GuardrailResult:
        if "password" in output.raw_response.lower():
            return GuardrailResult.failure("the answer mentions a password")
        return GuardrailResult.success()

    Task("Summarise the incident", output_guardrails=[no_secrets])

A task's guardrails run in order and the first failure wins: the task fails with a
`GuardrailViolationError` and the later guardrails are not called. A guardrail that raises
counts as a failure of that guardrail. Sync guardrails run in a worker thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from agentensemble.enums import GuardrailType
from agentensemble.errors import GuardrailViolationError

if TYPE_CHECKING:
    from agentensemble.outputs import TaskOutput

__all__ = [
    "GuardrailInput",
    "GuardrailOutput",
    "GuardrailResult",
    "GuardrailType",
    "GuardrailViolationError",
    "InputGuardrail",
    "OutputGuardrail",
]


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """What a guardrail decided: `success()` or `failure(reason)`."""

    is_success: bool
    message: str = ""
    """Why the guardrail failed ("" on success)."""

    @classmethod
    def success(cls) -> GuardrailResult:
        """The check passed."""
        return _SUCCESS

    @classmethod
    def failure(cls, reason: str) -> GuardrailResult:
        """The check failed; `reason` becomes the error's ``violation_message``."""
        return cls(False, str(reason))


_SUCCESS = GuardrailResult(True)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailInput:
    """What an input guardrail sees, before any model call."""

    task_description: str
    """The description after template resolution."""
    expected_output: str
    context_outputs: tuple[TaskOutput[Any], ...]
    """Outputs of the task's context tasks, in the order of its ``context``."""
    agent_role: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailOutput:
    """What an output guardrail sees, after the answer was parsed."""

    raw_response: str
    """The answer text."""
    parsed_output: Any
    """The structured result when the task has an ``output_type``, else None."""
    task_description: str
    agent_role: str


InputGuardrail: TypeAlias = Callable[
    [GuardrailInput], "GuardrailResult | Awaitable[GuardrailResult]"
]
"""A sync or async check of a task's input."""
OutputGuardrail: TypeAlias = Callable[
    [GuardrailOutput], "GuardrailResult | Awaitable[GuardrailResult]"
]
"""A sync or async check of a task's output."""
