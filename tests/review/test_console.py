"""`ConsoleReviewHandler`: the choices a person types, what the console shows, a closed
input, several requests on one stream, a whole run, and a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import IO

import pytest

from agentensemble import (
    Ensemble,
    ExitReason,
    Review,
    ReviewDecision,
    ReviewHandler,
    ReviewRequest,
    ReviewTiming,
    ScriptedModel,
    Task,
)
from agentensemble.review import ConsoleReviewHandler, OnTimeoutAction
from agentensemble.review._signals import ReviewTimedOut


def request(
    *,
    timing: ReviewTiming = ReviewTiming.AFTER_EXECUTION,
    on_timeout: OnTimeoutAction = OnTimeoutAction.EXIT_EARLY,
    task_output: str | None = "an old pond",
    tool_name: str | None = None,
) -> ReviewRequest:
    return ReviewRequest(
        task_description="Write a haiku",
        task_output=task_output,
        timing=timing,
        timeout=timedelta(minutes=5),
        on_timeout=on_timeout,
        prompt="Check it",
        tool_name=tool_name,
    )


async def answer(typed: str, review: ReviewRequest | None = None) -> tuple[ReviewDecision, str]:
    """The decision for `typed` on a fresh handler, and what the handler showed."""
    out = io.StringIO()
    handler = ReviewHandler.console(input=io.StringIO(typed), output=out)
    decision = await handler.review(review or request())
    return decision, out.getvalue()


# --- choices ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        pytest.param("c\n", ReviewDecision.Continue(), id="c"),
        pytest.param("\n", ReviewDecision.Continue(), id="enter"),
        pytest.param("continue\n", ReviewDecision.Continue(), id="continue"),
        pytest.param("  C  \n", ReviewDecision.Continue(), id="C-padded"),
        pytest.param("x\n", ReviewDecision.ExitEarly(), id="x"),
        pytest.param("exit\n", ReviewDecision.ExitEarly(), id="exit"),
        pytest.param("X\n", ReviewDecision.ExitEarly(), id="X"),
        pytest.param("e\nfrog jumps\n", ReviewDecision.Edit("frog jumps"), id="e-one-line"),
        pytest.param("edit\nfrog jumps\n", ReviewDecision.Edit("frog jumps"), id="edit-one-line"),
        pytest.param("e\r\nfrog jumps\r\n", ReviewDecision.Edit("frog jumps"), id="e-crlf"),
        pytest.param("e\nfrog jumps", ReviewDecision.Edit("frog jumps"), id="e-no-final-newline"),
        pytest.param(
            'e\n"""\nan old pond\n  a frog jumps in\n\nsplash\n"""\n',
            ReviewDecision.Edit("an old pond\n  a frog jumps in\n\nsplash"),
            id="e-multiline",
        ),
        pytest.param(
            'e\n"""\nonly line\n"""\nx\n',
            ReviewDecision.Edit("only line"),
            id="e-multiline-stops-at-closing-quotes",
        ),
    ],
)
async def test_each_choice_gives_its_decision(typed: str, expected: ReviewDecision) -> None:
    decision, _ = await answer(typed)

    assert decision == expected


async def test_exit_early_typed_by_a_person_is_not_a_timeout() -> None:
    decision, _ = await answer("x\n")

    assert isinstance(decision, ReviewDecision.ExitEarly)
    assert decision.timed_out is False


@pytest.mark.parametrize("typed", ["maybe", "y", "no", "n", "q", "quit", "stop"])
async def test_an_unrecognised_answer_asks_again_with_the_choices(typed: str) -> None:
    decision, shown = await answer(f"{typed}\nx\n")

    assert decision == ReviewDecision.ExitEarly()
    assert f"{typed!r} is not one of the choices: [c] continue  [e] edit  [x] exit early" in shown
    assert shown.count("[c] continue") >= 3  # asked, told, asked again


async def test_an_edit_asks_for_the_revised_text() -> None:
    _, shown = await answer("e\nfrog jumps\n")

    assert "Enter the revised text" in shown
    assert '"""' in shown


async def test_an_edit_of_a_human_input_question_asks_for_the_answer() -> None:
    review = request(timing=ReviewTiming.DURING_EXECUTION, tool_name="human_input")

    decision, shown = await answer("e\nblue\n", review)

    assert decision == ReviewDecision.Edit("blue")
    assert "[e] answer" in shown
    assert "Enter the answer" in shown


