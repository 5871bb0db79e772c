"""Models and listeners shared by the delegation tests."""

from __future__ import annotations

from collections.abc import Sequence

from agentensemble import FunctionModel, ToolSpec
from agentensemble.models import Message
from agentensemble.observability import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    EnsembleListener,
    TaskCompleteEvent,
    TaskStartEvent,
)


def _answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """``{role} did: {task}``, read from the system and user prompts."""
    role = text_of(messages[0]).splitlines()[0].removeprefix("You are ").rstrip(".")
    task = text_of(messages[1]).splitlines()[1]
    return f"{role} did: {task}"


def text_of(message: Message) -> str:
    """A message's text ("" for an assistant message with only tool calls)."""
    return message.text or ""


def worker_model() -> FunctionModel:
    """A model that answers every task at once with who did what."""
    return FunctionModel(_answer)


class Recorder(EnsembleListener):
    """Task and delegation events, in order, as short tuples; the events themselves too."""

    def __init__(self) -> None:
        self.log: list[tuple[str, ...]] = []
        self.events: list[object] = []

    def on_task_start(self, event: TaskStartEvent) -> None:
        self.events.append(event)
        self.log.append(("task_start", event.agent_role))

    def on_task_complete(self, event: TaskCompleteEvent) -> None:
        self.events.append(event)
        self.log.append(("task_complete", event.agent_role))

    def on_delegation_started(self, event: DelegationStartedEvent) -> None:
        self.events.append(event)
        self.log.append(("started", event.delegating_agent_role, event.worker_role))

    def on_delegation_completed(self, event: DelegationCompletedEvent) -> None:
        self.events.append(event)
        self.log.append(("completed", event.delegating_agent_role, event.worker_role))

    def on_delegation_failed(self, event: DelegationFailedEvent) -> None:
        self.events.append(event)
        self.log.append(("failed", event.delegating_agent_role, event.failure_reason))

    def of(self, kind: type[object]) -> list[object]:
        return [event for event in self.events if isinstance(event, kind)]
