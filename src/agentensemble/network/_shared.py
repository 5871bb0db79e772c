"""Shared tasks and tools: the checks an `Ensemble` makes of them, and how a request for
one is answered."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from agentensemble._checks import is_blank
from agentensemble.enums import ExitReason
from agentensemble.errors import ValidationError, describe_error
from agentensemble.execution._templates import template_variables
from agentensemble.network._progress import EventForwarder
from agentensemble.network._spi import BadRequest
from agentensemble.network._wire import ResponseStatus, WorkRequest, WorkResponse
from agentensemble.options import RunOptions
from agentensemble.task import Task
from agentensemble.tools._resolve import expand_tool

if TYPE_CHECKING:
    from agentensemble.ensemble import Ensemble
    from agentensemble.network._spi import Received, Transport
    from agentensemble.tools import Tool

__all__ = ["REQUEST_INPUT", "SharedWork", "check_shared_tasks", "check_shared_tools"]

REQUEST_INPUT = "request"
"""The run input that carries a request's text into its shared task's description, where the
description says ``{request}``, else as a ``## Request`` section after it (inputs are
substituted once and never scanned again, so braces in a request stay as they are)."""


def check_shared_tasks(tasks: object) -> dict[str, Task[Any]]:
    """`Ensemble.shared_tasks` checked: names to tasks that can run alone."""
    checked: dict[str, Task[Any]] = {}
    for name, task in _named(tasks, "shared_tasks", "Shared task name must not be blank"):
        if not isinstance(task, Task):
            raise ValidationError(f"Ensemble shared_tasks['{name}'] must be a Task, got: {task!r}")
        if task.context:
            raise ValidationError(
                f"Ensemble shared_tasks['{name}'] must not have context tasks: a request runs "
                "the shared task alone"
            )
        checked[name] = task
    return checked


def check_shared_tools(tools: object, task_names: Mapping[str, object]) -> dict[str, Tool]:
    """`Ensemble.shared_tools` checked and resolved: names to tools, each one tool."""
    checked: dict[str, Tool] = {}
    for name, entry in _named(tools, "shared_tools", "Shared tool name must not be blank"):
        if name in task_names:
            raise ValidationError(
                f"Ensemble shared_tools['{name}']: '{name}' is a shared task's name too; a "
                "request names one of them"
            )
        resolved = expand_tool(entry)
        if len(resolved) != 1:
            raise ValidationError(
                f"Ensemble shared_tools['{name}'] must be one tool (a @tool function, an "
                f"AgentTool or a LangChain tool), got: {entry!r}"
            )
        checked[name] = resolved[0]
    return checked


def _named(mapping: object, field_name: str, blank_message: str) -> list[tuple[str, Any]]:
    if not isinstance(mapping, Mapping):
        raise ValidationError(f"Ensemble {field_name} must be a mapping of names, got: {mapping!r}")
    for name in mapping:
        if is_blank(name) or not isinstance(name, str):
            raise ValidationError(f"{blank_message}, got: {name!r}")
    return list(mapping.items())


class SharedWork:
    """Answers the requests of one serving ensemble: each shared task runs as a one-task
    ensemble with the serving ensemble's settings (built and checked once, here), each
    shared tool is invoked with the request's JSON."""

    def __init__(self, ensemble: Ensemble, transport: Transport | None = None) -> None:
        from agentensemble._run import checked_ensemble

        self.name = ensemble.name or "default"
        self.transport = transport
        """Where each shared task's run sends its events (None: nowhere)."""
        self._runners = {
            name: _Runners(
                with_request=checked_ensemble(_one_task(ensemble, _with_request(task))),
                without=checked_ensemble(_one_task(ensemble, task)),
            )
            for name, task in ensemble.shared_tasks.items()
        }
        self._tools = cast("Mapping[str, Tool]", ensemble.shared_tools)

    async def answer(self, received: Received) -> WorkResponse:
        """The response to `received` (never raises but for cancellation)."""
        if isinstance(received, BadRequest):
            return WorkResponse.failed(received.request_id, received.error)
        started = time.monotonic()
        try:
            status, text = await self._run(received)
        except Exception as error:
            status, text = ResponseStatus.FAILED, describe_error(error)
        milliseconds = int((time.monotonic() - started) * 1000)
        if status is ResponseStatus.COMPLETED:
            return WorkResponse(
                request_id=received.request_id,
                status=status,
                result=text,
                duration_ms=milliseconds,
            )
        return WorkResponse.failed(received.request_id, text, milliseconds)

    async def _run(self, request: WorkRequest) -> tuple[ResponseStatus, str]:
        left = request.seconds_left()
        if left is not None and left <= 0:
            return ResponseStatus.FAILED, (
                f"The deadline of request '{request.request_id}' ({request.deadline}) passed "
                "before it started"
            )
        runner = self._runners.get(request.task)
        if runner is not None:
            return await _run_task(runner, request, self.transport)
        tool = self._tools.get(request.task)
        if tool is not None:
            return await _call_tool(tool, request)
        raise LookupError(
            f"Unknown shared task or tool '{request.task}' on ensemble '{self.name}' "
            f"(shared tasks: {sorted(self._runners)}; shared tools: {sorted(self._tools)})"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Runners:
    """A shared task's one-task ensembles: for a request with text, and for one without
    (built once: a request is not an ensemble to check again)."""

    with_request: Ensemble
    without: Ensemble


def _with_request(task: Task[Any]) -> Task[Any]:
    """`task` with a request's text in its description: where it says ``{request}``, else in
    a ``## Request`` section after it."""
    if REQUEST_INPUT in template_variables(task.description):
        return task
    return task.copy(description=f"{task.description}\n\n## Request\n{{{REQUEST_INPUT}}}")


def _one_task(ensemble: Ensemble, task: Task[Any]) -> Ensemble:
    return dataclasses.replace(
        ensemble,
        tasks=(task,),
        phases=(),
        loops=(),
        graph=None,
        shared_tasks={},
        shared_tools={},
    )


async def _run_task(
    runners: _Runners, request: WorkRequest, transport: Transport | None
) -> tuple[ResponseStatus, str]:
    text = request.context or ""
    runner = runners.with_request if text else runners.without
    forwarder = EventForwarder(transport, request.request_id) if transport else None
    options = RunOptions(
        run_id=request.request_id,
        timeout=request.seconds_left(),
        listeners=(forwarder,) if forwarder else (),
    )
    async with forwarder.running() if forwarder else contextlib.nullcontext():
        output = await runner.arun({REQUEST_INPUT: text}, options)
    if output.exit_reason is ExitReason.COMPLETED:
        return ResponseStatus.COMPLETED, output.raw
    if output.exit_reason is ExitReason.TIMEOUT:
        return ResponseStatus.FAILED, _deadline_passed(request)
    return ResponseStatus.FAILED, f"The run stopped early: {output.exit_reason}"


async def _call_tool(tool: Tool, request: WorkRequest) -> tuple[ResponseStatus, str]:
    arguments = request.context or "{}"
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"The context of request '{request.request_id}' is not valid JSON for tool "
            f"'{request.task}': {error}"
        ) from None
    if not isinstance(parsed, dict):
        raise ValueError(
            f"The context of request '{request.request_id}' must be a JSON object of "
            f"arguments for tool '{request.task}', got: {arguments[:200]}"
        )
    try:
        async with asyncio.timeout(request.seconds_left()):
            result = await tool.invoke(arguments)
    except TimeoutError:
        return ResponseStatus.FAILED, _deadline_passed(request)
    if result.is_success:
        return ResponseStatus.COMPLETED, result.output
    return ResponseStatus.FAILED, result.text_for_model


def _deadline_passed(request: WorkRequest) -> str:
    return f"The deadline of request '{request.request_id}' ({request.deadline}) passed"
