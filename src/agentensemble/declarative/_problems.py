"""What is wrong with an ensemble file, and where."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentensemble.errors import FileProblem

__all__ = ["Located", "ProblemList", "did_you_mean", "dotted", "problem"]


@dataclass(frozen=True, slots=True)
class Located:
    """A place in a file: 1-based line and column (0 when the whole file is meant)."""

    file: str
    line: int
    column: int


def problem(where: Located, field: str, message: str) -> FileProblem:
    return FileProblem(where.file, where.line, where.column, field, message)


class ProblemList(Exception):
    """Carries problems from the stages of loading to the public `EnsembleFileError`."""

    def __init__(self, problems: Sequence[FileProblem]) -> None:
        super().__init__(problems)
        self.problems = tuple(problems)


def dotted(path: Iterable[str | int]) -> str:
    """``("tasks", "write", "context", 0)`` -> ``tasks.write.context[0]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'research'?"`` when a choice is close to `name`, else ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
