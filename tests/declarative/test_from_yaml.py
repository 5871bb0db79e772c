"""`Ensemble.from_yaml`: files and directories load into ordinary ensembles that run as
their Python equivalents do."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleFileError,
    FunctionModel,
    ScriptedModel,
    Task,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.declarative import ensemble_file_schema
from agentensemble.models import Message, ToolSpec
from agentensemble.tools import CalculatorTool, FileReadTool

EXAMPLES = Path(__file__).parents[2] / "examples" / "yaml"
MCP_SERVER = Path(__file__).parents[1] / "tools" / "mcp_server.py"
DOCS = Path(__file__).parents[2] / "docs"


class Facts(BaseModel):
    facts: list[str]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def echo_model() -> FunctionModel:
    """Answers each task with the first line of its user prompt."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"done: {(messages[-1].text or '').splitlines()[0]}"

    return FunctionModel(answer)


def test_a_file_runs_the_same_as_the_equivalent_python(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crew.yaml",
        """
name: crew
workflow: sequential
inputs: {topic: bees, age: 31}
agents:
  researcher:
    role: Researcher
    goal: Find facts about {topic}
    background: Careful.
  writer:
    role: Writer
    goal: Write for a {age}-year-old
tasks:
  research:
    description: Research {topic}
    expected_output: Facts
    agent: researcher
  write:
    description: Write about {topic}
    agent: writer
    context: [research]
    max_output_retries: 1
""",
    )
    from_file = ScriptedModel(["facts", "article"])
    loaded = Ensemble.from_yaml(path, llm=from_file)

    in_python = ScriptedModel(["facts", "article"])
    researcher = Agent(
        "Researcher", "Find facts about {topic}", background="Careful.", llm=in_python
    )
    writer = Agent("Writer", "Write for a {age}-year-old", llm=in_python)
    research = Task("Research {topic}", "Facts", agent=researcher, name="research")
    built = Ensemble(
        name="crew",
        workflow=Workflow.SEQUENTIAL,
        inputs={"topic": "bees", "age": "31"},
        tasks=[
            research,
            Task(
                "Write about {topic}",
                agent=writer,
                context=[research],
                name="write",
                max_output_retries=1,
            ),
        ],
    )
    assert loaded.workflow is Workflow.SEQUENTIAL
    assert loaded.inputs == {"topic": "bees", "age": "31"}
    first, second = loaded.run(), built.run()
    assert [o.raw for o in first.task_outputs] == [o.raw for o in second.task_outputs]
    assert [o.name for o in first.task_outputs] == ["research", "write"]
    assert [r.messages for r in from_file.requests] == [r.messages for r in in_python.requests]


def test_a_crewai_style_directory_loads_and_problems_name_its_files(tmp_path: Path) -> None:
    write(tmp_path / "ensemble.yaml", "llm: openai:gpt-4o-mini\nworkflow: parallel\n")
    write(tmp_path / "agents.yaml", "writer:\n  role: Writer\n  goal: Write\n")
    write(tmp_path / "tasks.yaml", "draft:\n  description: Draft\n  agent: writer\n")
    ensemble = Ensemble.from_yaml(tmp_path, llm=ScriptedModel(["a draft"]))
    assert ensemble.workflow is Workflow.PARALLEL
    assert ensemble.run().raw == "a draft"

    write(tmp_path / "tasks.yaml", "draft:\n  description: Draft\n  agent: writr\n")
    write(tmp_path / "agents.yaml", "writer:\n  role: Writer\n  goal: Write\n  age: 3\n")
    with pytest.raises(EnsembleFileError) as caught:
        Ensemble.from_yaml(tmp_path)
    assert [str(problem) for problem in caught.value.problems] == [
        f"{tmp_path / 'agents.yaml'}:4:3: agents.writer.age: unknown key 'age'",
        f"{tmp_path / 'tasks.yaml'}:3:10: tasks.draft.agent: no agent named 'writr'; "
        "did you mean 'writer'?",
    ]


def test_environment_variables_are_substituted_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CREW_TOPIC", "octopuses")
    monkeypatch.setenv("CREW_SECRET", "sk-do-not-show")
    path = write(
        tmp_path / "crew.yaml",
        "inputs: {topic: '${CREW_TOPIC}', price: '$$5'}\n"
        "tasks:\n  research: {description: 'Research {topic} for {price}'}\n",
    )
    model = ScriptedModel(["ok"])
    Ensemble.from_yaml(path, llm=model).run()
    assert "Research octopuses for $5" in str(model.requests[0].messages)

    write(path, "max_concurrency: ${CREW_SECRET}\ntasks:\n  a: {description: A}\n")
    with pytest.raises(EnsembleFileError) as caught:
        Ensemble.from_yaml(path, llm=ScriptedModel([]))
    assert str(caught.value) == (
        f"{path}:1:18: max_concurrency: must be a whole number, got: '${{CREW_SECRET}}'"
    )
    assert "sk-do-not-show" not in str(caught.value)


