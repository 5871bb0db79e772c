"""Structured output: the task steps that ask for, parse and retry a typed answer
(BEHAVIOUR 3.2 "Output Format", 5.3).

- `add_output_format` adds the ``## Output Format`` section with the readable schema.
- `parse_structured_output` parses the agent's answer; on failure it asks again in a fresh
  two-message conversation (the system prompt and a correction naming the error and the
  schema), up to ``max_output_retries`` times, then raises `OutputParsingError`.
- `check_handler_output` validates a handler's structured result (or its text) once.
- `structured_settings` turns on native structured output for models that support it: the
  JSON Schema travels in `ModelSettings.output_schema`, and the prompt and parser stay the
  same, so every model shares one path and a native answer is still checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentensemble._logging import get_logger
from agentensemble.errors import OutputParsingError
from agentensemble.execution._agent_loop import ask_once
from agentensemble.execution._output_parsing import ParseFailure, parse_answer
from agentensemble.execution._prompts import PromptSection, PromptSlot
from agentensemble.models import Message, ModelSettings, SystemMessage, UserMessage
from agentensemble.models._protocol import supports_output_schema

if TYPE_CHECKING:
    from agentensemble._output_types import OutputSpec
    from agentensemble.agent import Agent
    from agentensemble.execution._steps import TaskState
    from agentensemble.task import Task

__all__ = [
    "add_output_format",
    "check_handler_output",
    "correction_message",
    "output_format_section",
    "parse_structured_output",
    "structured_settings",
]

logger = get_logger("agentensemble.structured")

_FORMAT_HEADER = (
    "\n\n## Output Format\n"
    "You MUST respond with ONLY valid JSON and nothing else. Do not include markdown fences, "
    "preamble, or explanation.\n"
    "Your response must be ONLY valid JSON matching this schema (object, array, or scalar as "
    "appropriate):\n\n"
)


def output_format_section(spec: OutputSpec) -> PromptSection:
    """The user prompt's ``## Output Format`` section for `spec`."""
    return PromptSection(PromptSlot.OUTPUT_FORMAT, _FORMAT_HEADER + spec.prompt_schema)


def correction_message(error: str, answer: str, spec: OutputSpec, task: str = "") -> str:
    """The user message of a retry: the task again (a small model forgets it in a fresh
    conversation), what went wrong, the answer, and the schema again."""
    restated = f"## Task\n{task}\n\n" if task else ""
    return (
        f"{restated}Your previous response could not be parsed as valid JSON.\n\n"
        f"Error: {error}\n\n"
        f"Your previous response was:\n{answer}\n\n"
        "You MUST respond with ONLY valid JSON matching this schema (it may be an object, "
        "array, string, number, boolean, or null as required):\n"
        f"{spec.prompt_schema}\n\n"
        "Do not include any explanation, markdown fences, or text before or after the JSON. "
        "Respond with only the JSON value."
    )


async def add_output_format(state: TaskState) -> None:
    """The prompt step's ``## Output Format`` section."""
    state.add_prompt_section(output_format_section(_spec(state)))


async def parse_structured_output(state: TaskState) -> None:
    """Parse the answer into ``state.parsed``, asking the model to correct it when needed.

    The answer that parsed becomes ``state.raw``, so the text and the parsed value of an
    output always agree (and downstream tasks see the corrected JSON).
    """
    spec, source = _spec(state), state.task.planned.source
    attempts = source.max_output_retries + 1
    errors: list[str] = []
    answer = state.raw
    for attempt in range(1, attempts + 1):
        try:
            state.parsed = parse_answer(answer, spec)
        except ParseFailure as failure:
            errors.append(str(failure))
            _log_failure(state, attempt, attempts, str(failure))
        else:
            state.raw = answer
            return
        if attempt < attempts:
            answer = await ask_once(state, _correction(state, errors[-1], answer, spec))
    raise _exhausted(state, spec, answer, errors)


async def check_handler_output(state: TaskState) -> None:
    """A handler task's typed result: its structured output validated as the output type,
    or, without one, its text parsed like an answer. No retries: there is no model."""
    import pydantic

    spec = _spec(state)
    try:
        if state.parsed is not None:
            state.parsed = spec.adapter.validate_python(state.parsed)
        else:
            state.parsed = parse_answer(state.raw, spec)
    except (ParseFailure, pydantic.ValidationError) as failure:
        raise _exhausted(state, spec, state.raw, [str(failure)]) from None


def structured_settings(
    task: Task[Any], agent: Agent, settings: ModelSettings | None
) -> ModelSettings | None:
    """`settings` with the output type's JSON Schema when the agent's model does native
    structured output and the answer is a JSON object (what providers accept); a schema
    the caller set is kept."""
    spec = task.output_spec
    if spec is None or not spec.is_object or not supports_output_schema(agent.llm):
        return settings
    if settings is not None and settings.output_schema is not None:
        return settings
    native = ModelSettings(output_schema=spec.json_schema)
    return native if settings is None else settings.merged_with(native)


def _spec(state: TaskState) -> OutputSpec:
    spec = state.task.planned.source.output_spec
    if spec is None:  # planning adds these steps only to typed tasks
        raise AssertionError("structured-output step on a task without output_type")
    return spec


def _correction(state: TaskState, error: str, answer: str, spec: OutputSpec) -> tuple[Message, ...]:
    system = state.system_prompt
    task = state.task.planned.description
    return (SystemMessage(system), UserMessage(correction_message(error, answer, spec, task)))


def _log_failure(state: TaskState, attempt: int, attempts: int, error: str) -> None:
    logger.warning(
        "[%s] Structured output attempt %d/%d for task '%s' failed: %s",
        state.task.planned.role,
        attempt,
        attempts,
        state.task.planned.description[:80],
        error,
    )


def _exhausted(
    state: TaskState, spec: OutputSpec, answer: str, errors: list[str]
) -> OutputParsingError:
    planned = state.task.planned
    return OutputParsingError(
        f"Structured output parsing failed for task '{planned.description[:80]}' after "
        f"{len(errors)} attempt(s). Expected type: {spec.name}. Last error: {errors[-1]}",
        raw_output=answer,
        parse_errors=errors,
        attempt_count=len(errors),
        output_type=spec.type_,
        task_description=planned.description,
        agent_role=planned.role,
    )
