"""CaptureMode: how much a trace records, and how it is chosen."""

from __future__ import annotations

import os
from enum import StrEnum

from agentensemble._logging import get_logger

__all__ = ["CaptureMode", "resolve_capture_mode"]

logger = get_logger("agentensemble.capture")

ENVIRONMENT_VARIABLE = "AGENTENSEMBLE_CAPTURE_MODE"


class CaptureMode(StrEnum):
    """How much a run records beyond the base trace (prompts, tool calls, timing, tokens)."""

    OFF = "OFF"
    """The base trace only."""
    STANDARD = "STANDARD"
    """Also the full message history of every model call."""
    FULL = "FULL"
    """Also parsed tool inputs and the text of every final answer (what `ReplayModel`
    replays), and traces exported to ``./traces/`` when no exporter is set."""


def resolve_capture_mode(configured: CaptureMode | None) -> CaptureMode:
    """The ensemble's mode if set and not OFF; else ``AGENTENSEMBLE_CAPTURE_MODE``
    (case-insensitive; an invalid value is warned about and ignored); else OFF."""
    if configured is not None and configured is not CaptureMode.OFF:
        return configured
    raw = os.environ.get(ENVIRONMENT_VARIABLE)
    if raw is None or not raw.strip():
        return CaptureMode.OFF
    try:
        return CaptureMode(raw.strip().upper())
    except ValueError:
        logger.warning(
            "Ignoring %s=%r: expected one of OFF, STANDARD, FULL", ENVIRONMENT_VARIABLE, raw
        )
        return CaptureMode.OFF
