"""`ToolResult`: what a tool returns to the agent loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentensemble._frozen import direct_init

__all__ = ["ToolResult"]

_NO_MESSAGE = "Tool execution failed with no message"


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of one tool call. Build it with `ToolResult.success` or `ToolResult.failure`."""

    output: str = ""
    """Text shown to the model (a failure with no output shows its error message)."""
    is_success: bool = True
    error_message: str | None = None
    """Why the tool failed; the model sees ``"Error: {error_message}"``."""
    structured_output: Any = None
    """Optional typed payload, surfaced to listeners and traces (never sent to the model)."""

    @classmethod
    def success(cls, output: str = "", structured: Any = None) -> ToolResult:
        """A successful result with `output` text and an optional structured payload."""
        return cls(output=output, structured_output=structured)

    @classmethod
    def failure(cls, error_message: str | None) -> ToolResult:
        """A failed result; the model is shown the error message."""
        return cls(is_success=False, error_message=error_message or _NO_MESSAGE)

    @property
    def text_for_model(self) -> str:
        """The text the model sees: the output; for a failure without output text,
        ``"Error: {error_message}"``."""
        if self.is_success or self.output:
            return self.output
        return f"Error: {self.error_message}"


def coerce_result(value: object) -> ToolResult:
    """Turn whatever a tool returned into a `ToolResult` (None is an empty success). Text is
    a success whatever it says (a tool that failed raises, or returns
    `ToolResult.failure`)."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult.success("")
    if isinstance(value, str):
        return ToolResult.success(value)
    return ToolResult.success(_to_text(value), structured=value)


def _to_text(value: object) -> str:
    from pydantic_core import to_json

    try:
        return to_json(value).decode()
    except Exception:
        return str(value)
