"""The execution engine: prompts, templates, the agent loop and agent synthesis."""

from agentensemble._logging import TaskContextFilter
from agentensemble.execution._handler import HandlerContext
from agentensemble.execution._synthesis import (
    AgentSynthesizer,
    LLMAgentSynthesizer,
    Persona,
    TemplateAgentSynthesizer,
)
from agentensemble.execution._templates import resolve_template

__all__ = [
    "AgentSynthesizer",
    "HandlerContext",
    "LLMAgentSynthesizer",
    "Persona",
    "TaskContextFilter",
    "TemplateAgentSynthesizer",
    "resolve_template",
]
