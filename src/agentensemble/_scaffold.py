"""``agentensemble new NAME``: a project that runs and passes its test as created; with
``--from-crewai DIR``, its ensemble converted from a CrewAI project's YAML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_new_command", "convert_crewai", "new_command"]

_ENSEMBLE = """\
# An agentensemble ensemble: `agentensemble run ensemble.yaml --model openai:gpt-4o-mini`.
# yaml-language-server: $schema=./ensemble.schema.json
name: {name}
llm: openai:gpt-4o-mini
workflow: sequential
inputs:
  topic: honeybees
agents:
  researcher:
    role: Researcher
    goal: Find accurate, specific facts
    background: A careful analyst who checks every figure.
    tools: [custom_tools:word_count]
  writer:
    role: Writer
    goal: Turn findings into clear prose
tasks:
  research:
    description: Find five facts about {{topic}}.
    expected_output: Five short facts, one per line
    agent: researcher
  write:
    description: Write one paragraph about {{topic}} from the research.
    expected_output: One paragraph of at most 120 words
    agent: writer
    context: [research]
"""

_TOOLS = '''\
"""Tools the ensemble's agents may call, named in ensemble.yaml by import path."""

from agentensemble import tool


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())
'''

_TEST = '''\
"""The ensemble on scripted models: no network, no key, the same answer every run."""

from pathlib import Path

from agentensemble import Ensemble, ScriptedModel, tool_call

HERE = Path(__file__).parent


def test_the_ensemble_runs_its_tasks_in_order() -> None:
    model = ScriptedModel(
        [
            tool_call("word_count", text="Bees dance to share where flowers are."),
            "1. Bees dance to share where flowers are.",
            "Honeybees tell each other where flowers are by dancing.",
        ]
    )
    ensemble = Ensemble.from_yaml(HERE / "ensemble.yaml", llm=model)

    output = ensemble.run(inputs={"topic": "honeybees"})

    assert output.raw == "Honeybees tell each other where flowers are by dancing."
    assert [task.name for task in output.task_outputs] == ["research", "write"]
    assert output.task_outputs[0].tool_call_count == 1
    assert "honeybees" in str(model.requests[0].messages)
