"""Before-hooks: the one way to influence a run from outside its configuration.

A hook is any object with a ``before_model_call(call)`` method, a
``before_tool_call(call)`` method, or both; each may be sync (it runs in a worker thread,
like tools) or async. Give hooks to ``Ensemble(hooks=[...])`` or, for one run,
``RunOptions(hooks=[...])`` (those run after the ensemble's). Before every model call and
every tool call of the run, the hooks run in order; each returns a `HookDecision`:

- ``HookDecision.allow()`` (or None): go ahead;
- ``HookDecision.change(...)``: go ahead with changed messages or settings (a model call)
  or changed arguments (a tool call); the next hook sees the change;
- ``HookDecision.veto(reason)``: stop here (the first veto wins). A vetoed tool call is
  answered to the model with an error text naming the hook and the reason, and the task
  carries on; a vetoed model call fails the task with `HookVetoError`.

A hook that raises, or returns anything else, fails its task (`AgentExecutionError`, the
original error as its cause): a broken budget hook must never silently allow. No hooks, no
cost: a run without hooks builds no `PendingModelCall` or `PendingToolCall`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agentensemble._checks import as_tuple, require_text
from agentensemble.errors import ValidationError
from agentensemble.models import (
    AssistantMessage,
    Message,
    ModelSettings,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from agentensemble.tools._context import ToolContext

__all__ = ["HookDecision", "PendingModelCall", "PendingToolCall", "UsageSoFar"]


_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageSoFar:
    """Model usage before the call a hook is asked about. A token count is -1 once any
    model call reported no usage (as in `TaskMetrics`)."""

    input_tokens: int = 0
    """Input tokens of the model calls so far."""
    output_tokens: int = 0
    """Output tokens of the model calls so far."""
    model_calls: int = 0
    """Model calls made so far."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingModelCall:
    """A model call about to be made: what ``before_model_call(call)`` receives."""

    run_id: str
    """The run (``ensemble_id`` on every event)."""
    task_id: str
    """The task execution making the call (``task_id`` on task events)."""
    parent_task_id: str | None = None
    """The delegating task's id, for a task run by delegation; else None."""
    agent_role: str
    """The role of the agent making the call."""
    task_description: str
    """The task description, templates resolved."""
    depth: int = 0
    """0 for a task of the ensemble, +1 per delegation."""
    messages: tuple[Message, ...]
    """The conversation about to be sent (after earlier hooks' changes)."""
    settings: ModelSettings | None
    """The request options about to be sent (None: the model's defaults)."""
    iteration_index: int
    """0 for the task's first model call, then 1, 2..."""
    model_name: str
    """The model's ``model_name`` (else its class name)."""
    task_usage: UsageSoFar
    """Usage of the task's model calls so far."""
    run_usage: UsageSoFar
    """Usage of every model call of the run's tasks so far (delegated workers too; the calls
    an `LLMAgentSynthesizer` made while planning are not included)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingToolCall:
    """A tool call about to run: what ``before_tool_call(call)`` receives."""

    tool_name: str
    """The tool the model called."""
    arguments: str
    """The arguments as JSON text (after earlier hooks' changes; possibly malformed, as
    the model wrote them)."""
    tool_call_id: str
    """The model's id of the call (``tool_call_id`` on `ToolCallEvent`)."""
    context: ToolContext
    """The run identity the tool receives (run, task, agent, depth)."""
    task_usage: UsageSoFar
    """Usage of the task's model calls so far."""
    run_usage: UsageSoFar
    """Usage of every model call of the run's tasks so far (not agent synthesis)."""

    @property
    def run_id(self) -> str:
        """The run (``context.run_id``)."""
        return self.context.run_id

    @property
    def task_id(self) -> str:
        """The task execution making the call (``context.task_id``)."""
        return self.context.task_id

    @property
    def agent_role(self) -> str:
        """The role of the agent making the call (``context.agent_role``)."""
        return self.context.agent_role


@dataclass(frozen=True, slots=True)
class HookDecision:
    """What a hook answers: build it with `allow`, `change` or `veto`."""

    kind: Literal["allow", "change", "veto"]
    """``allow``, ``change`` or ``veto``."""
    messages: tuple[Message, ...] | None = None
    """A model call's new messages (None: unchanged)."""
    settings: ModelSettings | None = None
    """A model call's new settings (None: unchanged)."""
    arguments: str | None = None
    """A tool call's new arguments, as JSON text (None: unchanged)."""
    reason: str = ""
    """Why the hook vetoed the call."""

    @classmethod
    def allow(cls) -> HookDecision:
        """Let the call go ahead unchanged (returning None does the same)."""
        return _ALLOW

    @classmethod
    def change(
        cls,
        *,
        messages: Sequence[Message] | None = None,
        settings: ModelSettings | None = None,
        arguments: str | Mapping[str, object] | None = None,
    ) -> HookDecision:
        """Let the call go ahead changed: a model call's `messages` (the whole
        conversation to send) or `settings`, or a tool call's `arguments` (JSON text, or a
        dict to serialize). The change applies to this call only. Raises
        `ValidationError` when nothing is changed or a value has the wrong type."""
        if messages is None and settings is None and arguments is None:
            raise ValidationError(
                "HookDecision.change needs messages, settings or arguments (use "
                "HookDecision.allow() to change nothing)"
            )
        return cls(
            "change",
            messages=None if messages is None else _check_messages(messages),
            settings=_check_settings(settings),
            arguments=None if arguments is None else _arguments_text(arguments),
        )

    @classmethod
    def veto(cls, reason: str) -> HookDecision:
        """Stop the call: a tool call is answered to the model with `reason`; a model call
        fails its task with `HookVetoError`."""
        return cls(
            "veto", reason=require_text(reason, "HookDecision.veto reason must not be blank")
        )


_ALLOW = HookDecision("allow")


def _check_messages(messages: object) -> tuple[Message, ...]:
    listed = as_tuple(messages, "HookDecision.change messages")
    if not listed:
        raise ValidationError("HookDecision.change messages must not be empty")
    for index, message in enumerate(listed):
        if not isinstance(message, _MESSAGE_TYPES):
            raise ValidationError(
                f"HookDecision.change messages[{index}] must be a message (SystemMessage, "
                f"UserMessage, AssistantMessage or ToolResultMessage), got: {message!r}"
            )
    return tuple(m for m in listed if isinstance(m, _MESSAGE_TYPES))


def _check_settings(settings: object) -> ModelSettings | None:
    if settings is None or isinstance(settings, ModelSettings):
        return settings
    raise ValidationError(
        f"HookDecision.change settings must be a ModelSettings, got: {settings!r}"
    )


def _arguments_text(arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, Mapping):
        import json

        try:
            return json.dumps(dict(arguments))
        except (TypeError, ValueError) as error:
            raise ValidationError(
                f"HookDecision.change arguments must serialize as JSON: {error}"
            ) from None
    raise ValidationError(
        "HookDecision.change arguments must be JSON text or a dict, got: "
        f"{type(arguments).__name__}"
    )
