from collections.abc import Sequence
from typing import NoReturn

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    LLMAgentSynthesizer,
    ScriptedModel,
    Task,
    tool,
)
from agentensemble.agent import synthesized_agent
from agentensemble.execution._prompts import build_system_prompt
from agentensemble.execution._synthesis import template_persona
from agentensemble.models import Message, SystemMessage, ToolSpec


@pytest.mark.parametrize(
    ("description", "role"),
    [
        ("Research the latest developments in AI agents", "Researcher"),
        ("Please carefully and thoroughly write a blog post", "Writer"),
        ("Summarise the report", "Summarizer"),
        ("Now, ANALYZE: the data!", "Analyst"),
        ("one two three four five six seven eight research", "Agent"),
        ("one two three four five six seven research", "Researcher"),
        ("Tell me a joke", "Agent"),
        ("Scrape the pages", "Collector"),
        ("Re-search the topic", "Researcher"),
        ("Résumé first, then review it", "Reviewer"),
        ("Wrïte the post", "Agent"),
    ],
)
def test_template_roles(description: str, role: str) -> None:
    persona = template_persona(description)
    assert persona.role == role
    assert persona.goal == description
    assert persona.background == (
        f"An expert {role} with extensive domain knowledge and professional experience."
    )


@tool
def search(query: str) -> str:
    """Search."""
    return "results"


def test_task_level_model_tools_and_limits_reach_the_synthesised_agent() -> None:
    ensemble_llm = ScriptedModel([])
    task_llm = ScriptedModel(["answer"])
    task = Task("Research bees", llm=task_llm, tools=[search], max_iterations=4)

    output = Ensemble(tasks=[task], llm=ensemble_llm).run()

    assert output.raw == "answer"
    assert ensemble_llm.requests == []
    assert [spec.name for spec in task_llm.requests[0].tools] == ["search"]
    assert output.task_outputs[0].agent_role == "Researcher"


def test_the_template_agent_is_the_agent_the_checked_constructor_makes() -> None:
    # planning builds template agents without Agent's checks: same fields, same prompt
    llm = FunctionModel(lambda messages, tools: "x")
    persona = template_persona("Research bees")
    built = synthesized_agent(
        persona.role, persona.goal, persona.background, llm=llm, tools=(search,), max_iterations=4
    )
    checked = Agent(
        persona.role,
        persona.goal,
        background=persona.background,
        llm=llm,
        tools=[search],
        max_iterations=4,
    )
    fields = [name for name in Agent.__dataclass_fields__ if name != "tool_set"]
    assert {name: getattr(built, name) for name in fields} == {
        name: getattr(checked, name) for name in fields
    }
    assert dict(built.tool_set.by_name) == dict(checked.tool_set.by_name)
    assert build_system_prompt(built) == build_system_prompt(checked)


def test_an_explicit_agent_ignores_task_tools() -> None:
    llm = ScriptedModel(["x"])
    agent = Agent("Writer", "Write", llm=llm)
    Ensemble(tasks=[Task("Write", agent=agent, tools=[search])]).run()
    assert llm.requests[0].tools == ()


def test_llm_synthesiser_uses_the_models_persona() -> None:
    replies = [
        'Sure: {"role": "Bee Expert", "goal": "Explain bees", "background": "Apiarist."}',
        "Bees are great.",
    ]
    llm = ScriptedModel(replies)
    output = Ensemble(
        tasks=[Task("Explain bees")], llm=llm, agent_synthesizer=LLMAgentSynthesizer()
    ).run()
    assert output.task_outputs[0].agent_role == "Bee Expert"
    system = llm.requests[1].messages[0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith(
        "You are Bee Expert.\nApiarist.\n\nYour personal goal is: Explain bees"
    )


@pytest.mark.parametrize("reply", ["no json here", '{"role": "", "goal": "x"}', "{broken"])
def test_llm_synthesiser_falls_back_to_the_template(
    reply: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedModel([reply, "done"])
    output = Ensemble(
        tasks=[Task("Review the code")], llm=llm, agent_synthesizer=LLMAgentSynthesizer()
    ).run()
    assert output.task_outputs[0].agent_role == "Reviewer"
    assert "using the template" in caplog.text


def test_llm_synthesiser_does_not_hide_model_errors() -> None:
    def broken(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> NoReturn:
        raise PermissionError("invalid api key")

    with pytest.raises(PermissionError, match="invalid api key"):
        Ensemble(
            tasks=[Task("Review")],
            llm=FunctionModel(broken),
            agent_synthesizer=LLMAgentSynthesizer(),
        ).run()
