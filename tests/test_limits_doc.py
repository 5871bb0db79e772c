"""The limits table in docs/production.md says what the code does."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from agentensemble import QueuedListener
from agentensemble._calling import DEFAULT_SYNC_THREAD_LIMIT
from agentensemble._stream import DEFAULT_MAX_BUFFER
from agentensemble.ensemble import Ensemble
from agentensemble.observability._lane import MAX_PENDING
from agentensemble.tools import FileReadTool, HttpTool, WebScraperTool
from agentensemble.web._dashboard import WebDashboard
from agentensemble.web._hub import MAX_TEXT, RESUME_WINDOW

TABLE = (Path(__file__).parent.parent / "docs" / "production.md").read_text(encoding="utf-8")


def documented(what: str) -> str:
    """The default column of the row that starts with `what`."""
    row = next(line for line in TABLE.splitlines() if line.startswith(f"| {what} |"))
    return row.split("|")[2].strip()


def number(text: str) -> float:
    return float(re.match(r"-?[\d,.]+", text).group().replace(",", ""))  # type: ignore[union-attr]


def default(function: object, name: str) -> object:
    return inspect.signature(function).parameters[name].default  # type: ignore[arg-type]


def test_every_documented_limit_is_the_codes_default() -> None:
    expected = {
        "a tool result the model sees": Ensemble.__dataclass_fields__[
            "max_tool_output_length"
        ].default,
        "tool input and output in logs": Ensemble.__dataclass_fields__[
            "tool_log_truncate_length"
        ].default,
        "events a run's sync listeners may fall behind by": MAX_PENDING,
        "events a `QueuedListener` holds": default(QueuedListener, "max_pending"),
        "a `QueuedListener`'s drain at the run's end": default(QueuedListener, "drain_timeout"),
        "events `astream` holds for a slow reader": DEFAULT_MAX_BUFFER,
        "messages a dashboard client may have unsent": default(WebDashboard, "max_client_pending"),
        "messages per run a reconnecting page resumes from": RESUME_WINDOW,
        "runs a dashboard keeps": default(WebDashboard, "max_retained_runs"),
        "characters of one text field on the dashboard": MAX_TEXT,
        "bytes `HttpTool` reads": default(HttpTool, "max_bytes"),
        "bytes `WebScraperTool` reads": default(WebScraperTool, "max_bytes"),
        "bytes `FileReadTool` reads": default(FileReadTool, "max_bytes"),
        "sync threads across the process": DEFAULT_SYNC_THREAD_LIMIT,
    }
    for what, value in expected.items():
        text = documented(what)
        shown = -1.0 if text.startswith("no limit") else number(text)
        assert shown == value, f"{what}: the docs say {text}, the code {value}"
