"""The system and user prompts, exactly as the reference implementation builds them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentensemble._logging import get_logger

if TYPE_CHECKING:
    from agentensemble.agent import Agent
    from agentensemble.outputs import TaskOutput

__all__ = ["build_system_prompt", "build_user_prompt"]

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


def build_user_prompt(
    description: str, expected_output: str, context: Sequence[TaskOutput] = ()
) -> str:
    """Context from previous tasks (if any), then the task and its expected output."""
    parts: list[str] = []
    if context:
        parts.append(_context_section(context))
    parts.append(f"## Task\n{description}")
    parts.append(f"\n\n## Expected Output\n{expected_output}")
    return "".join(parts)


def _context_section(context: Sequence[TaskOutput]) -> str:
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
        lines.append(
            f"\n---\n### {output.agent_role}: {output.task_description}\n{output.raw}\n---\n"
        )
    lines.append("\n")
    return "".join(lines)
