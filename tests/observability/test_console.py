"""Console progress: plain lines off a terminal, rich on one."""

import io
import re

import pytest

from agentensemble import (
    ConsoleProgress,
    CostConfiguration,
    Ensemble,
    ScriptedModel,
    Task,
    Usage,
    tool,
    tool_call,
)


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def run_with_progress(progress: ConsoleProgress) -> None:
    llm = ScriptedModel([tool_call("ping"), "one", "two"], usage=Usage(10, 5))
    Ensemble(
        tasks=[Task("Check the server", tools=[ping]), Task("Write a note")],
        llm=llm,
        listeners=[progress],
        cost_configuration=CostConfiguration("0.001", "0.002"),
        name="ops",
    ).run()


def test_plain_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    run_with_progress(ConsoleProgress(stream))
    lines = [
        re.sub(r"\d+\.\d\ds|\d+ ms|[0-9a-f]{8} ", "#", line)
        for line in stream.getvalue().splitlines()
    ]
    assert lines == [
        "▶ run ops #· SEQUENTIAL · 2 tasks",
        "⚠ In this SEQUENTIAL run, 'Write a note' sees no earlier task's output: list the "
        "tasks it needs in context=[...] (and keep workflow=SEQUENTIAL), or set "
        "short_term_memory=True to pass every earlier output",
        "● [1/2] Agent: Check the server",
        "  ↳ ping ✓ #",
        "✓ [1/2] Agent done in # · so far: 1 tool call · 30 tokens · cost 0.040000",
        "● [2/2] Writer: Write a note",
        "✓ [2/2] Writer done in # · so far: 1 tool call · 45 tokens · cost 0.060000",
        "■ completed in # · 2 tasks · 1 tool call · 45 tokens · cost 0.060000",
    ]


def test_rich_output_on_a_terminal() -> None:
    stream = io.StringIO()
    run_with_progress(ConsoleProgress(stream, rich=True))
    text = stream.getvalue()
    assert "✓ [2/2] Writer done in" in text
    assert "■ completed in" in text


def test_verbose_ensembles_show_progress(capsys: pytest.CaptureFixture[str]) -> None:
    Ensemble(tasks=[Task("Say hi")], llm=ScriptedModel(["hi"]), verbose=True).run()
    err = capsys.readouterr().err
    assert "● [1/1] Agent: Say hi" in err
    assert "■ completed in" in err


def test_reviews_show_while_they_wait_and_once_decided() -> None:
    from datetime import timedelta

    from agentensemble import Review, ReviewDecision, ReviewHandler, ReviewRequest
    from tests.review.helpers import Silent

    class Editor(ReviewHandler):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            return ReviewDecision.Edit("better")

    stream = io.StringIO()
    for handler, review in (
        (Editor(), Review.required()),
        (Silent(), Review(timeout=timedelta(milliseconds=5), on_timeout="CONTINUE")),
    ):
        Ensemble(
            tasks=[Task("Write a note", review=review)],
            llm=ScriptedModel(["note"]),
            listeners=[ConsoleProgress(stream, rich=True)],
            review_handler=handler,
        ).run()
    text = stream.getvalue()
    assert text.count("⏸ review (after execution): waiting for a decision") == 2
    assert "▶ review: edit" in text
    assert "▶ review: no decision in time, continue" in text