def test_tools_by_name_with_settings_from_python_and_by_import_path(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    write(tmp_path / "notes" / "a.txt", "alpha")

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    path = write(
        tmp_path / "crew.yaml",
        """
agents:
  reader:
    role: Reader
    goal: Read
    tools:
      - calculator
      - file_read: {base_dir: notes}
      - lookup
      - agentensemble.tools:DateTimeTool
tasks:
  read: {description: Read, agent: reader}
""",
    )
    ensemble = Ensemble.from_yaml(path, tools={"lookup": lookup}, llm=ScriptedModel(["x"]))
    tools = ensemble.tasks[0].agent.tools  # type: ignore[union-attr]
    assert isinstance(tools[0], CalculatorTool)
    assert isinstance(tools[1], FileReadTool)
    assert tools[1].sandbox.root == str(tmp_path / "notes")  # relative to the file
    assert tools[2] is lookup
    assert type(tools[3]).__name__ == "DateTimeTool"


def test_output_type_by_import_path_parses_the_answer(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crew.yaml",
        f"tasks:\n  facts:\n    description: Facts\n    output_type: {__name__}:Facts\n",
    )
    output = Ensemble.from_yaml(path, llm=ScriptedModel(['{"facts": ["a", "b"]}'])).run()
    assert output.task_outputs[0].parsed_output == Facts(facts=["a", "b"])


def test_llm_replaces_every_model_the_file_names(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crew.yaml",
        """
llm: openai:gpt-4o-mini
agents:
  a: {role: A, goal: G, llm: ollama:llama3.2}
tasks:
  one: {description: One, agent: a}
  two: {description: Two, llm: openai:gpt-4o}
""",
    )
    model = ScriptedModel(["1", "2"])
    ensemble = Ensemble.from_yaml(path, llm=model)
    agent = ensemble.tasks[0].agent
    assert agent is not None
    assert agent.llm is model
    assert ensemble.tasks[1].llm is model


def test_numbers_and_booleans_in_inputs_are_text(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crew.yaml",
        "inputs: {age: 31, ratio: 0.5, member: true}\n"
        "tasks:\n  a: {description: '{age} {ratio} {member}'}\n",
    )
    model = ScriptedModel(["ok"])
    Ensemble.from_yaml(path, llm=model).run()
    assert "31 0.5 true" in str(model.requests[0].messages)


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_each_example_file_loads_and_runs_on_a_scripted_model(example: Path) -> None:
    ensemble = Ensemble.from_yaml(example, llm=echo_model())
    output = ensemble.run()
    tasks = len(ensemble.tasks) + sum(len(phase.tasks) for phase in ensemble.phases)
    assert len(output.task_outputs) == tasks >= 2
    assert all(task.raw.startswith("done: ") for task in output.task_outputs)
    assert "{" not in "".join(task.task_description for task in output.task_outputs)


def test_the_research_example_calls_its_calculator(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("calculator", expression="6*7"), "42 facts", "report"])
    output = Ensemble.from_yaml(EXAMPLES / "research_crew.yaml", llm=model).run()
    assert output.task_outputs[0].tool_call_count == 1
    assert output.raw == "report"


def test_the_published_schema_is_the_current_one() -> None:
    published = json.loads((DOCS / "ensemble.schema.json").read_text(encoding="utf-8"))
    assert published == ensemble_file_schema()
    assert published["additionalProperties"] is False
    assert set(published["properties"]) >= {"llm", "agents", "tasks", "phases", "workflow"}


def test_every_schema_field_is_a_field_of_the_python_api() -> None:
    import inspect

    def parameters(cls: Any) -> set[str]:
        return set(inspect.signature(cls).parameters)

    schema = ensemble_file_schema()
    definitions = schema["$defs"]
    assert set(definitions["AgentSpec"]["properties"]) <= parameters(Agent)
    assert set(definitions["TaskSpec"]["properties"]) - {"name"} <= parameters(Task)
    ensemble_fields = parameters(Ensemble) | {"memory"}  # memory: the store, by kind
    assert set(schema["properties"]) <= ensemble_fields


