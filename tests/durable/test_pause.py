"""Pause for a person and resume later: a review gate (or `human_input`) ends the run with
exit reason PAUSED and the pending review in the output and the checkpoint; a run in any
process resumes it with the decision, without calling a completed task again."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentensemble import (
    Agent,
    CheckpointStore,
    Ensemble,
    ExitReason,
    FunctionModel,
    OnTimeoutAction,
    Review,
    ReviewDecision,
    ReviewHandler,
    ReviewTiming,
    Task,
    ValidationError,
    tool_call,
)
from agentensemble.models import Message, ToolResultMessage, ToolSpec, UserMessage
from agentensemble.tools import HumanInputTool


def _task_of(messages: Sequence[Message]) -> tuple[str, str]:
    """The task's description, and its whole user prompt."""
    user = next(m for m in messages if isinstance(m, UserMessage))
    lines = user.text.splitlines()
    return lines[lines.index("## Task") + 1], user.text


class Writer:
    """Answers each task with ``<task> #<n>``, counting the calls per task."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.prompts: dict[str, str] = {}
        self.model = FunctionModel(self.answer)

    def answer(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        task, prompt = _task_of(messages)
        self.asked.append(task)
        self.prompts[task] = prompt
        return f"{task} #{self.asked.count(task)}"


def _ensemble(llm: Any, store: Any, handler: Any = None, review: Review | None = None) -> Ensemble:
    writer = Agent("Writer", "Write", llm=llm)
    draft = Task("Draft the post", "A draft", agent=writer)
    gated = Task(
        "Write the post",
        "The post",
        agent=writer,
        context=[draft],
        review=review or Review(timeout=0.05, on_timeout=OnTimeoutAction.PAUSE),
    )
    publish = Task("Publish the post", "A link", agent=writer, context=[gated])
    return Ensemble(
        tasks=[draft, gated, publish],
        checkpoint=store,
        review_handler=handler or _Silent(),
    )


class _Silent(ReviewHandler):
    """A reviewer who never answers (the gate's timeout pauses the run)."""

    async def review(self, request: Any) -> Any:
        import asyncio

        await asyncio.Event().wait()


def test_a_gate_that_times_out_with_pause_pauses_and_resumes_with_an_edit() -> None:
    store = CheckpointStore.in_memory()
    writer = Writer()
    paused = _ensemble(writer.model, store).run()
    assert paused.exit_reason is ExitReason.PAUSED
    pending = paused.pending_review
    assert pending is not None
    assert pending.task_output == "Write the post #1"
    assert pending.timing is ReviewTiming.AFTER_EXECUTION
    assert [o.raw for o in paused.task_outputs] == ["Draft the post #1"]
    assert store.runs()[0].status == "PAUSED"

    again = Writer()
    resumed = _ensemble(again.model, store).run(
        resume=paused.run_id, decision=ReviewDecision.Edit("The edited post")
    )
    assert again.asked == ["Publish the post"]  # neither the draft nor the gated task again
    assert "The edited post" in again.prompts["Publish the post"]
    assert resumed.exit_reason is ExitReason.COMPLETED
    assert [o.raw for o in resumed.task_outputs] == [
        "Draft the post #1",
        "The edited post",
        "Publish the post #1",
    ]


def test_handler_pause_pauses_at_once_and_continue_keeps_the_output() -> None:
    store = CheckpointStore.in_memory()
    writer = Writer()
    paused = _ensemble(writer.model, store, ReviewHandler.pause(), Review.required()).run()
    assert paused.exit_reason is ExitReason.PAUSED
    again = Writer()
    resumed = _ensemble(again.model, store, ReviewHandler.pause(), Review.required()).run(
        resume=paused.run_id, decision=ReviewDecision.Continue()
    )
    assert again.asked == ["Publish the post"]
    assert [o.raw for o in resumed.task_outputs][1] == "Write the post #1"


def test_exit_early_at_resume_ends_the_run_keeping_the_gated_output() -> None:
    store = CheckpointStore.in_memory()
    paused = _ensemble(Writer().model, store).run()
    again = Writer()
    ended = _ensemble(again.model, store).run(
        resume=paused.run_id, decision=ReviewDecision.ExitEarly()
    )
    assert ended.exit_reason is ExitReason.USER_EXIT_EARLY
    assert again.asked == []
    assert [o.raw for o in ended.task_outputs] == ["Draft the post #1", "Write the post #1"]


def test_resuming_a_paused_run_needs_a_decision_and_only_a_paused_run_takes_one() -> None:
    store = CheckpointStore.in_memory()
    paused = _ensemble(Writer().model, store).run()
    review_id = paused.pending_review.review_id  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match=f"paused at review {review_id}.*Write the post"):
        _ensemble(Writer().model, store).run(resume=paused.run_id)
    done = _ensemble(Writer().model, store, ReviewHandler.auto_approve()).run()
    with pytest.raises(ValidationError, match="is not paused at a review"):
        _ensemble(Writer().model, store).run(resume=done.run_id, decision=ReviewDecision.Continue())
    with pytest.raises(ValidationError, match="pass the run's id as resume="):
        _ensemble(Writer().model, store).run(decision=ReviewDecision.Continue())


