"""What durable runs cost. Prints JSON.

    python bench/durable.py [--tasks 2000] [--resume-tasks 10000]

- Checkpoint cost per task: a PARALLEL run of `--tasks` independent tasks on an instant
  model, with no checkpoint, an in-memory one and a SQLite file (WAL, one transaction per
  completed task); wall time per task over the best of 3 runs, and the difference from
  no checkpoint. Budget: under 1 ms per task with SQLite, 0 when off (nothing runs then).
- Resume planning: a SEQUENTIAL run of `--resume-tasks` handler tasks recorded in a SQLite
  checkpoint, then resumed: the time to load the checkpoint, plan the run again, check the
  plan against the recorded one and restore every task (no task runs).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from agentensemble import CheckpointStore, Ensemble, RunOptions, Task, Workflow
from agentensemble.models import FunctionModel


def _parallel(tasks: int, checkpoint: Any) -> Ensemble:
    return Ensemble(
        tasks=[Task(f"Task number {i}", "One word") for i in range(tasks)],
        llm=FunctionModel(lambda messages, tools: "done"),
        workflow=Workflow.PARALLEL,
        checkpoint=checkpoint,
    )


def _best_wall(ensemble: Ensemble, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        ensemble.run()
        best = min(best, time.perf_counter() - started)
    return best


def checkpoint_cost(tasks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        sqlite = CheckpointStore.sqlite(Path(folder) / "runs.db")
        walls = {
            "off": _best_wall(_parallel(tasks, None)),
            "in_memory": _best_wall(_parallel(tasks, CheckpointStore.in_memory())),
            "sqlite": _best_wall(_parallel(tasks, sqlite)),
        }
        sqlite.close()
    per_task = {name: wall / tasks * 1e6 for name, wall in walls.items()}
    return {
        "tasks": tasks,
        "wall_per_task_us": {name: round(us, 1) for name, us in per_task.items()},
        "checkpoint_cost_per_task_us": {
            name: round(per_task[name] - per_task["off"], 1) for name in ("in_memory", "sqlite")
        },
        "budget_sqlite_us": 1000,
    }


def resume_planning(tasks: int) -> dict[str, Any]:
    def make(path: Path) -> Ensemble:
        return Ensemble(
            tasks=[Task(f"Step {i}", handler=lambda context: "ok") for i in range(tasks)],
            checkpoint=path,
        )

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.db"
        started = time.perf_counter()
        make(path).run(options=RunOptions(run_id="long"))
        recorded = time.perf_counter() - started
        ensemble = make(path)
        started = time.perf_counter()
        output = ensemble.run(resume="long")
        resumed = time.perf_counter() - started
        assert len(output.task_outputs) == tasks
        assert all(trace.restored for trace in output.trace.task_traces)  # type: ignore[union-attr]
        ensemble.checkpoint_store.close()  # type: ignore[union-attr]
    return {
        "tasks": tasks,
        "first_run_s": round(recorded, 3),
        "resume_all_restored_s": round(resumed, 3),
        "resume_per_task_us": round(resumed / tasks * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--resume-tasks", type=int, default=10_000)
    args = parser.parse_args()
    print(
        json.dumps(
            {
                "checkpoint": checkpoint_cost(args.tasks),
                "resume_planning": resume_planning(args.resume_tasks),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
