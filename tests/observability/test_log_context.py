"""The task log context: records logged during a task carry it; it is restored after."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    Task,
    TaskContextFilter,
    TaskExecutionError,
    Workflow,
    tool,
)
from agentensemble._logging import current_log_context
from agentensemble.models import Message, ScriptedModel, ToolResultMessage, ToolSpec, tool_call

_app = logging.getLogger("tests.app")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(TaskContextFilter())
        self.seen: list[tuple[str, str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = (record.task_index, record.task_description, record.agent_role)  # type: ignore[attr-defined]
        self.seen.append((record.getMessage(), *fields))


@pytest.fixture
def records() -> Iterator[_Records]:
    handler = _Records()
    _app.addHandler(handler)
    _app.setLevel(logging.INFO)
    yield handler
    _app.removeHandler(handler)


@tool
def lookup(key: str) -> str:
    """Look a key up, logging through the application's own logger."""
    _app.info("looking up %s", key)
    return "value"


def _calls_lookup_once(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    if not isinstance(messages[-1], ToolResultMessage):
        return tool_call("lookup", key="k")
    return "done"


@pytest.mark.parametrize("workflow", [Workflow.SEQUENTIAL, Workflow.PARALLEL])
def test_a_tools_records_carry_its_task_and_the_context_is_restored_after(
    records: _Records, workflow: Workflow
) -> None:
    agent = Agent("Clerk", "Look things up", llm=FunctionModel(_calls_lookup_once), tools=[lookup])
    tasks = [Task("Look up the first", agent=agent), Task("Look up the second", agent=agent)]

    Ensemble(tasks=tasks, workflow=workflow).run()
    _app.info("after the run")

    assert sorted(records.seen) == [
        ("after the run", "", "", ""),
        ("looking up k", "1/2", "Look up the first", "Clerk"),
        ("looking up k", "2/2", "Look up the second", "Clerk"),
    ]


async def test_the_context_is_restored_after_a_task_fails() -> None:
    during: list[str] = []

    def fail(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        during.append(current_log_context().task_index)
        raise RuntimeError("model down")

    with pytest.raises(TaskExecutionError):
        await Ensemble(tasks=[Task("Fail")], llm=FunctionModel(fail)).arun()

    assert during == ["1/1"]
    assert current_log_context().task_index == ""


def test_a_delegated_workers_context_gives_way_to_its_callers_again(records: _Records) -> None:
    lead_model = ScriptedModel(
        [
            tool_call("delegate", agent_role="Checker", task_description="Check the key"),
            tool_call("lookup", key="k"),
            "done",
        ]
    )
    lead = Agent("Lead", "Lead", llm=lead_model, tools=[lookup], allow_delegation=True)
    checker = Agent(
        "Checker", "Check", llm=ScriptedModel([tool_call("lookup", key="k"), "ok"]), tools=[lookup]
    )

    Ensemble(tasks=[Task("Find the key", agent=lead)], agents=[checker]).run()

    assert records.seen == [
        ("looking up k", "1/1", "Check the key", "Checker"),
        ("looking up k", "1/1", "Find the key", "Lead"),
    ]
    assert current_log_context().task_index == ""
