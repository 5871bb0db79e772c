"""`ConsoleProgress`: live progress of a run on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TextIO

from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._events import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    GraphStateCompletedEvent,
    LlmIterationCompletedEvent,
    LoopIterationCompletedEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    RunWarningEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
    ToolCallEvent,
)
from agentensemble.observability._listeners import EnsembleListener

__all__ = ["ConsoleProgress"]


@dataclass(slots=True)
class _Totals:
    tasks_done: int = 0
    tool_calls: int = 0
    tokens: int = 0
    tokens_known: bool = True
    cost: Decimal | None = None

    def describe(self) -> str:
        tokens = f"{self.tokens} tokens" if self.tokens_known else "tokens unknown"
        cost = f" · cost {self.cost:.6f}" if self.cost is not None else ""
        return f"{plural(self.tool_calls, 'tool call')} · {tokens}{cost}"


class ConsoleProgress(EnsembleListener):
    """Prints each step of a run: tasks starting and finishing, tool calls, tokens and cost
    so far. On a terminal it uses `rich` (``pip install "agentensemble[cli]"``) with a live
    status line; otherwise, or without rich, it writes plain lines. Writes to stderr by
    default so that stdout stays the program's output.
    """

    def __init__(self, stream: TextIO | None = None, *, rich: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self._totals = _Totals()
        self._cost: CostConfiguration | None = None
        self._console: Any = None
        self._status: Any = None
        self._open_reviews = 0
        if rich if rich is not None else self.stream.isatty():
            self._console = _rich_console(self.stream)

    def _line(self, text: str, style: str = "") -> None:
        if self._console is not None:
            self._console.print(text, style=style or None, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def _update_status(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    async def on_ensemble_started(self, event: EnsembleStartedEvent) -> None:
        """Start the status line."""
        self._totals = _Totals()
        self._cost = event.cost_configuration
        label = f" {event.name}" if event.name else ""
        self._line(
            f"▶ run{label} {event.ensemble_id[:8]} · {event.workflow} · {event.total_tasks} tasks",
            "bold",
        )
        if self._console is not None:
            self._status = self._console.status("running…")
            self._status.start()

    async def on_task_start(self, event: TaskStartEvent) -> None:
        """Announce a task (a delegated worker's indented under its delegation)."""
        if event.parent_task_id is not None:
            self._update_status(f"{event.agent_role}: {_short(event.task_description, 50)}")
            return
        self._line(
            f"● [{event.task_index}/{event.total_tasks}] {event.agent_role}: "
            f"{_short(event.task_description)}",
            "cyan",
        )
        self._update_status(f"{event.agent_role}: {_short(event.task_description, 50)}")

    async def on_llm_iteration_completed(self, event: LlmIterationCompletedEvent) -> None:
        """Count tokens."""
        if event.input_tokens < 0 or event.output_tokens < 0:
            self._totals.tokens_known = False
        else:
            self._totals.tokens += event.input_tokens + event.output_tokens
        self._update_status(f"{event.agent_role} · {self._totals.describe()}")

    async def on_tool_call(self, event: ToolCallEvent) -> None:
        """Show a tool call."""
        self._totals.tool_calls += 1
        mark = "✓" if event.outcome == "SUCCESS" else "✗"
        milliseconds = round(event.duration.total_seconds() * 1000)
        self._line(f"  ↳ {event.tool_name} {mark} {milliseconds} ms", "dim")

    async def on_loop_iteration_completed(self, event: LoopIterationCompletedEvent) -> None:
        """Show a finished loop iteration."""
        of = f"/{event.max_iterations}" if event.max_iterations else ""
        self._line(f"⟳ loop '{event.loop_name}' iteration {event.iteration}{of} done", "dim")

    async def on_graph_state_completed(self, event: GraphStateCompletedEvent) -> None:
        """Show where a graph's walk goes next."""
        target = "END" if event.next_state == "__END__" else event.next_state
        self._line(f"→ graph '{event.graph_name}': {event.state} → {target}", "dim")

    async def on_run_warning(self, event: RunWarningEvent) -> None:
        """Show a warning about the run."""
        self._line(f"⚠ {event.message}", "yellow")

    async def on_delegation_started(self, event: DelegationStartedEvent) -> None:
        """Show a delegation handed out."""
        self._line(
            f"  ⇢ {event.delegating_agent_role} → {event.worker_role}: "
            f"{_short(event.task_description, 60)}",
            "magenta",
        )

    async def on_delegation_completed(self, event: DelegationCompletedEvent) -> None:
        """Show a delegation answered."""
        seconds = event.duration.total_seconds()
        self._line(
            f"  ⇠ {event.worker_role} answered {event.delegating_agent_role} in {seconds:.2f}s",
            "magenta",
        )

    async def on_delegation_failed(self, event: DelegationFailedEvent) -> None:
        """Show a delegation refused or failed."""
        self._line(
            f"  ⇢ {event.delegating_agent_role} → {event.worker_role} ✗ "
            f"{_short(event.failure_reason, 80)}",
            "yellow",
        )

    async def on_review_requested(self, event: ReviewRequestedEvent) -> None:
        """Show a review waiting; the status line stops so a console reviewer has the
        terminal to itself."""
        self._open_reviews += 1
        if self._status is not None and self._open_reviews == 1:
            self._status.stop()
        subject = f"tool '{event.tool_name}'" if event.tool_name else event.timing.lower()
        self._line(f"  ⏸ review ({subject.replace('_', ' ')}): waiting for a decision", "blue")

    async def on_review_decided(self, event: ReviewDecidedEvent) -> None:
        """Show the decision and resume the status line."""
        decision = event.decision.lower().replace("_", " ")
        self._line(f"  ▶ review: {'no decision' if decision == 'none' else decision}", "blue")
        self._resume_status()

    async def on_review_timed_out(self, event: ReviewTimedOutEvent) -> None:
        """Show the timeout's action and resume the status line."""
        self._line(
            f"  ▶ review: no decision in time, {event.action.lower().replace('_', ' ')}",
            "yellow",
        )
        self._resume_status()

    def _resume_status(self) -> None:
        self._open_reviews = max(0, self._open_reviews - 1)
        if self._status is not None and self._open_reviews == 0:
            self._status.start()

    async def on_task_complete(self, event: TaskCompleteEvent) -> None:
        """Show a finished task and the totals so far."""
        totals = self._totals
        cost = self._cost.estimate(event.input_tokens, event.output_tokens) if self._cost else None
        if cost is not None:
            totals.cost = (totals.cost or Decimal(0)) + cost
        if event.parent_task_id is not None:  # a delegated worker: shown by its delegation
            return
        totals.tasks_done += 1
        seconds = event.duration.total_seconds()
        self._line(
            f"✓ [{event.task_index}/{event.total_tasks}] {event.agent_role} done in "
            f"{seconds:.2f}s · so far: {totals.describe()}",
            "green",
        )

    async def on_task_failed(self, event: TaskFailedEvent) -> None:
        """Show a failed task (a delegated worker's failure is shown by its delegation)."""
        if event.parent_task_id is not None:
            return
        self._line(
            f"✗ [{event.task_index}/{event.total_tasks}] {event.agent_role} failed: {event.reason}",
            "red",
        )

    async def on_ensemble_completed(self, event: EnsembleCompletedEvent) -> None:
        """Stop the status line and print the totals."""
        if self._status is not None:
            self._status.stop()
            self._status = None
        seconds = event.duration.total_seconds()
        self._line(
            f"■ {event.exit_reason.lower()} in {seconds:.2f}s · {self._totals.tasks_done} tasks · "
            f"{self._totals.describe()}",
            "bold",
        )


def plural(count: int, noun: str) -> str:
    """``1 tool call``, ``2 tool calls``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _short(text: str, limit: int = 70) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _rich_console(stream: TextIO) -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=stream)
