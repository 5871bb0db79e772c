"""`Agent`: a role with a goal, tools and a model."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentensemble._checks import require_int, require_text
from agentensemble._frozen import direct_maker
from agentensemble._hints import KeywordHints
from agentensemble.errors import ValidationError
from agentensemble.models import (
    ChatModel,
    ModelSettings,
    RateLimit,
    RateLimitedChatModel,
    resolve_model,
)
from agentensemble.models._settings import check_settings
from agentensemble.tools._resolve import ToolSet, check_tools

__all__ = ["Agent"]


@dataclass(frozen=True, slots=True, init=False, eq=False)
class Agent(metaclass=KeywordHints):
    """An LLM-backed worker: who it is (`role`, `goal`, `background`), what it may use
    (`tools`) and which model thinks for it (`llm`).

    Agents are immutable and may be shared by many tasks and many concurrent runs.
    Invalid settings raise `ValidationError` at construction.
    """

    role: str
    """Role title, used in prompts, logs and delegation."""
    goal: str
    """The agent's objective, included in its system prompt."""
    background: str | None
    """Persona background, included in its system prompt when set (alias: ``backstory``)."""
    tools: tuple[object, ...]
    """`@tool` functions, objects with `@tool` methods, or `AgentTool` objects."""
    llm: ChatModel
    """The model; a ``"provider:model"`` string or a LangChain chat model is converted."""
    allow_delegation: bool
    """Whether the agent may delegate subtasks to its peers."""
    verbose: bool
    """Log prompts and answers at INFO level."""
    max_iterations: int
    """How many tool calls the agent may make for one task before it is told to stop."""
    response_format: str
    """Extra formatting instructions appended to the system prompt."""
    rate_limit: RateLimit | None
    """Limit on this agent's model calls; `llm` is wrapped in its own bucket."""
    model_settings: ModelSettings | None
    """Request options for this agent's model calls (a task's own settings win)."""
    tool_set: ToolSet = field(init=False, repr=False, compare=False)
    """The tools resolved for the agent loop (derived from `tools`)."""
    _system_prompt: str | None = field(init=False, repr=False, compare=False)
    """The agent's system prompt once a run has built it (derived from the fields above,
    which never change: every task and run of the agent sends the same text)."""

    def __init__(
        self,
        role: str,
        goal: str,
        *,
        background: str | None = None,
        backstory: str | None = None,
        tools: Sequence[object] = (),
        llm: Any = None,
        allow_delegation: bool = False,
        verbose: bool = False,
        max_iterations: int = 25,
        response_format: str | None = "",
        rate_limit: RateLimit | None = None,
        model_settings: ModelSettings | None = None,
    ) -> None:
        require_text(role, "Agent role must not be blank")
        require_text(goal, "Agent goal must not be blank")
        if llm is None:
            raise ValidationError("Agent llm must not be null")
        model = resolve_model(llm, field="Agent llm")
        if rate_limit is not None:
            model = _rate_limited(model, rate_limit)
        require_int(max_iterations, "Agent max_iterations")
        if max_iterations <= 0:
            raise ValidationError(f"Agent max_iterations must be > 0, got: {max_iterations}")
        checked_tools, tool_set = check_tools(tools, owner="Tool")
        if allow_delegation and "delegate" in tool_set.by_name:
            raise ValidationError(
                f"Agent '{role}' has allow_delegation=True and a tool named 'delegate', the name "
                "of the delegation tool: rename that tool"
            )
        if background is not None and backstory is not None:
            raise ValidationError("Agent accepts background or its alias backstory, not both")
        for field_name, value in (
            ("background", background),
            ("backstory", backstory),
            ("response_format", response_format),
        ):
            if value is not None and not isinstance(value, str):
                raise ValidationError(f"Agent {field_name} must be a string, got: {value!r}")
        set_ = object.__setattr__
        set_(self, "role", role)
        set_(self, "goal", goal)
        set_(self, "background", background if background is not None else backstory)
        set_(self, "tools", checked_tools)
        set_(self, "llm", model)
        set_(self, "allow_delegation", _require_bool(allow_delegation, "allow_delegation"))
        set_(self, "verbose", _require_bool(verbose, "verbose"))
        set_(self, "max_iterations", max_iterations)
        set_(self, "response_format", response_format or "")
        set_(self, "rate_limit", rate_limit)
        set_(self, "model_settings", check_settings(model_settings, "Agent"))
        set_(self, "tool_set", tool_set)
        set_(self, "_system_prompt", None)

    def __repr__(self) -> str:
        return f"Agent(role={self.role!r})"

    def copy(self, **changes: Any) -> Agent:
        """A new, validated agent with `changes` applied (with a new rate-limit bucket)."""
        llm = self.llm
        if "llm" not in changes and self.rate_limit and isinstance(llm, RateLimitedChatModel):
            changes["llm"] = llm.model  # renew the bucket this object made, not a shared one
        return dataclasses.replace(self, **changes)


def synthesized_agent(
    role: str,
    goal: str,
    background: str,
    *,
    llm: ChatModel,
    tools: tuple[object, ...],
    max_iterations: int,
) -> Agent:
    """The engine's own: the agent planning makes for a task without one, from values
    already checked (the task's model, tools and iteration limit; a template persona's
    texts, the goal being the task's resolved description): `Agent`'s checks are skipped,
    because a run of 10,000 such tasks makes 10,000 agents. The tools are still resolved
    (an MCP server's tools are read when the run starts)."""
    checked_tools, tool_set = check_tools(tools, owner="Tool")
    agent: Agent = _agent_maker()(
        (),
        tool_set,
        None,  # the system prompt, made at the agent's first task
        role=role,
        goal=goal,
        background=background,
        tools=checked_tools,
        llm=llm,
        allow_delegation=False,
        verbose=False,
        max_iterations=max_iterations,
        response_format="",
        rate_limit=None,
        model_settings=None,
    )
    return agent


@functools.cache  # written at the first synthesised agent, not at import
def _agent_maker() -> Callable[..., Agent]:
    """A constructor that sets each slot through its descriptor (2.6 -> 1.2 µs an agent,
    with the tools' check, against `object.__setattr__` per field)."""
    return direct_maker(Agent, (), ("tool_set", "_system_prompt"))


def _rate_limited(model: ChatModel, limit: object) -> ChatModel:
    if not isinstance(limit, RateLimit):
        raise ValidationError(f"Agent rate_limit must be a RateLimit, got: {limit!r}")
    return RateLimitedChatModel(model, limit)


def _require_bool(value: object, field: str) -> bool:
    """A flag is True or False: ``verbose="no"`` would otherwise read as True."""
    if not isinstance(value, bool):
        raise ValidationError(f"Agent {field} must be True or False, got: {value!r}")
    return value