# --- closed input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on_timeout", "expected"),
    [
        (OnTimeoutAction.CONTINUE, ReviewDecision.Continue()),
        (OnTimeoutAction.EXIT_EARLY, ReviewDecision.ExitEarly(timed_out=True)),
    ],
)
async def test_a_closed_input_applies_the_on_timeout_action(
    on_timeout: OnTimeoutAction, expected: ReviewDecision
) -> None:
    decision, shown = await answer("", request(on_timeout=on_timeout))

    assert decision == expected
    assert "Input closed" in shown


async def test_a_closed_input_with_fail_raises_review_timed_out() -> None:
    with pytest.raises(ReviewTimedOut) as raised:
        await answer("", request(on_timeout=OnTimeoutAction.FAIL))

    assert raised.value.task_description == "Write a haiku"
    assert raised.value.timeout == timedelta(minutes=5)
    assert not isinstance(raised.value, Exception)


# --- what the console shows ----------------------------------------------------------------


async def test_edit_is_not_a_choice_before_a_task_starts() -> None:
    decision, shown = await answer("e\nc\n", request(timing=ReviewTiming.BEFORE_EXECUTION))
    assert decision == ReviewDecision.Continue()
    assert "'e' is not one of the choices: [c] continue  [x] exit early" in shown
    assert "Enter the revised text" not in shown


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        pytest.param("e\n", ReviewDecision.ExitEarly(timed_out=True), id="closed-after-e"),
        pytest.param(
            'e\n"""\nhalf a haiku\n', ReviewDecision.ExitEarly(timed_out=True), id="unclosed"
        ),
        pytest.param("e\n\n", ReviewDecision.Continue(), id="empty-edit-keeps-output"),
    ],
)
async def test_an_edit_that_is_never_confirmed_changes_nothing(
    typed: str, expected: ReviewDecision
) -> None:
    decision, _ = await answer(typed)
    assert decision == expected


async def test_the_console_shows_the_task_the_prompt_the_output_and_the_choices() -> None:
    review = request(task_output="an old pond\na frog jumps in")

    _, shown = await answer("c\n", review)

    assert "Task: Write a haiku" in shown
    assert "Check it" in shown
    assert "    an old pond\n    a frog jumps in\n" in shown
    assert "[c] continue  [e] edit  [x] exit early" in shown
    assert "(no answer in 5:00: exit early)" in shown


async def test_before_execution_offers_no_edit() -> None:
    review = request(timing=ReviewTiming.BEFORE_EXECUTION, task_output=None)

    _, shown = await answer("c\n", review)

    assert "Review before the task starts" in shown
    assert "[c] continue  [x] exit early" in shown
    assert "[e]" not in shown
    assert "Output:" not in shown


async def test_a_tool_approval_names_the_tool_and_its_action() -> None:
    review = request(
        timing=ReviewTiming.DURING_EXECUTION, task_output="rm -rf build/", tool_name="shell"
    )

    _, shown = await answer("c\n", review)

    assert "tool 'shell' asks for approval" in shown
    assert "Action:\n    rm -rf build/\n" in shown


# --- several requests on one stream -----------------------------------------------------------


@contextmanager
def pipe_with(data: str) -> Iterator[IO[str]]:
    """A readable pipe holding `data`, its write end closed: it has a file descriptor, so
    the handler reads it in chunks rather than line by line."""
    read_end, write_end = os.pipe()
    os.write(write_end, data.encode())
    os.close(write_end)
    stream = os.fdopen(read_end, "r", encoding="utf-8")
    try:
        yield stream
    finally:
        stream.close()


@contextmanager
def string_with(data: str) -> Iterator[IO[str]]:
    yield io.StringIO(data)


@pytest.mark.parametrize("source", [string_with, pipe_with], ids=["stringio", "pipe"])
async def test_requests_in_a_row_read_one_line_each_from_one_stream(
    source: Callable[[str], AbstractContextManager[IO[str]]],
) -> None:
    with source("c\nx\n") as stream:
        handler = ReviewHandler.console(input=stream, output=io.StringIO())

        first = await handler.review(request())
        second = await handler.review(request())
        third = await handler.review(request())

    assert first == ReviewDecision.Continue()
    assert second == ReviewDecision.ExitEarly()
    assert third == ReviewDecision.ExitEarly(timed_out=True)


