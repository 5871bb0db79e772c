"""Watch an ensemble in the browser while it runs.

    python examples/live_dashboard.py           # runs once on an offline model, then exits
    python examples/live_dashboard.py --serve   # keeps the page up at http://127.0.0.1:7329/

Needs ``pip install "agentensemble[web]"``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import urllib.request

from agentensemble import Agent, Ensemble, ScriptedModel, Task, ToolCall, Workflow, tool
from agentensemble.web import WebDashboard


@tool
def search_notes(query: str) -> str:
    """Search the team's research notes."""
    return f"Notes on {query}: foragers dance to tell nest-mates where flowers are."


def team(dashboard: WebDashboard) -> Ensemble:
    researcher = Agent(
        role="Researcher",
        goal="Find facts",
        tools=[search_notes],
        llm=ScriptedModel(
            [
                ToolCall(id="c1", name="search_notes", arguments='{"query": "honeybees"}'),
                "Foragers dance to share where flowers are.",
            ]
        ),
    )
    analyst = Agent(
        role="Analyst", goal="Check facts", llm=ScriptedModel(["The dance encodes direction."])
    )
    writer = Agent(
        role="Writer",
        goal="Write clearly",
        llm=ScriptedModel(["Honeybees dance to tell each other where the flowers are."]),
    )
    research = Task(
        description="Research honeybee communication", expected_output="Facts", agent=researcher
    )
    check = Task(
        description="Check what the dance encodes", expected_output="A finding", agent=analyst
    )
    write = Task(
        description="Write one line for a general reader",
        expected_output="One line",
        agent=writer,
        context=[research, check],
    )
    return Ensemble(
        tasks=[research, check, write],
        workflow=Workflow.PARALLEL,
        name="honeybee-article",
        web_dashboard=dashboard,
    )


def main() -> None:
    serve = "--serve" in sys.argv
    with WebDashboard(port=7329 if serve else 0) as dashboard:
        print(f"Dashboard at {dashboard.url}")
        output = team(dashboard).run()
        print(output.raw)
        with urllib.request.urlopen(f"{dashboard.url}api/runs") as response:
            [run] = json.load(response)
        print(f"The page shows run {run['ensembleId']}: {run['status']}")
        if serve:
            print("Ctrl-C stops the dashboard")
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()


if __name__ == "__main__":
    main()
