"""The system and user prompts, exactly as the reference implementation builds them.

The user prompt is a list of sections in the BEHAVIOUR 3.2 order. The core adds the
context, task and expected-output sections; a capability adds its own (memory, review
feedback, output format...) as a `PromptSection` in its slot, and `build_user_prompt` sorts
and joins them. Each section's text carries its own separators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from agentensemble._formats import format_value
from agentensemble._logging import get_logger
from agentensemble.enums import ContextFormat

if TYPE_CHECKING:
    from agentensemble.agent import Agent
    from agentensemble.outputs import TaskOutput

__all__ = [
    "PromptSection",
    "PromptSlot",
    "build_system_prompt",
    "build_user_prompt",
    "system_prompt",
]

logger = get_logger("agentensemble.prompts")

_INSTRUCTIONS = (
    "You must produce a final answer that satisfies the expected output described in the task.\n"
    "Focus on quality and accuracy. Do not add unnecessary preamble or postscript to your "
    "final answer."
)
_LARGE_CONTEXT = 10_000


def build_system_prompt(agent: Agent) -> str:
    """Role, background, goal, the fixed instructions, then any response format."""
    parts = [f"You are {agent.role}."]
    if agent.background and agent.background.strip():
        parts.append(f"\n{agent.background}")
    parts.append(f"\n\nYour personal goal is: {agent.goal}")
    parts.append(f"\n\n{_INSTRUCTIONS}")
    if agent.response_format.strip():
        parts.append(f"\nOutput format instructions: {agent.response_format}")
    return "".join(parts).rstrip()


def system_prompt(agent: Agent) -> str:
    """The agent's system prompt, built at its first task and then reused: an agent is
    immutable, and thousands of tasks of one agent would otherwise each hold a copy. (An
    agent pickled before the cache existed has no such attribute.)"""
    prompt: str | None = getattr(agent, "_system_prompt", None)
    if prompt is None:
        prompt = build_system_prompt(agent)
        object.__setattr__(agent, "_system_prompt", prompt)
    return prompt


class PromptSlot(IntEnum):
    """Where a section goes in the user prompt (BEHAVIOUR 3.2)."""

    MEMORY = 1
    CONTEXT = 2
    LONG_TERM_MEMORY = 3
    ENTITY_KNOWLEDGE = 4
    REFLECTION = 5
    REVISION = 6
    DIRECTIVES = 7
    TASK = 8
    EXPECTED_OUTPUT = 9
    OUTPUT_FORMAT = 10


@dataclass(frozen=True, slots=True)
class PromptSection:
    """A piece of the user prompt, placed by its slot (sections of one slot keep the order
    in which they were added)."""

    slot: PromptSlot
    text: str


def build_user_prompt(
    description: str,
    expected_output: str,
    context: Sequence[TaskOutput[Any]] = (),
    sections: Sequence[PromptSection] = (),
    *,
    context_format: ContextFormat = ContextFormat.JSON,
) -> str:
    """Every section in slot order: context from previous tasks (if any), the task, its
    expected output, and whatever sections capabilities added. A capability's CONTEXT
    section (short-term memory) replaces the context section. Under `ContextFormat.TOON`
    a context output with a parsed (structured) value shows that value in TOON."""
    task = f"## Task\n{description}"
    expected = f"\n\n## Expected Output\n{expected_output}"
    if not sections:  # the common case, without the sorting
        context_text = _context_section(context, context_format) if context else ""
        return f"{context_text}{task}{expected}"
    core = [
        PromptSection(PromptSlot.TASK, task),
        PromptSection(PromptSlot.EXPECTED_OUTPUT, expected),
    ]
    if context and not any(section.slot is PromptSlot.CONTEXT for section in sections):
        core.append(PromptSection(PromptSlot.CONTEXT, _context_section(context, context_format)))
    return "".join(section.text for section in sorted((*core, *sections), key=_slot_of))


def _slot_of(section: PromptSection) -> int:
    return section.slot


def _context_section(context: Sequence[TaskOutput[Any]], context_format: ContextFormat) -> str:
    lines = [
        "## Context from Previous Tasks\n",
        "The following results from previous tasks may be relevant:\n",
    ]
    for output in context:
        if len(output.raw) > _LARGE_CONTEXT:
            logger.warning(
                "Context from task '%s' is %d characters (>10000). "
                "Consider breaking into smaller tasks.",
                output.task_description[:80],
                len(output.raw),
            )
        text = output.raw
        if output.parsed_output is not None:  # the value, not the prose it was found in
            text = format_value(output.parsed_output, context_format)
        lines.append(f"\n---\n### {output.agent_role}: {output.task_description}\n{text}\n---\n")
    lines.append("\n")
    return "".join(lines)