# --- a whole run ------------------------------------------------------------------------------


def test_an_edit_typed_at_the_console_becomes_the_run_output() -> None:
    out = io.StringIO()
    handler = ReviewHandler.console(input=io.StringIO("e\nfrog jumps\n"), output=out)

    output = Ensemble(
        tasks=[Task("Write a haiku", review=Review.required())],
        llm=ScriptedModel(["an old pond"]),
        review_handler=handler,
    ).run()

    assert isinstance(handler, ConsoleReviewHandler)
    assert output.raw == "frog jumps"
    assert output.exit_reason is ExitReason.COMPLETED
    assert "    an old pond\n" in out.getvalue()


def test_exit_early_typed_at_the_console_ends_the_run() -> None:
    output = Ensemble(
        tasks=[Task("Write a haiku", review=Review.required()), Task("Write another")],
        llm=ScriptedModel(["an old pond", "never asked"]),
        review_handler=ReviewHandler.console(input=io.StringIO("x\n"), output=io.StringIO()),
    ).run()

    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert "never asked" not in [task.raw for task in output.task_outputs]


# --- a real pseudo-terminal ---------------------------------------------------------------------

CHILD = """
from agentensemble import Ensemble, Review, ReviewHandler, ScriptedModel, Task

output = Ensemble(
    tasks=[Task("Write a haiku", review=Review.required())],
    llm=ScriptedModel(["an old pond"]),
    review_handler=ReviewHandler.console(),
).run()
print("RESULT:" + output.raw)
print("EXIT:" + output.exit_reason.value)
"""

DEADLINE_SECONDS = 30.0


class Terminal:
    """A child Python running `script` with a pseudo-terminal as stdin, stdout and stderr."""

    def __init__(self, script: str) -> None:
        import pty  # not on Windows

        self.deadline = time.monotonic() + DEADLINE_SECONDS
        self.master, slave = pty.openpty()
        self.raw = b""
        self._searched_to = 0
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", script],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                close_fds=True,
                env=dict(os.environ),
            )
        except BaseException:
            os.close(self.master)
            raise
        finally:
            os.close(slave)

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    def expect(self, pattern: str) -> re.Match[str]:
        """The first match of the regex `pattern` after the previous match; fails with
        everything read so far when the child ends or the deadline passes first."""
        regex = re.compile(pattern)
        while True:
            found = regex.search(self.text, self._searched_to)
            if found is not None:
                self._searched_to = found.end()
                return found
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no {pattern!r} within {DEADLINE_SECONDS:g}s; read: {self.text!r}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # Linux: EIO once the child closed its end
                chunk = b""
            if not chunk:
                pytest.fail(f"the child ended before {pattern!r}; read: {self.text!r}")
            self.raw += chunk

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
        finally:
            os.close(self.master)


@contextmanager
def terminal(script: str) -> Iterator[Terminal]:
    session = Terminal(script)
    try:
        yield session
    finally:
        session.close()


needs_a_pty = pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")


@needs_a_pty
def test_a_person_at_a_terminal_edits_the_output() -> None:
    with terminal(CHILD) as tty:
        tty.expect(r"Task: Write a haiku")
        tty.expect(r"an old pond")
        tty.expect(r"\[c\] continue  \[e\] edit  \[x\] exit early > ")
        tty.expect(r"\x1b\[1A\r\x1b\[K  \[\d:\d\d until exit early\]\x1b8")  # the line above
        tty.type("e\r")
        tty.expect(r"Enter the revised text")
        tty.type("revised by a person\r")
        result = tty.expect(r"RESULT:(.*?)\r?\n")
        exit_reason = tty.expect(r"EXIT:(\w+)")

    assert result.group(1) == "revised by a person"
    assert exit_reason.group(1) == "COMPLETED"


@needs_a_pty
def test_a_person_at_a_terminal_exits_early() -> None:
    with terminal(CHILD) as tty:
        tty.expect(r"\[x\] exit early > ")
        tty.type("x\n")
        tty.expect(r"RESULT:")
        exit_reason = tty.expect(r"EXIT:(\w+)")

    assert exit_reason.group(1) == "USER_EXIT_EARLY"
