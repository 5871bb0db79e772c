"""An agent's role, goal and background take the run's inputs, as CrewAI's do."""

from __future__ import annotations

import pytest

from agentensemble import Agent, Ensemble, PromptTemplateError, RateLimit, ScriptedModel, Task


def test_an_agents_texts_are_filled_in_per_run_and_the_agent_is_unchanged() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(
        "{topic} Researcher",
        "Find facts about {topic}",
        background="You know {topic} well.",
        llm=model,
        rate_limit=RateLimit(100, 60),
    )
    ensemble = Ensemble(tasks=[Task("Research", agent=agent)])
    first = ensemble.run(inputs={"topic": "Bees"})
    second = ensemble.run(inputs={"topic": "Ants"})

    system = [request.messages[0].text for request in model.requests]
    assert str(system[0]).startswith(
        "You are Bees Researcher.\nYou know Bees well.\n\nYour personal goal is: "
        "Find facts about Bees\n"
    )
    assert str(system[1]).startswith("You are Ants Researcher.")
    assert first.task_outputs[0].agent_role == "Bees Researcher"
    assert second.task_outputs[0].agent_role == "Ants Researcher"
    assert (agent.role, agent.goal) == ("{topic} Researcher", "Find facts about {topic}")


def test_a_missing_input_in_an_agent_is_refused_before_any_model_call() -> None:
    model = ScriptedModel(["never"])
    agent = Agent("Researcher", "Find facts about {subject}", llm=model)
    with pytest.raises(PromptTemplateError) as caught:
        Ensemble(tasks=[Task("Research", agent=agent)]).run(inputs={"topic": "x"})
    assert caught.value.missing_variables == ("subject",)
    assert model.requests == []


def test_workers_listed_only_in_agents_take_the_inputs_too() -> None:
    from agentensemble import Workflow, tool_call

    workers = ScriptedModel(["facts"])
    researcher = Agent("{topic} Researcher", "Research", llm=workers)
    writer = Agent("{topic} Writer", "Write", llm=workers)
    manager = ScriptedModel(
        [tool_call("delegate_task", agent_role="Bees Researcher", task_description="Go"), "done"]
    )
    output = Ensemble(
        tasks=[Task("Research", agent=researcher)],
        agents=[writer],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
    ).run(inputs={"topic": "Bees"})
    prompt = "\n".join(str(message.text) for message in manager.requests[0].messages)
    assert "Bees Researcher" in prompt
    assert "Bees Writer" in prompt
    assert "{topic}" not in prompt
    assert output.task_outputs[0].agent_role == "Bees Researcher"