def test_memory_review_and_rate_limits_are_built(tmp_path: Path) -> None:
    from agentensemble.memory import SqliteMemoryStore
    from agentensemble.models import RateLimit
    from agentensemble.review import Review

    path = write(
        tmp_path / "crew.yaml",
        """
memory: sqlite
rate_limit: {requests: 30, period: 60}
review_handler: auto_approve
tasks:
  fetch:
    description: Fetch
    review: required
    memory: [pages]
    timeout: 30
""",
    )
    ensemble = Ensemble.from_yaml(path, llm=ScriptedModel([]))
    task = ensemble.tasks[0]
    assert isinstance(ensemble.memory_store, SqliteMemoryStore)
    assert isinstance(ensemble.rate_limit, RateLimit)
    assert isinstance(task.review, Review)
    assert ensemble.review_handler is not None
    assert task.timeout == 30
    assert [scope.name for scope in task.memory] == ["pages"]


MCP_CREW = f"""
agents:
  adder:
    role: Adder
    goal: Add
    tools:
      - mcp: {{command: {sys.executable}, args: [{MCP_SERVER}], prefix: local}}
tasks:
  add: {{description: Add 2 and 3, agent: adder}}
"""


async def test_mcp_servers_connect_for_the_block_of_open_yaml(tmp_path: Path) -> None:
    path = write(tmp_path / "crew.yaml", MCP_CREW)
    model = ScriptedModel([tool_call("local_add", a=2, b=3), "5"])
    async with Ensemble.open_yaml(path, llm=model) as ensemble:
        agent = ensemble.tasks[0].agent
        assert agent is not None
        (server,) = agent.tools
        assert "local_add" in agent.tool_set.by_name
        output = await ensemble.arun()
    assert output.raw == "5"
    assert output.task_outputs[0].tool_call_count == 1
    assert not server.connected  # type: ignore[attr-defined]  # closed with the block


def test_from_yaml_refuses_mcp_servers_and_says_what_to_use(tmp_path: Path) -> None:
    path = write(tmp_path / "crew.yaml", MCP_CREW)
    with pytest.raises(EnsembleFileError) as caught:
        Ensemble.from_yaml(path, llm=ScriptedModel([]))
    (problem,) = caught.value.problems
    assert problem.field == "agents.adder.tools[0]"
    assert "async with Ensemble.open_yaml(path) as ensemble" in problem.message

    write(path, "agents:\n  a: {role: A, goal: G, tools: [{mcp: {args: [x]}}]}\n")
    with pytest.raises(EnsembleFileError, match=r"an MCP server needs either command"):
        Ensemble.from_yaml(path, llm=ScriptedModel([]))


def test_anchors_merge_keys_and_x_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crew.yaml",
        """
x-analyst: &analyst {role: Analyst, goal: Analyse, max_iterations: 3}
agents:
  first: {<<: *analyst, role: First Analyst}
  second: *analyst
tasks:
  one: {description: One, agent: first}
  two: {description: Two, agent: second}
""",
    )
    ensemble = Ensemble.from_yaml(path, llm=ScriptedModel([]))
    first, second = (task.agent for task in ensemble.tasks)
    assert first is not None
    assert second is not None
    assert (first.role, first.max_iterations) == ("First Analyst", 3)
    assert (second.role, second.goal) == ("Analyst", "Analyse")


def test_names_are_text_whatever_they_look_like(tmp_path: Path) -> None:
    path = write(
        tmp_path / "crew.yaml",
        "tasks:\n  1: {description: One}\n  true: {description: Two, context: ['1']}\n",
    )
    ensemble = Ensemble.from_yaml(path, llm=ScriptedModel([]))
    assert [task.name for task in ensemble.tasks] == ["1", "true"]


def test_shared_tasks_and_tools_for_serving_are_declared_by_name(tmp_path: Path) -> None:
    path = write(
        tmp_path / "kitchen.yaml",
        "name: kitchen\n"
        "drain_timeout: 30\n"
        "tasks:\n"
        "  plan: {description: Plan the menu}\n"
        "  cook: {description: Cook what the request asks for}\n"
        "shared_tasks: [cook]\n"
        "shared_tools:\n"
        "  add: calculator\n",
    )

    ensemble = Ensemble.from_yaml(path, llm=echo_model())

    assert [task.description for task in ensemble.tasks] == ["Plan the menu"]
    assert [task.description for task in ensemble.shared_tasks.values()] == [
        "Cook what the request asks for"
    ]
    assert list(ensemble.shared_tools) == ["add"]
    assert ensemble.drain_timeout == timedelta(seconds=30)

    write(path, "tasks:\n  cook: {description: Cook}\nshared_tasks: [cok]\n")
    with pytest.raises(EnsembleFileError) as caught:
        Ensemble.from_yaml(path, llm=echo_model())
    assert str(caught.value) == (
        f"{path}:3:16: shared_tasks[0]: no task named 'cok'; did you mean 'cook'?"
    )