'''

_README = """\
# {name}

An [agentensemble](https://pypi.org/project/agentensemble/) project.

```bash
pip install "agentensemble[openai,cli]" pytest
agentensemble validate ensemble.yaml
agentensemble run ensemble.yaml --model openai:gpt-4o-mini --input topic=octopuses
pytest
```

- `ensemble.yaml` declares the agents and tasks (`agentensemble schema` prints the format;
  `ensemble.schema.json` lets editors complete and check it).
- `custom_tools.py` holds the tools the agents call, named in the YAML by import path.
- `test_ensemble.py` runs the ensemble on a scripted model: no network, no key.
"""


_CONVERTED_README = """\
# {name}

Converted from the CrewAI project in `{source}` by `agentensemble new --from-crewai`.

```bash
pip install "agentensemble[openai,cli]"
agentensemble validate ensemble.yaml
agentensemble run ensemble.yaml --model openai:gpt-4o-mini --input topic=...
```

Each task lists the earlier tasks as `context`: CrewAI passes every earlier output to a
task of a sequential crew. Tools written in Python are not converted: name them in an
agent's `tools:` by import path (`package.module:tool`).
"""


def add_new_command(commands: Any) -> None:
    """The ``new`` subcommand."""
    new = commands.add_parser("new", help="create a project: a YAML ensemble, a tool, a test")
    new.add_argument("name", help="the project's directory (created; must not exist)")
    new.add_argument(
        "--from-crewai",
        metavar="DIR",
        help="convert a CrewAI project's agents.yaml and tasks.yaml (found under DIR)",
    )


def new_command(args: argparse.Namespace) -> int:
    """Create the project directory and its files."""
    import json

    from agentensemble.declarative import ensemble_file_schema

    target = Path(args.name)
    if target.exists():
        print(f"error: {target} already exists", file=sys.stderr)
        return 2
    name = target.name
    files = {
        "ensemble.yaml": _ENSEMBLE.format(name=json.dumps(name)),
        "custom_tools.py": _TOOLS,
        "test_ensemble.py": _TEST,
        "README.md": _README.format(name=name),
        "ensemble.schema.json": json.dumps(ensemble_file_schema(), indent=2) + "\n",
    }
    if args.from_crewai:
        try:
            converted, notes = convert_crewai(Path(args.from_crewai), name)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        files["ensemble.yaml"] = converted
        files["README.md"] = _CONVERTED_README.format(name=name, source=args.from_crewai)
        del files["test_ensemble.py"], files["custom_tools.py"]
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    target.mkdir(parents=True)
    for file_name, text in files.items():
        (target / file_name).write_text(text, encoding="utf-8")
    print(f"Created {target}: {', '.join(files)}", file=sys.stderr)
    return 0


_AGENT_KEYS = {
    "role": "role",
    "goal": "goal",
    "backstory": "background",
    "verbose": "verbose",
    "allow_delegation": "allow_delegation",
    "max_iter": "max_iterations",
}
_TASK_KEYS = {"description": "description", "expected_output": "expected_output"}
_LEFT_OUT = {
    "tools": "name tools by import path in the agent's tools: list",
    "async_execution": "set workflow: parallel to run tasks as a DAG of their context",
    "output_file": "write the output from a handler task, or from output.raw",
    "output_pydantic": "set output_type: package.module:Model",
    "output_json": "set output_type: package.module:Model",
    "max_rpm": "set rate_limit: {requests: N, period: 60}",
    "memory": "set short_term_memory or memory scopes",
}


def convert_crewai(directory: Path, name: str) -> tuple[str, list[str]]:
    """A CrewAI project's ``agents.yaml`` and ``tasks.yaml`` as one ensemble file, and notes
    on what could not be carried over. CrewAI gives each task of a sequential crew every
    earlier output, so a task that lists no context gets every earlier task as context."""
    import yaml

    agents_file, tasks_file = _crewai_files(directory)
    crew_agents = _mapping(agents_file)
    crew_tasks = _mapping(tasks_file)
    notes: list[str] = []
    agents = {
        agent: _converted(settings, _AGENT_KEYS, f"agent '{agent}'", notes)
        for agent, settings in crew_agents.items()
    }
    tasks: dict[str, dict[str, Any]] = {}
    for task, settings in crew_tasks.items():
        converted = _converted(settings, _TASK_KEYS, f"task '{task}'", notes)
        if "agent" in settings:
            converted["agent"] = settings["agent"]
        context = settings.get("context") or list(tasks)
        converted["context"] = [context] if isinstance(context, str) else list(context)
        if not converted["context"]:
            del converted["context"]
        if settings.get("human_input"):
            converted["review"] = "required"
        tasks[task] = converted
    document = {"name": name, "workflow": "sequential", "agents": agents, "tasks": tasks}
    header = (
        f"# Converted from CrewAI ({agents_file.name}, {tasks_file.name}) by agentensemble new.\n"
        "# Each task lists the earlier tasks as context: CrewAI passes every earlier output.\n"
    )
    body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    return header + body, notes


def _crewai_files(directory: Path) -> tuple[Path, Path]:
    for candidate in (directory, directory / "config", *sorted(directory.glob("**/config"))):
        agents, tasks = candidate / "agents.yaml", candidate / "tasks.yaml"
        if agents.is_file() and tasks.is_file():
            return agents, tasks
    raise ValueError(
        f"no agents.yaml and tasks.yaml in {directory} or a config/ directory under it"
    )


def _mapping(file: Path) -> dict[str, dict[str, Any]]:
    import yaml

    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{file} is not valid YAML: {error}") from None
    if not isinstance(data, dict) or not all(isinstance(value, dict) for value in data.values()):
        raise ValueError(f"{file} must map each name to its settings")
    return data


def _converted(
    settings: dict[str, Any], keys: dict[str, str], owner: str, notes: list[str]
) -> dict[str, Any]:
    converted = {keys[key]: value for key, value in settings.items() if key in keys}
    if "llm" in settings:
        converted["llm"] = str(settings["llm"]).replace("/", ":", 1)
    handled = {*keys, "llm", "agent", "context", "human_input"}
    for key in settings:
        if key not in handled:
            notes.append(f"{owner}: '{key}' was left out ({_LEFT_OUT.get(key, 'no equivalent')})")
    return {
        key: value.strip() if isinstance(value, str) else value for key, value in converted.items()
    }
