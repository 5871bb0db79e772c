"""`ConsoleReviewHandler`: a person at a terminal answers review requests.

It reads its input stream without blocking the event loop (a file descriptor is watched by
the loop; a stream without one is read in a worker thread), shows a countdown while it waits
for the choice, and serialises its requests so that two gates never share the terminal.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import sys
import weakref
from collections.abc import Awaitable
from concurrent.futures import Future
from typing import IO

from agentensemble._calling import start_daemon_call
from agentensemble.review._handlers import ReviewHandler, timeout_decision
from agentensemble.review._model import (
    Continue,
    Edit,
    ExitEarly,
    ReviewDecision,
    ReviewRequest,
    ReviewTiming,
)

__all__ = ["ConsoleReviewHandler"]

_RULE = "─" * 60
_MULTILINE = '"""'
_COUNTDOWN_TICK = 1.0


class ConsoleReviewHandler(ReviewHandler):
    """Shows each request and reads a decision: ``c`` or Enter continues, ``e`` then the
    revised text edits (a line, or several between two ``\"\"\"`` lines; an empty line keeps
    the output), ``x`` exits early; anything else continues. When the input is closed, the
    request's on-timeout action applies at once. In a terminal a countdown shows on the
    line above the prompt. `input`/`output` default to the process's stdin/stdout.

    A stream that is not a terminal is read in a daemon thread: a line typed after a review
    timed out answers the next review of this handler."""

    def __init__(self, *, input: IO[str] | None = None, output: IO[str] | None = None) -> None:
        self.input = input
        self.output = output
        self._lines: _Lines | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        async with self._lock():
            out = self.output or sys.stdout
            _show(out, request)
            try:
                return await self._decide(out, request)
            except asyncio.CancelledError:
                _write(out, "\n  The review ended before a decision was typed.\n")
                raise

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    def _reader(self) -> _Lines:
        stream = self.input or sys.stdin
        if self._lines is None or self._lines.stream is not stream:
            self._lines = _Lines(stream)
        return self._lines

    async def _decide(self, out: IO[str], request: ReviewRequest) -> ReviewDecision:
        """Ask until the answer is one of the choices ("no" or "stop" is not one: a person
        who typed it did not mean "continue", so they are asked again)."""
        while True:
            choice = await self._read(out, self._read_choice(out, request))
            if choice is None:
                return _closed(out, request)
            answer = choice.strip().lower()
            if answer in ("x", "exit"):
                return ExitEarly()
            if answer in ("e", "edit") and _can_edit(request):
                return await self._read_edit(out, request)
            if answer in ("", "c", "continue"):
                return Continue()
            _write(out, f"  {choice.strip()!r} is not one of the choices: {_choices(request)}\n")

    async def _read(self, out: IO[str], reading: Awaitable[str | None]) -> str | None:
        """A line the person typed; when the input does not echo (not a terminal), the
        line break the terminal would have shown is written instead."""
        line = await reading
        if not _is_terminal(self.input or sys.stdin):
            _write(out, "\n")
        return line

    async def _read_choice(self, out: IO[str], request: ReviewRequest) -> str | None:
        seconds = request.timeout.total_seconds()
        if not seconds or not _is_terminal(out):
            wait = f" (no answer in {_clock(seconds)}: {_action(request)})" if seconds else ""
            _write(out, f"  {_choices(request)}{wait} > ")
            return await self._reader().readline()
        # The countdown lives on the line above the prompt, so that updating it never
        # touches what the person is typing (save the cursor, go up, rewrite, come back).
        _write(out, f"\n  {_choices(request)} > ")
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            left = max(0.0, deadline - asyncio.get_running_loop().time())
            countdown = f"  [{_clock(left)} until {_action(request)}]"
            _write(out, f"\x1b7\x1b[1A\r\x1b[K{countdown}\x1b8")
            try:  # a read cut short keeps what it read (and a thread's read stays pending)
                async with asyncio.timeout(_COUNTDOWN_TICK) as tick:
                    return await self._reader().readline()
            except TimeoutError:
                if not tick.expired():
                    raise

    async def _read_edit(self, out: IO[str], request: ReviewRequest) -> ReviewDecision:
        what = "answer" if request.tool_name == "human_input" else "revised text"
        _write(out, f'  Enter the {what} (one line, or several between two """ lines):\n  > ')
        first = await self._read(out, self._reader().readline())
        if first is None:
            return _closed(out, request)
        if not first.strip():
            _write(out, "  Nothing entered: continuing without an edit.\n")
            return Continue()
        if first.strip() != _MULTILINE:
            return Edit(first)
        lines: list[str] = []
        while True:
            _write(out, "  > ")
            line = await self._read(out, self._reader().readline())
            if line is None:  # closed before the closing quotes: nothing was confirmed
                return _closed(out, request)
            if line.strip() == _MULTILINE:
                return Edit("\n".join(lines))
            lines.append(line)


