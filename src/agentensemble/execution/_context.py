"""The immutable wiring of one run, handed from the ensemble to workflows and the agent loop."""

from __future__ import annotations

from dataclasses import dataclass

from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._listeners import EventDispatcher

__all__ = ["ExecutionContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionContext:
    """Everything a run shares across its tasks. Built once per run; never mutated."""

    ensemble_id: str
    events: EventDispatcher
    verbose: bool = False
    max_tool_output_length: int = -1
    """Characters of tool output the model sees (-1: all)."""
    tool_log_truncate_length: int = 200
    """Characters of tool input/output in logs (-1: all, 0: none)."""
    capture_mode: CaptureMode = CaptureMode.OFF
    cost_configuration: CostConfiguration | None = None
