"""Models, handlers and listeners shared by the review tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from agentensemble import FunctionModel
from agentensemble.models import Message
from agentensemble.observability import EnsembleListener, Event
from agentensemble.review import ReviewDecision, ReviewHandler, ReviewRequest

E = TypeVar("E")


def task_line(messages: Sequence[Message]) -> str:
    """The task description line of a user prompt (the line after ``## Task``)."""
    lines = (messages[1].text or "").splitlines()
    return lines[lines.index("## Task") + 1]


def echo_model() -> FunctionModel:
    """Answers every task with ``done: {task}``; what it was asked is in `.requests`."""
    return FunctionModel(lambda messages, tools: f"done: {task_line(messages)}")


def asked(model: FunctionModel) -> list[str]:
    """The task lines the model was asked about, in order."""
    return [task_line(request.messages) for request in model.requests]


class Scripted(ReviewHandler):
    """Decides with `decide` and records every request."""

    def __init__(self, decide: Callable[[ReviewRequest], ReviewDecision]) -> None:
        self.decide = decide
        self.requests: list[ReviewRequest] = []

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.requests.append(request)
        return self.decide(request)

    def reviewed(self) -> list[str]:
        """The descriptions of the tasks reviewed, in order."""
        return [request.task_description for request in self.requests]


def answering(decision: ReviewDecision) -> Scripted:
    """A handler giving `decision` every time (and recording the requests)."""
    return Scripted(lambda request: decision)


class Silent(ReviewHandler):
    """Never answers (until cancelled by the request's timeout)."""

    def __init__(self) -> None:
        self.requests: list[ReviewRequest] = []

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.requests.append(request)
        await asyncio.Event().wait()
        raise AssertionError("a silent reviewer answered")


class Events(EnsembleListener):
    """Every event, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def of(self, kind: type[E]) -> list[E]:
        return [event for event in self.events if isinstance(event, kind)]
