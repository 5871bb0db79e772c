"""What a loop iteration and a graph step cost the engine, next to a plain task. Prints JSON.

    python bench/loops.py [--steps 2000] [--rounds 5]

On an instant `FunctionModel`: `--steps` sequential tasks in one run; one loop of one body
task run for `--steps` iterations; one graph of one state that goes back to itself for
`--steps` steps. CPU time (`time.process_time()`) per task, iteration or step, best of
`--rounds` rounds. The budget: an iteration and a step within 10% of a plain task.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from agentensemble import Edge, Ensemble, FunctionModel, Graph, Loop, Task, Workflow


def instant() -> FunctionModel:
    return FunctionModel(lambda messages, tools: "done")


def plain(steps: int) -> Ensemble:
    tasks = [Task(f"Step {n}", llm=instant()) for n in range(steps)]
    return Ensemble(tasks=tasks, workflow=Workflow.SEQUENTIAL)


def loop(steps: int) -> Ensemble:
    body = Task("Step", llm=instant())
    return Ensemble(loops=[Loop("l", [body], max_iterations=steps, inject_feedback=False)])


def graph(steps: int) -> Ensemble:
    state = Task("Step", llm=instant())
    walk = Graph(
        "g",
        {"a": state},
        "a",
        [Edge("a", "a")],
        max_steps=steps,
        inject_feedback_on_revisit=False,
    )
    return Ensemble(graph=walk)


def best_cpu_us(build: Callable[[int], Ensemble], steps: int, rounds: int) -> float:
    build(10).run()  # warm up: imports, adapters
    best = float("inf")
    for _ in range(rounds):
        ensemble = build(steps)
        started = time.process_time()
        ensemble.run()
        best = min(best, time.process_time() - started)
    return best / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    task_us = best_cpu_us(plain, args.steps, args.rounds)
    iteration_us = best_cpu_us(loop, args.steps, args.rounds)
    step_us = best_cpu_us(graph, args.steps, args.rounds)
    print(
        json.dumps(
            {
                "steps": args.steps,
                "cpu_us_per_plain_task": round(task_us, 1),
                "cpu_us_per_loop_iteration": round(iteration_us, 1),
                "cpu_us_per_graph_step": round(step_us, 1),
                "loop_iteration_vs_task_pct": round(100 * (iteration_us / task_us - 1), 1),
                "graph_step_vs_task_pct": round(100 * (step_us / task_us - 1), 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
