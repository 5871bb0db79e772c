"""`RunOptions`: per-run overrides of ensemble settings."""

from __future__ import annotations

from dataclasses import dataclass

from agentensemble._checks import require_int
from agentensemble.errors import ValidationError

__all__ = ["RunOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """Overrides for one run; a field left None keeps the ensemble's value."""

    max_tool_output_length: int | None = None
    """Characters of each tool result the model sees; -1 for no limit."""
    tool_log_truncate_length: int | None = None
    """Characters of tool input/output written to logs; -1 for all, 0 for none."""

    def __post_init__(self) -> None:
        check_length(self.max_tool_output_length, "RunOptions max_tool_output_length")
        check_length(self.tool_log_truncate_length, "RunOptions tool_log_truncate_length")


def check_length(value: int | None, field: str) -> None:
    """A length setting is None (unset), -1 (unlimited) or >= 0."""
    if value is None:
        return
    require_int(value, field)
    if value < -1:
        raise ValidationError(f"{field} must be -1 (unlimited) or >= 0, got: {value}")
