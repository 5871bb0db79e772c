"""`ToolContext` injection, tool deadlines and tool names (DESIGN 3b)."""

from __future__ import annotations

import asyncio

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleListener,
    ScriptedModel,
    Task,
    TaskStartEvent,
    ToolCallEvent,
    ToolContext,
    ValidationError,
    tool,
    tool_call,
)

seen: list[ToolContext] = []


@tool
def remember(context: ToolContext, note: str) -> str:
    """Remember a note for this task."""
    seen.append(context)
    return f"noted {note}"


class Notebook:
    @tool
    async def jot(self, context: ToolContext, line: int) -> str:
        """Jot a line number."""
        seen.append(context)
        return f"line {line}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    seen.clear()


def test_the_context_parameter_is_not_in_the_schema() -> None:
    assert remember.spec.parameters["properties"] == {"note": {"type": "string"}}
    assert remember.spec.parameters["required"] == ["note"]
    assert list(Notebook().jot.spec.parameters["properties"]) == ["line"]


class Ids(EnsembleListener):
    def __init__(self) -> None:
        self.starts: list[TaskStartEvent] = []
        self.tools: list[ToolCallEvent] = []

    async def on_task_start(self, event: TaskStartEvent) -> None:
        self.starts.append(event)

    async def on_tool_call(self, event: ToolCallEvent) -> None:
        self.tools.append(event)


def test_tools_receive_the_ids_the_run_reports() -> None:
    ids = Ids()
    llm = ScriptedModel(
        [tool_call("remember", note="x"), "first", tool_call("jot", line=3), "second"]
    )
    agent = Agent("Scribe", "Write things down", llm=llm, tools=[remember, Notebook()])
    Ensemble(
        tasks=[Task("Take notes", agent=agent), Task("Take more notes", agent=agent)],
        listeners=[ids],
    ).run()
    assert [(c.task_id, c.run_id) for c in seen] == [
        (start.task_id, start.ensemble_id) for start in ids.starts
    ]
    assert [c.task_id for c in seen] == [event.task_id for event in ids.tools]
    assert [c.task_description for c in seen] == ["Take notes", "Take more notes"]
    assert {(c.agent_role, c.depth, c.parent_task_id) for c in seen} == {("Scribe", 0, None)}


async def test_invoking_a_context_tool_alone_asks_for_a_context() -> None:
    with pytest.raises(TypeError, match=r"Tool 'remember' takes a ToolContext"):
        await remember.invoke('{"note": "x"}')
    context = ToolContext(run_id="r", task_id="t", agent_role="A", task_description="d")
    result = await remember.invoke('{"note": "x"}', context)
    assert result.output == "noted x"
    assert seen == [context]


async def test_a_tool_past_its_timeout_fails_with_a_message_naming_it() -> None:
    never = asyncio.Event()

    @tool(timeout=0.01)
    async def slow() -> str:
        """Never finishes on its own."""
        await never.wait()
        return "late"

    result = await slow.invoke("{}")
    assert not result.is_success
    assert result.text_for_model == "Error: Tool 'slow' timed out after 0.01s (its @tool timeout)"


@pytest.mark.parametrize("name", ["get weather", "", "x" * 65, "naïve"])
def test_tool_names_providers_reject_are_rejected_at_once(name: str) -> None:
    with pytest.raises(ValidationError, match="name must be 1-64 letters, digits"):
        tool(name=name)(lambda: "x")


def test_a_bad_tool_timeout_names_the_tool() -> None:
    with pytest.raises(ValidationError, match="Tool 'f' timeout must be a positive number"):

        @tool(timeout=-1)
        def f() -> str:
            """F."""
            return "f"