class _Lines:
    """Lines of a text stream, read without blocking the event loop.

    A terminal is watched by the event loop and read directly (a line at a time arrives
    once the person presses Enter); any other stream is read through the stream itself (so
    text it has already buffered is not skipped) in a daemon thread, which never holds up
    the process's exit, and whose line goes to the next read if the review that started it
    ends first.
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._in_flight: Future[str] | None = None
        """A thread's read that a timed-out review left running: the next read takes its
        line instead of losing it."""

    async def readline(self) -> str | None:
        """The next line without its line break; None at the end of the input (Ctrl-D at a
        terminal ends only the current read)."""
        while "\n" not in self._pending:
            chunk = await self._read()
            if not chunk:
                break
            self._pending += chunk
        if not self._pending:
            return None
        line, _, self._pending = self._pending.partition("\n")
        return line.rstrip("\r")

    async def _read(self) -> str:
        fd = _descriptor(self.stream) if _is_terminal(self.stream) else None
        if fd is not None:
            data = await _read_when_ready(fd)
            if data is not None:
                return self._decoder.decode(data, final=not data)
        if self._in_flight is None:
            self._in_flight = start_daemon_call(self.stream.readline)
        line: str = await asyncio.wrap_future(self._in_flight)
        self._in_flight = None
        return line


async def _read_when_ready(fd: int) -> bytes | None:
    """What the terminal has for us once the event loop sees it readable; None when the
    loop cannot watch it (then a thread reads)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    try:
        loop.add_reader(fd, wake)
    except (NotImplementedError, OSError, ValueError):  # e.g. Windows' Proactor loop
        return None  # the caller reads in a thread instead
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return os.read(fd, 4096)


def _closed(out: IO[str], request: ReviewRequest) -> ReviewDecision:
    """The input ended: nobody can answer, so the request's on-timeout action applies."""
    _write(out, "  Input closed: nobody can answer.\n")
    return timeout_decision(request)


def _can_edit(request: ReviewRequest) -> bool:
    return request.timing is not ReviewTiming.BEFORE_EXECUTION


def _descriptor(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _write(out: IO[str], text: str) -> None:
    out.write(text)
    out.flush()


def _show(out: IO[str], request: ReviewRequest) -> None:
    lines = ["", _RULE, f"  Review {_title(request)}", f"  Task: {request.task_description}"]
    if request.prompt:
        lines.append(f"  {request.prompt}")
    if request.task_output is not None:
        lines += [
            f"  {_subject(request)}:",
            *(f"    {line}" for line in request.task_output.splitlines()),
        ]
    lines.append(_RULE)
    _write(out, "\n".join(lines) + "\n")


def _title(request: ReviewRequest) -> str:
    if request.timing is ReviewTiming.BEFORE_EXECUTION:
        return "before the task starts"
    if request.timing is ReviewTiming.AFTER_EXECUTION:
        return "of the task's output"
    if request.tool_name == "human_input":
        return "— the agent has a question"
    return f"— tool '{request.tool_name}' asks for approval"


def _subject(request: ReviewRequest) -> str:
    if request.timing is ReviewTiming.AFTER_EXECUTION:
        return "Output"
    return "Question" if request.tool_name == "human_input" else "Action"


def _choices(request: ReviewRequest) -> str:
    if not _can_edit(request):
        return "[c] continue  [x] exit early"
    edit = "answer" if request.tool_name == "human_input" else "edit"
    return f"[c] continue  [e] {edit}  [x] exit early"


def _action(request: ReviewRequest) -> str:
    return request.on_timeout.value.lower().replace("_", " ")


def _clock(seconds: float) -> str:
    whole = int(seconds + 0.999)
    minutes, seconds_left = divmod(whole, 60)
    return f"{minutes}:{seconds_left:02d}"
