"""Two commits side by side, in one run: the figures of every benchmark (`FIGURES`) for a
base commit and for the working tree. Prints JSON.

    python bench/compare.py --base 723d394 [--runs 200] [--repeats 2] [--only web.py ...]

The base commit is checked out into a temporary git worktree; each benchmark runs in a fresh
interpreter with ``PYTHONPATH`` pointing at one tree's ``src`` (the benchmark scripts of the
working tree are used for both: they use only the public API). The trees alternate, base
first, `repeats` times, and the best figure of each is kept (lower is better, except for
the web throughput ratios), so a moment of machine noise does not decide the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

FIGURES: dict[str, dict[str, tuple[str, ...]]] = {
    "import.py": {
        "import_ms": ("import_ms",),
        "import_and_first_tool_ms": ("import_and_first_tool_ms",),
        "import_agent_ensemble_task_ms": ("import_agent_ensemble_task_ms",),
    },
    "overhead.py": {
        "cpu_us_per_task_no_tools": ("cpu_us_per_task_no_tools",),
        "cpu_us_per_task_no_tools_capture_full": ("cpu_us_per_task_no_tools_capture_full",),
        "cpu_us_per_task_sync_run": ("cpu_us_per_task_sync_run",),
        "cpu_us_per_tool_round_trip_async_tool": ("cpu_us_per_tool_round_trip_async_tool",),
    },
    "parallel.py": {
        "sleepy_10000_wall_s": ("sleepy_10000", "wall_s"),
        "sleepy_10000_rss_kb_per_task": ("sleepy_10000", "peak_rss_kb_per_task_in_flight"),
        "sleepy_10000_function_model_wall_s": ("sleepy_10000_function_model", "wall_s"),
        "dag_10000_cpu_us_per_task": ("layered_dag_10000", "cpu_us_per_task"),
    },
    "listeners.py": {
        "sync_listener_us_per_event": ("cpu_us_per_event_sync_listener",),
        "async_listener_us_per_event": ("cpu_us_per_event_async_listener",),
    },
    "mapreduce.py": {
        "mapreduce_static_wall_s": ("static_instant", "wall_s"),
        "mapreduce_static_rss_mb": ("static_instant", "peak_rss_mb"),
        "mapreduce_static_listened_wall_s": ("static_instant_listened", "wall_s"),
        "mapreduce_static_listened_rss_mb": ("static_instant_listened", "peak_rss_mb"),
        "mapreduce_adaptive_wall_s": ("adaptive_instant", "wall_s"),
        "mapreduce_adaptive_rss_mb": ("adaptive_instant", "peak_rss_mb"),
        "mapreduce_adaptive_listened_wall_s": ("adaptive_instant_listened", "wall_s"),
        "mapreduce_adaptive_listened_rss_mb": ("adaptive_instant_listened", "peak_rss_mb"),
    },
    "memory.py": {
        "memory_sqlite_one_scope_us_per_run": ("per_task", "wall_us_with_one_scope_sqlite"),
        "memory_sqlite_concurrent_stores_per_s": ("keyword", "store_concurrent_entries_per_s"),
        "memory_semantic_concurrent_stores_per_s": (
            "semantic",
            "store_concurrent_entries_per_s",
        ),
        "memory_sqlite_retrieve_p50_ms": ("keyword", "retrieve", "p50_ms"),
    },
    "durable.py": {
        "durable_sqlite_checkpoint_us_per_task": (
            "checkpoint",
            "checkpoint_cost_per_task_us",
            "sqlite",
        ),
    },
    "web.py": {
        "web_async_over_sdk": ("throughput_ratio_to_sdk", "async"),
        "web_sync_over_sdk": ("throughput_ratio_to_sdk", "sync"),
        "web_sqlite_memory_over_sdk": ("throughput_ratio_to_sdk", "async_with_sqlite_memory"),
    },
}
"""Where each compared figure sits in each benchmark's JSON."""
HIGHER_IS_BETTER = frozenset(
    {
        "web_async_over_sdk",
        "web_sync_over_sdk",
        "web_sqlite_memory_over_sdk",
        "memory_sqlite_concurrent_stores_per_s",
        "memory_semantic_concurrent_stores_per_s",
    }
)
"""The figures where more is better (the rest are costs)."""


def run_bench(script: str, src: Path, extra: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    completed = subprocess.run(
        [sys.executable, str(HERE / script), *extra],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def pick(result: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = result
    for key in path:
        value = value[key]
    return float(value)


def measure(src: Path, runs: int, scripts: list[str]) -> dict[str, float]:
    figures: dict[str, float] = {}
    for script in scripts:
        wanted = FIGURES[script]
        extra = ["--runs", str(runs)] if script == "overhead.py" else []
        result = run_bench(script, src, extra)
        figures.update({name: pick(result, path) for name, path in wanted.items()})
    return figures


def best_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    best = {}
    for name in rounds[0]:
        pick_best = max if name in HIGHER_IS_BETTER else min
        best[name] = pick_best(round_[name] for round_ in rounds)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--only", nargs="*", choices=sorted(FIGURES), help="these benchmarks (default: all)"
    )
    args = parser.parse_args()
    scripts = args.only or list(FIGURES)
    with tempfile.TemporaryDirectory() as directory:
        base_tree = Path(directory) / "base"
        subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "worktree",
                "add",
                "--detach",
                "-q",
                str(base_tree),
                args.base,
            ],
            check=True,
        )
        try:
            rounds: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
            for _ in range(args.repeats):
                rounds["base"].append(measure(base_tree / "src", args.runs, scripts))
                rounds["new"].append(measure(ROOT / "src", args.runs, scripts))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                check=True,
            )
    base, new = best_of(rounds["base"]), best_of(rounds["new"])
    report = {
        "base": args.base,
        "figures": {
            name: {"base": base[name], "new": new[name], "ratio": round(new[name] / base[name], 3)}
            for name in base
        },
        "runs": args.runs,
        "repeats": args.repeats,
        "python": sys.version.split()[0],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
