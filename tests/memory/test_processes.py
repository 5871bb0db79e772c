"""Two separate interpreters share memory through one SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

RUN = """
import json, sys
from agentensemble import Ensemble, FunctionModel, Task
from agentensemble.memory import MemoryStore

path, topic = sys.argv[1], sys.argv[2]
prompts = []

def answer(messages, tools):
    prompts.append(messages[1].text)
    return f"Findings about {topic}: it is process {topic}'s output."

store = MemoryStore.sqlite(path)
Ensemble(tasks=[Task("Research " + topic, memory=["research"])], llm=FunctionModel(answer),
         memory_store=store).run()
import asyncio
asyncio.run(store.aclose())
print(json.dumps(prompts))
"""


def run_in_child(path: Path, topic: str) -> list[str]:
    environment = {**os.environ, "PYTHONPATH": str(SRC)}
    finished = subprocess.run(
        [sys.executable, "-c", RUN, str(path), topic],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    prompts: list[str] = json.loads(finished.stdout)
    return prompts


@pytest.mark.integration
def test_a_second_process_sees_the_first_runs_output(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    (first,) = run_in_child(path, "alpha")
    (second,) = run_in_child(path, "beta")
    assert "## Memory:" not in first
    assert second.startswith(
        "## Memory: research\n"
        'The following information from scope "research" may be relevant:\n'
        "\n---\nFindings about alpha: it is process alpha's output.\n---\n\n"
    )
