from typing import Any

import pytest

from agentensemble import Agent, ScriptedModel, Task, ValidationError, tool
from agentensemble.task import DEFAULT_EXPECTED_OUTPUT

LLM = ScriptedModel([])
AGENT = Agent("Writer", "Write", llm=LLM)


@tool
def search(query: str) -> str:
    """Search."""
    return query


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("d",), {"name": " "}, "Task name must not be blank when set"),
        (("  ",), {}, "Task description must not be blank"),
        ((None,), {}, "Task description must not be blank"),
        (("d", ""), {}, "Task expected_output must not be blank"),
        (("d",), {"tools": [None]}, "Task tool at index 0 must not be null"),
        (
            ("d",),
            {"tools": [search, 3]},
            "Task tool at index 1 (int) is neither an AgentTool, a LangChain tool, nor has "
            "@tool-annotated methods",
        ),
        (("d",), {"max_iterations": 0}, "Task max_iterations must be > 0 when set, got: 0"),
        (("d",), {"context": [None]}, "Task context element at index 0 must not be null"),
        (
            ("d",),
            {"context": ["other"]},
            "Task context element at index 0 must be a Task, got: str",
        ),
        (("d",), {"agent": "Writer"}, "Task agent must be an Agent, got: str"),
        (("d",), {"llm": "nope"}, "Task llm string must look like 'provider:model'"),
    ],
)
def test_validation_messages(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Task(*args, **kwargs)
    assert str(caught.value).startswith(message)


def test_self_reference_in_context_is_rejected() -> None:
    first = Task("Write", "Text", agent=AGENT)
    with pytest.raises(ValidationError, match="Task cannot reference itself in context"):
        Task("Write", "Text", agent=AGENT, context=[first])
    # without an explicit agent the check does not apply (value-equal tasks are distinct)
    assert Task("Write", "Text", context=[Task("Write", "Text")]).context


def test_of_uses_the_default_expected_output() -> None:
    assert Task.of("Research").expected_output == DEFAULT_EXPECTED_OUTPUT
    assert Task.of("Research", "A list").expected_output == "A list"
    assert DEFAULT_EXPECTED_OUTPUT == "Produce a complete and accurate response to the task."


def test_tasks_compare_by_identity() -> None:
    a, b = Task.of("Same"), Task.of("Same")
    assert a != b
    assert len({a, b}) == 2
    assert a == a


def test_copy_returns_a_new_validated_task() -> None:
    task = Task("Research {topic}", context=[Task.of("x")])
    changed = task.copy(description="Research AI")
    assert changed is not task
    assert (changed.description, task.description) == ("Research AI", "Research {topic}")
    assert changed.context == task.context
    with pytest.raises(ValidationError, match="Task description must not be blank"):
        task.copy(description="")
