"""Agent synthesis: an agent persona for a task that has none (task-first use)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentensemble._frozen import direct_init
from agentensemble._logging import get_logger
from agentensemble.models import ChatModel, SystemMessage, UserMessage

__all__ = [
    "AgentSynthesizer",
    "LLMAgentSynthesizer",
    "Persona",
    "TemplateAgentSynthesizer",
]

logger = get_logger("agentensemble.synthesis")


@direct_init
@dataclass(frozen=True, slots=True)
class Persona:
    """Who a synthesised agent is. The engine adds the model, tools and limits."""

    role: str
    goal: str
    background: str


@runtime_checkable
class AgentSynthesizer(Protocol):
    """Produces a `Persona` for a task description (already template-resolved)."""

    async def synthesize(self, description: str, llm: ChatModel) -> Persona:
        """The persona of the agent that will run the task."""
        ...


_VERB_ROLES = {
    "Researcher": "research investigate find discover search",
    "Writer": "write draft compose document",
    "Creator": "create",
    "Generator": "generate",
    "Analyst": "analyze analyse evaluate assess compare",
    "Reviewer": "review",
    "Auditor": "audit",
    "Designer": "design",
    "Planner": "plan",
    "Developer": "build implement develop code program",
    "Tester": "test verify",
    "Validator": "validate",
    "Summarizer": "summarize summarise",
    "Translator": "translate",
    "Classifier": "classify categorize",
    "Extractor": "extract",
    "Monitor": "monitor",
    "Tracker": "track",
    "Collector": "scrape",
    "Parser": "parse",
    "Converter": "convert",
    "Calculator": "calculate compute",
    "Formatter": "format",
    "Cleaner": "clean",
    "Processor": "process",
}
ROLE_BY_VERB = {verb: role for role, verbs in _VERB_ROLES.items() for verb in verbs.split()}
_WORDS_SCANNED = 8
_NON_LETTERS = re.compile(r"[^a-z]")


def template_persona(description: str) -> Persona:
    """Role from the first known verb among the first eight words; goal = the description."""
    role = "Agent"
    for word in description.split()[:_WORDS_SCANNED]:
        letters = word.lower()
        if not (letters.isascii() and letters.isalpha()):  # most words: nothing to strip
            letters = _NON_LETTERS.sub("", letters)
        candidate = ROLE_BY_VERB.get(letters)
        if candidate:
            role = candidate
            break
    return Persona(role, description, _background(role))


@functools.cache  # one text per role (a few dozen), shared by the agents of every run
def _background(role: str) -> str:
    return f"An expert {role} with extensive domain knowledge and professional experience."


class TemplateAgentSynthesizer:
    """The default synthesiser: a role from a verb table, no model call."""

    async def synthesize(self, description: str, llm: ChatModel) -> Persona:
        """The template persona for `description` (`llm` is not used)."""
        return template_persona(description)


_LLM_SYSTEM = (
    "You design the persona of an AI agent for a task. Answer with only a JSON object with "
    'the string fields "role" (a short job title), "goal" (one sentence) and "background" '
    "(one or two sentences)."
)


class LLMAgentSynthesizer:
    """Asks the model for a persona; falls back to the template one if the answer is unusable.

    Model errors are not hidden: they propagate to the caller.
    """

    async def synthesize(self, description: str, llm: ChatModel) -> Persona:
        """A persona written by `llm` for `description`."""
        response = await llm.chat(
            (SystemMessage(_LLM_SYSTEM), UserMessage(f"Task:\n{description}"))
        )
        persona = _parse_persona(response.message.text or "")
        if persona is None:
            logger.warning(
                "LLM agent synthesis gave no usable persona for task '%s'; using the template",
                description[:80],
            )
            return template_persona(description)
        return persona


def _parse_persona(text: str) -> Persona | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    fields = [data.get(key) if isinstance(data, dict) else None for key in ("role", "goal")]
    if not all(isinstance(value, str) and value.strip() for value in fields):
        return None
    role, goal = (str(value).strip() for value in fields)
    background = data.get("background")
    if not isinstance(background, str) or not background.strip():
        background = _background(role)
    return Persona(role, goal, background.strip())
