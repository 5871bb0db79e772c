from typing import Any

import pytest

from agentensemble import Agent, ScriptedModel, ValidationError, tool
from agentensemble.tools import ToolResult

LLM = ScriptedModel([])


@tool
def search(query: str) -> str:
    """Search."""
    return query


class EchoTool:
    name = "echo"
    description = "Echo the input."

    def execute(self, input: str) -> ToolResult:
        return ToolResult.success(input)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"role": " ", "goal": "g", "llm": LLM}, "Agent role must not be blank"),
        ({"role": None, "goal": "g", "llm": LLM}, "Agent role must not be blank"),
        ({"role": "r", "goal": "", "llm": LLM}, "Agent goal must not be blank"),
        ({"role": "r", "goal": "g"}, "Agent llm must not be null"),
        (
            {"role": "r", "goal": "g", "llm": LLM, "max_iterations": 0},
            "Agent max_iterations must be > 0, got: 0",
        ),
        (
            {"role": "r", "goal": "g", "llm": LLM, "max_iterations": -3},
            "Agent max_iterations must be > 0, got: -3",
        ),
        (
            {"role": "r", "goal": "g", "llm": LLM, "max_iterations": "5"},
            "Agent max_iterations must be an integer, got: '5'",
        ),
        (
            {"role": "r", "goal": "g", "llm": LLM, "tools": [search, None]},
            "Tool at index 1 must not be null",
        ),
        (
            {"role": "r", "goal": "g", "llm": LLM, "tools": ["search"]},
            "Tool at index 0 (str) is neither an AgentTool, a LangChain tool, nor has "
            "@tool-annotated methods",
        ),
        (
            {"role": "r", "goal": "g", "llm": LLM, "tools": [search, search]},
            "Tool at index 1 reuses tool name 'search'; tool names must be unique",
        ),
        ({"role": 7, "goal": "g", "llm": LLM}, "Agent role must be a string, got: 7"),
        (
            {"role": "r", "goal": "g", "llm": "gpt-4"},
            "Agent llm string must look like 'provider:model'",
        ),
    ],
)
def test_validation_messages(kwargs: dict[str, Any], message: str) -> None:
    role, goal = kwargs.pop("role"), kwargs.pop("goal")
    with pytest.raises(ValidationError) as caught:
        Agent(role, goal, **kwargs)
    assert str(caught.value).startswith(message)


def test_the_first_failing_rule_wins() -> None:
    with pytest.raises(ValidationError, match="Agent role must not be blank"):
        Agent("", "", max_iterations=0)


def test_defaults() -> None:
    agent = Agent("Writer", "Write", llm=LLM)
    assert agent.background is None
    assert agent.tools == ()
    assert agent.max_iterations == 25
    assert agent.response_format == ""
    assert agent.allow_delegation is False
    assert agent.llm is LLM


def test_backstory_is_an_alias_and_none_response_format_is_empty() -> None:
    agent = Agent("Writer", "Write", llm=LLM, backstory="Veteran", response_format=None)
    assert agent.background == "Veteran"
    assert agent.response_format == ""
    with pytest.raises(ValidationError, match="background or its alias backstory"):
        Agent("Writer", "Write", llm=LLM, backstory="a", background="b")


def test_accepts_agent_tools_and_objects_with_tool_methods() -> None:
    class Toolbox:
        @tool
        def lookup(self, key: str) -> str:
            """Look up."""
            return key

    agent = Agent("r", "g", llm=LLM, tools=[search, EchoTool(), Toolbox()])
    assert len(agent.tools) == 3


def test_is_immutable_and_copy_validates() -> None:
    agent = Agent("Writer", "Write", llm=LLM)
    with pytest.raises(AttributeError):
        agent.role = "x"  # type: ignore[misc]
    renamed = agent.copy(role="Editor")
    assert (renamed.role, renamed.goal, agent.role) == ("Editor", "Write", "Writer")
    with pytest.raises(ValidationError, match="Agent max_iterations must be > 0, got: 0"):
        agent.copy(max_iterations=0)


def test_agents_without_tools_share_one_empty_tool_set() -> None:
    from agentensemble.tools._resolve import NO_TOOLS

    # thousands of synthesised agents in one run: no empty dict and ToolSet each
    assert Agent("A", "G", llm=ScriptedModel(["x"])).tool_set is NO_TOOLS


def test_an_agent_without_tools_pickles_with_its_own_empty_tool_set() -> None:
    import pickle

    copied = pickle.loads(pickle.dumps(Agent("A", "G", llm=ScriptedModel(["x"]))))
    assert (copied.role, copied.goal, copied.tool_set.specs) == ("A", "G", ())
