"""What importing the library costs. Prints JSON.

    python bench/import.py [--samples 15]

Each figure is the fastest of `--samples` fresh interpreters, with bytecode compiled by one
warm-up import first (this machine sets PYTHONDONTWRITEBYTECODE=1, which would otherwise make
every import compile from source; the warm-up runs without it):

- ``import agentensemble`` (every public name loads with its module on first use);
- that import plus the first ``@tool`` declared (a typed function; pydantic builds its JSON
  schema the first time it is asked for, which an agent given the tool does);
- ``from agentensemble import Agent, Ensemble, Task`` (what most scripts start with);
- the first tool plus an `Agent` with the tool and the first `Ensemble` built (what a script does
  before its first run; the engine itself loads with the first run, off the event loop).

Budgets: 50 ms for the import, 100 ms with the first tool.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

PROBES = {
    "import_ms": "import agentensemble",
    "import_and_first_tool_ms": (
        "import agentensemble\n"
        "@agentensemble.tool\n"
        "def lookup(city: str, days: int = 1) -> str:\n"
        "    '''Look up the weather.'''\n"
        "    return city\n"
    ),
    "import_agent_ensemble_task_ms": "from agentensemble import Agent, Ensemble, Task",
    "import_tool_and_first_ensemble_ms": (
        "import agentensemble\n"
        "from agentensemble import Agent, Ensemble, FunctionModel, Task\n"
        "@agentensemble.tool\n"
        "def lookup(city: str, days: int = 1) -> str:\n"
        "    '''Look up the weather.'''\n"
        "    return city\n"
        "agent = Agent('Forecaster', 'Forecast', llm=FunctionModel(lambda m, t: 'x'),"
        " tools=[lookup])\n"
        "Ensemble(tasks=[Task('Forecast Paris', agent=agent)])\n"
    ),
}

TIMER = "import time as _t\n_start = _t.perf_counter()\n{body}\nprint(_t.perf_counter() - _start)\n"


def fastest(body: str, samples: int) -> float:
    warm_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    script = TIMER.format(body=body)
    subprocess.run([sys.executable, "-c", script], env=warm_env, check=True, capture_output=True)
    return min(
        float(
            subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(samples)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=15)
    samples = parser.parse_args().samples
    results: dict[str, object] = {
        name: round(fastest(body, samples) * 1000, 1) for name, body in PROBES.items()
    }
    results["budgets"] = {"import_ms": 50, "import_and_first_tool_ms": 100}
    results["bytecode"] = "compiled by a warm-up import"
    results["python"] = sys.version.split()[0]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
