from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from inline_snapshot import snapshot

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    ScriptedModel,
    Task,
    TaskOutput,
    Workflow,
)
from agentensemble.execution._prompts import build_system_prompt, build_user_prompt

LLM = ScriptedModel([])


def output(role: str, description: str, raw: str) -> TaskOutput[Any]:
    return TaskOutput(
        raw=raw,
        task_description=description,
        agent_role=role,
        completed_at=datetime.now(UTC),
        duration=timedelta(0),
    )


def test_minimal_system_prompt() -> None:
    agent = Agent("Content Writer", "Write articles", llm=LLM)
    assert build_system_prompt(agent) == snapshot("""\
You are Content Writer.

Your personal goal is: Write articles

You must produce a final answer that satisfies the expected output described in the task.
Focus on quality and accuracy. Do not add unnecessary preamble or postscript to your final answer.\
""")


def test_full_system_prompt() -> None:
    agent = Agent(
        "Analyst",
        "Find trends",
        llm=LLM,
        background="Ten years in markets.",
        response_format="Bullet points only",
    )
    assert build_system_prompt(agent) == snapshot("""\
You are Analyst.
Ten years in markets.

Your personal goal is: Find trends

You must produce a final answer that satisfies the expected output described in the task.
Focus on quality and accuracy. Do not add unnecessary preamble or postscript to your final answer.
Output format instructions: Bullet points only\
""")


def test_blank_background_is_omitted() -> None:
    agent = Agent("A", "G", llm=LLM, background="   ")
    assert build_system_prompt(agent).startswith("You are A.\n\nYour personal goal is: G")


def test_user_prompt_without_context() -> None:
    assert build_user_prompt("Do it", "Done") == "## Task\nDo it\n\n## Expected Output\nDone"


def test_user_prompt_with_context_in_declared_order() -> None:
    context = [
        output("Researcher", "Research bees", "Bees dance."),
        output("Editor", "Edit notes", ""),
    ]
    assert build_user_prompt("Write", "An article", context) == snapshot("""\
## Context from Previous Tasks
The following results from previous tasks may be relevant:

---
### Researcher: Research bees
Bees dance.
---

---
### Editor: Edit notes

---

## Task
Write

## Expected Output
An article\
""")


def test_large_context_is_warned_about_but_not_cut(caplog: pytest.LogCaptureFixture) -> None:
    big = output("R", "Big task", "x" * 10_001)
    prompt = build_user_prompt("Use it", "Summary", [big])
    assert "x" * 10_001 in prompt
    assert "Context from task 'Big task' is 10001 characters (>10000)" in caplog.text


def test_an_agent_builds_its_system_prompt_once_for_all_its_tasks_and_runs() -> None:
    model = FunctionModel(lambda messages, tools: "done")
    agent = Agent("Analyst", "Find trends", llm=model)
    renamed = agent.copy(goal="Find outliers")
    tasks = [Task(f"Look at region {i}", agent=agent) for i in range(3)]
    ensemble = Ensemble(
        tasks=[*tasks, Task("Summarise", agent=renamed)], workflow=Workflow.PARALLEL
    )
    ensemble.run()
    ensemble.run()

    prompts = [request.messages[0].text or "" for request in model.requests]
    shared = [text for text in prompts if "Find trends" in text]
    assert len(shared) == 6
    assert all(text is shared[0] for text in shared)
    assert shared[0] == build_system_prompt(agent)
    own = [text for text in prompts if "Find outliers" in text]
    assert len(own) == 2
    assert own[0] == build_system_prompt(renamed)


def test_a_templated_agent_gets_the_system_prompt_of_each_runs_inputs() -> None:
    model = FunctionModel(lambda messages, tools: "done")
    agent = Agent("{topic} analyst", "Study {topic}", llm=model)
    object.__setattr__(agent, "_system_prompt", "a prompt built before the copy")
    ensemble = Ensemble(tasks=[Task("Look at {topic}", agent=agent)])
    ensemble.run(inputs={"topic": "AI"})
    ensemble.run(inputs={"topic": "oil"})

    first_lines = [(request.messages[0].text or "").splitlines()[0] for request in model.requests]
    assert first_lines == ["You are AI analyst.", "You are oil analyst."]
