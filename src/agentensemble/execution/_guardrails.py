"""The guardrail task steps: input guardrails before the first model call, output
guardrails after structured parsing (BEHAVIOUR 6.1 steps 2 and 9).

Guardrails run in order; the first failure raises `GuardrailViolationError` and the rest
are not called. A guardrail that raises, or returns something other than a
`GuardrailResult`, is a failure of that guardrail (the exception is the error's cause).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentensemble._calling import call_user_code
from agentensemble.enums import GuardrailType
from agentensemble.errors import GuardrailViolationError, describe_error
from agentensemble.guardrails import GuardrailInput, GuardrailOutput, GuardrailResult

if TYPE_CHECKING:
    from agentensemble.execution._steps import TaskState

__all__ = ["check_input", "check_output"]


async def check_input(state: TaskState) -> None:
    """Run the task's input guardrails on its description, expected output and context."""
    planned = state.task.planned
    value = GuardrailInput(
        task_description=planned.description,
        expected_output=planned.expected_output,
        context_outputs=state.task.context_outputs,
        agent_role=planned.role,
    )
    await _run(planned.source.input_guardrails, value, GuardrailType.INPUT, state)


async def check_output(state: TaskState) -> None:
    """Run the task's output guardrails on its answer and parsed output."""
    planned = state.task.planned
    value = GuardrailOutput(
        raw_response=state.raw,
        parsed_output=state.parsed,
        task_description=planned.description,
        agent_role=planned.role,
    )
    await _run(planned.source.output_guardrails, value, GuardrailType.OUTPUT, state)


async def _run(
    guardrails: Sequence[Callable[[Any], Any]],
    value: GuardrailInput | GuardrailOutput,
    kind: GuardrailType,
    state: TaskState,
) -> None:
    planned = state.task.planned
    for guardrail in guardrails:
        started = time.perf_counter()
        reason, cause = await _verdict(guardrail, value)
        await state.recorder.guardrail_checked(kind.value, _name(guardrail), reason, started)
        if reason is None:
            continue
        raise GuardrailViolationError(
            guardrail_type=kind,
            violation_message=reason,
            task_description=planned.description,
            agent_role=planned.role,
        ) from cause


async def _verdict(
    guardrail: Callable[[Any], Any], value: object
) -> tuple[str | None, BaseException | None]:
    """(None, None) when the guardrail passes, else (the reason, the exception if any)."""
    try:
        result = await call_user_code(guardrail, value)
    except GuardrailViolationError:
        raise  # a guardrail may reject by raising the error itself
    except Exception as error:
        raised = type(error).__name__
        detail = describe_error(error)
        shown = raised if detail == raised else f"{raised}: {detail}"
        return f"guardrail {_name(guardrail)} raised {shown}", error
    if not isinstance(result, GuardrailResult):
        return (
            f"guardrail {_name(guardrail)} returned {type(result).__name__}, not a "
            "GuardrailResult (return GuardrailResult.success() or .failure(reason))",
            None,
        )
    return (None, None) if result.is_success else (result.message, None)


def _name(guardrail: object) -> str:
    return str(getattr(guardrail, "__qualname__", None) or type(guardrail).__name__)
