"""How long the ``agentensemble`` command takes to answer, as a shell or a cron job sees it.
Prints JSON.

    python bench/cli.py [--rounds 7]

Wall time of a fresh process (interpreter start included) for ``agentensemble --version``
and ``agentensemble validate examples/yaml/research_crew.yaml``: median and best of
`--rounds`. The budget: 0.3 s each (the CLI imports only what the command needs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "version": ["--version"],
    "validate": ["validate", str(ROOT / "examples" / "yaml" / "research_crew.yaml")],
}
BUDGET_SECONDS = 0.3


def wall_times(arguments: list[str], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "agentensemble.cli", *arguments],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    wall_times(COMMANDS["version"], 1)  # warm the file cache and the .pyc files
    results = {}
    for name, arguments in COMMANDS.items():
        times = wall_times(arguments, args.rounds)
        median = statistics.median(times)
        results[name] = {
            "median_seconds": round(median, 3),
            "best_seconds": round(min(times), 3),
            "within_budget": median <= BUDGET_SECONDS,
        }
    print(json.dumps({"budget_seconds": BUDGET_SECONDS, "commands": results}, indent=2))


if __name__ == "__main__":
    main()
