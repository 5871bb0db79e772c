"""Task context for log records, carried in a `contextvars.ContextVar`.

Every record logged by agentensemble during a task carries ``task_index`` (``"2/5"``),
``task_description`` (first 80 characters) and ``agent_role`` attributes, so a log format
such as ``"%(task_index)s %(agent_role)s %(message)s"`` works. Records logged outside a task
carry empty strings. Use `TaskContextFilter` on your own handlers to add the same
attributes to records from other libraries.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "LogContext",
    "LoggedTask",
    "TaskContextFilter",
    "current_log_context",
    "enter_task_log",
    "get_logger",
    "leave_task_log",
]


@dataclass(frozen=True, slots=True)
class LogContext:
    """What the current task is, for log records."""

    task_index: str = ""
    task_description: str = ""
    agent_role: str = ""


logging.getLogger("agentensemble").addHandler(logging.NullHandler())
# The library's records go where the application's logging sends them; without any
# configuration, nothing is printed (not even through logging's last-resort handler).


class LoggedTask(Protocol):
    """What a task's log context is made of (a planned task): read only when a record is
    logged, so a task that logs nothing (most do) costs no `LogContext`, not even a tuple."""

    @property
    def index(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def description(self) -> str: ...
    @property
    def role(self) -> str: ...


_current: ContextVar[LoggedTask | None] = ContextVar("agentensemble_log_context", default=None)
_OUTSIDE = LogContext()


def current_log_context() -> LogContext:
    """The log context of the task running now (empty strings outside a task)."""
    task = _current.get()
    if task is None:
        return _OUTSIDE
    return LogContext(f"{task.index}/{task.total}", task.description[:80], task.role)


def enter_task_log(task: LoggedTask) -> LoggedTask | None:
    """Make `task` the log context; return the one it replaces, for `leave_task_log`. (No
    token is kept: a token lives as long as the task, one more object per waiting task for
    the garbage collector to walk, and setting the previous one back does what a reset
    would, since entries and leaves nest.)"""
    previous = _current.get()
    _current.set(task)
    return previous


def leave_task_log(previous: LoggedTask | None) -> None:
    """Make `previous` (what `enter_task_log` returned) the log context again."""
    _current.set(previous)


class TaskContextFilter(logging.Filter):
    """Adds ``task_index``, ``task_description`` and ``agent_role`` to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Attach the current task's context to `record`; never drops a record."""
        context = current_log_context()
        record.task_index = context.task_index
        record.task_description = context.task_description
        record.agent_role = context.agent_role
        return True


class _ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """Adds the current task's log context to each record as ``extra`` attributes."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        context = current_log_context()
        extra = kwargs.setdefault("extra", {})
        extra.setdefault("task_index", context.task_index)
        extra.setdefault("task_description", context.task_description)
        extra.setdefault("agent_role", context.agent_role)
        return msg, kwargs


def get_logger(name: str) -> logging.LoggerAdapter[logging.Logger]:
    """A logger under ``agentensemble`` whose records carry the task log context."""
    return _ContextAdapter(logging.getLogger(name), {})