def test_pausing_without_a_checkpoint_is_refused_before_any_model_call() -> None:
    writer = Writer()
    with pytest.raises(ValidationError, match=r"on_timeout=PAUSE.*checkpoint"):
        _ensemble(writer.model, None).run()
    with pytest.raises(ValidationError, match=r"ReviewHandler.pause\(\).*checkpoint"):
        _ensemble(writer.model, None, ReviewHandler.pause(), Review.required()).run()
    assert writer.asked == []


def test_a_human_input_question_pauses_and_the_answer_is_given_at_resume() -> None:
    store = CheckpointStore.in_memory()

    def designer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        answers = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not answers:
            return tool_call("human_input", question="Which colour?")
        return f"Painted it {answers[0].text}"

    def make() -> Ensemble:
        agent = Agent("Designer", "Design", llm=FunctionModel(designer), tools=[HumanInputTool()])
        brief = Task("Brief", handler=lambda context: "the brief")
        return Ensemble(
            tasks=[brief, Task("Paint the wall", "Done", agent=agent, context=[brief])],
            checkpoint=store,
            review_handler=ReviewHandler.pause(),
        )

    paused = make().run()
    assert paused.exit_reason is ExitReason.PAUSED
    assert paused.pending_review.task_output == "Which colour?"  # type: ignore[union-attr]
    assert paused.pending_review.tool_name == "human_input"  # type: ignore[union-attr]
    resumed = make().run(resume=paused.run_id, decision=ReviewDecision.Edit("green"))
    assert resumed.raw == "Painted it green"


CHILD = textwrap.dedent(
    """
    import sys
    from agentensemble import *

    def answer(messages, tools):
        user = [m for m in messages if type(m).__name__ == "UserMessage"][0]
        lines = user.text.splitlines()
        task = lines[lines.index("## Task") + 1]
        print("ASKED", task, flush=True)
        return f"{task} #1"

    writer = Agent("Writer", "Write", llm=FunctionModel(answer))
    draft = Task("Draft the post", "A draft", agent=writer)
    gated = Task("Write the post", "The post", agent=writer, context=[draft],
                 review=Review(timeout=0.05, on_timeout=OnTimeoutAction.PAUSE))
    publish = Task("Publish the post", "A link", agent=writer, context=[gated])
    ensemble = Ensemble(tasks=[draft, gated, publish], checkpoint=sys.argv[1],
                        review_handler=ReviewHandler.pause())
    if sys.argv[2] == "start":
        output = ensemble.run(options=RunOptions(run_id="approval-1"))
    else:
        output = ensemble.run(resume="approval-1", decision=ReviewDecision.Edit("Edited"))
    print("EXIT", output.exit_reason.value, flush=True)
    print("RAW", output.raw, flush=True)
    """
)


def test_pause_in_one_process_and_resume_in_another(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")

    def run(step: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, path, step],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout.splitlines()

    first = run("start")
    assert first == [
        "ASKED Draft the post",
        "ASKED Write the post",
        "EXIT PAUSED",
        "RAW Draft the post #1",
    ]
    second = run("resume")
    assert second == ["ASKED Publish the post", "EXIT COMPLETED", "RAW Publish the post #1"]
