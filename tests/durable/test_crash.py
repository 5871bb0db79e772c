"""A run whose process is killed (SIGKILL) mid-run resumes in a new process: the tasks it
completed are not called again, and the output equals an uninterrupted run's."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from agentensemble import Agent, Ensemble, FunctionModel, Task
from agentensemble.models import Message, ToolSpec, UserMessage

CHILD = textwrap.dedent(
    """
    import sys
    from agentensemble import Agent, Ensemble, FunctionModel, RunOptions, Task

    def answer(messages, tools):
        lines = messages[1].text.splitlines()
        task = lines[lines.index("## Task") + 1]
        if task == "Polish the draft":
            print("IN-THIRD-TASK", flush=True)
            sys.stdin.readline()  # blocks until the parent kills this process
        return f"done: {task}"

    writer = Agent("Writer", "Write", llm=FunctionModel(answer))
    first = Task("Research bees", "Notes", agent=writer)
    second = Task("Draft an article", "A draft", agent=writer, context=[first])
    third = Task("Polish the draft", "Final text", agent=writer, context=[second])
    Ensemble(tasks=[first, second, third], checkpoint=sys.argv[1]).run(
        options=RunOptions(run_id="crashed")
    )
    """
)


def _ensemble(asked: list[str], path: Path | None) -> Ensemble:
    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        user = next(m for m in messages if isinstance(m, UserMessage))
        lines = user.text.splitlines()
        task = lines[lines.index("## Task") + 1]
        asked.append(task)
        return f"done: {task}"

    writer = Agent("Writer", "Write", llm=FunctionModel(answer))
    first = Task("Research bees", "Notes", agent=writer)
    second = Task("Draft an article", "A draft", agent=writer, context=[first])
    third = Task("Polish the draft", "Final text", agent=writer, context=[second])
    return Ensemble(tasks=[first, second, third], checkpoint=path)


def test_a_killed_process_resumes_in_another(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "IN-THIRD-TASK"  # two tasks recorded
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL

    asked: list[str] = []
    resumed = _ensemble(asked, path).run(resume="crashed")
    assert asked == ["Polish the draft"]
    uninterrupted = _ensemble([], None).run()
    assert [(o.task_description, o.raw) for o in resumed.task_outputs] == [
        (o.task_description, o.raw) for o in uninterrupted.task_outputs
    ]
    assert resumed.raw == uninterrupted.raw == "done: Polish the draft"
