"""Running one delegation: guards, policies, the worker as a nested task, and the outcome.

A run whose agents may delegate (or a hierarchical run) has one `Team` in its context: the
workers by role, the policies and the depth limit. A task whose agent may delegate gets a
`Delegator` in its `ToolContext`, bound to the task: the ``delegate`` / ``delegate_task``
tools (and any tool that calls `ToolContext.delegate`) go through it. Every attempt builds a
`DelegationRequest` and ends in a `DelegationResponse`; the task's recorder turns both into
events and trace entries (BEHAVIOUR 9.3-9.5).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agentensemble._calling import call_user_code
from agentensemble._control import ControlFlowSignal
from agentensemble._formats import format_value
from agentensemble.agent import Agent
from agentensemble.delegation import (
    DelegationPolicy,
    DelegationPolicyContext,
    DelegationPolicyResult,
    DelegationRequest,
    DelegationResponse,
    DelegationStatus,
    HierarchicalConstraints,
)
from agentensemble.delegation._constraints import ConstraintEnforcer, canonical_role
from agentensemble.errors import ToolConfigurationError, describe_error
from agentensemble.execution._context import TaskContext
from agentensemble.execution._planning import DelegationMode, PlannedTask, plan_worker
from agentensemble.execution._prompts import PromptSection, PromptSlot
from agentensemble.execution._steps import TaskState, TaskStep
from agentensemble.execution._task_runner import run_task
from agentensemble.models import RateLimiter
from agentensemble.tools._context import Delegator

if TYPE_CHECKING:
    from agentensemble.outputs import TaskOutput

__all__ = ["Team", "Worker"]

_BLANK_HINTS = {
    "agent_role": " Provide the target agent's role.",
    "task_description": " Provide a clear subtask description.",
}
"""What a peer is told after a blank argument's message (the manager gets no hint)."""

_EXPECTED_OUTPUT: dict[DelegationMode, str] = {
    "manager": "Complete the assigned task thoroughly",
    "peer": "Complete the assigned subtask thoroughly",
}


@dataclass(frozen=True, slots=True)
class Worker:
    """An agent of the run that can be delegated to, with the rate-limit bucket its model
    calls take in this run."""

    agent: Agent
    limiter: RateLimiter | None


class Team:
    """The run's delegation roster and rules, shared by every task of the run."""

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        policies: Sequence[DelegationPolicy] = (),
        max_depth: int = 3,
        constraints: HierarchicalConstraints | None = None,
    ) -> None:
        self.workers = tuple(workers)
        self.roles = tuple(worker.agent.role for worker in self.workers)
        """Every worker's role, as declared, in order of first appearance."""
        self._by_role: dict[str, Worker] = {}
        for worker in self.workers:
            self._by_role.setdefault(canonical_role(worker.agent.role), worker)
        self.policies = tuple(policies)
        self.max_depth = max_depth
        self.enforcer = ConstraintEnforcer(constraints, self.roles) if constraints else None
        """The run's constraint bookkeeping (hierarchical runs with constraints)."""

    @classmethod
    def of(
        cls,
        plan: Sequence[PlannedTask],
        extra_agents: Sequence[Agent] = (),
        *,
        policies: Sequence[DelegationPolicy],
        max_depth: int,
        constraints: HierarchicalConstraints | None,
    ) -> Team:
        """The team of a planned run: each distinct agent of the tasks once, in order of
        first use (with the run's bucket of its first task), then the extra agents."""
        seen: dict[int, Worker] = {}
        for planned in plan:
            if planned.agent is not None and id(planned.agent) not in seen:
                seen[id(planned.agent)] = Worker(planned.agent, planned.limiter)
        for agent in extra_agents:
            seen.setdefault(id(agent), Worker(agent, None))
        return cls(
            list(seen.values()), policies=policies, max_depth=max_depth, constraints=constraints
        )

    def find(self, role: str) -> Worker | None:
        """The worker with `role`, compared trimmed and case-insensitively."""
        return self._by_role.get(canonical_role(role))

    def delegator(self, state: TaskState, mode: DelegationMode) -> Delegator:
        """What the task's `ToolContext.delegate` calls."""
        return functools.partial(_delegate, self, state, mode)


async def _delegate(
    team: Team,
    state: TaskState,
    mode: DelegationMode,
    agent_role: str,
    task_description: str,
    tool_call_id: str | None,
) -> DelegationResponse:
    request = DelegationRequest(agent_role=agent_role, task_description=task_description)
    return await _Attempt(team, state, mode, request, tool_call_id).run()


class _Attempt:
    """One delegation attempt, from the model's arguments to the response."""

    def __init__(
        self,
        team: Team,
        state: TaskState,
        mode: DelegationMode,
        request: DelegationRequest,
        tool_call_id: str | None,
    ) -> None:
        self.team = team
        self.caller: TaskContext = state.task
        self.recorder = state.recorder
        self.mode = mode
        self.request = request
        self.delegation_id = request.task_id
        """Correlates the attempt's events; the worker's task id too."""
        self.tool_call_id = tool_call_id
        self.started = time.perf_counter()

    @property
    def caller_role(self) -> str:
        return self.caller.planned.role

    async def run(self) -> DelegationResponse:
        refusal = self._guard()
        if refusal is None:
            refusal = await self._apply_policies()
        if refusal is not None:
            return await self._refused(refusal)
        worker = self.team.find(self.request.agent_role)
        if worker is None:  # the guards and the policy checks found one
            raise AssertionError("approved delegation without a worker")
        return await self._run_worker(worker)

    # ---- the built-in guards (BEHAVIOUR 9.3 for the manager, 9.5 for peers) -----------------

    def _guard(self) -> str | None:
        request, peer = self.request, self.mode == "peer"
        if not request.agent_role.strip():
            return self._blank("agent_role")
        if not request.task_description.strip():
            return self._blank("task_description")
        if peer and self.caller.depth >= self.team.max_depth:
            return (
                f"Delegation depth limit reached (max: {self.team.max_depth}, current: "
                f"{self.caller.depth}). Complete this task yourself without further delegation."
            )
        if peer and self._is_caller(request.agent_role):
            return (
                f"Cannot delegate to yourself (role: '{self.caller_role}'). Choose a different "
                "agent."
            )
        if self.team.find(request.agent_role) is None:
            lead = "Agent not found with role" if peer else "No agent found with role"
            return f"{lead} '{request.agent_role}'. Available roles: {self._roles()}"
        return None

    def _blank(self, field_name: str) -> str:
        hint = _BLANK_HINTS[field_name] if self.mode == "peer" else ""
        return f"Error: {field_name} must not be null or blank.{hint}"

    def _is_caller(self, role: str) -> bool:
        return canonical_role(role) == canonical_role(self.caller_role)

    def _roles(self) -> str:
        return f"[{', '.join(self.team.roles)}]"

    # ---- policies ------------------------------------------------------------------------------

    async def _apply_policies(self) -> str | None:
        """The constraints first (the manager's), then each policy in order: a reject ends
        the attempt, a modify replaces the request and goes on. A request rewritten to
        another worker must pass the constraints too; the approved worker's attempt is
        counted once every check has passed."""
        enforcer = self.team.enforcer if self.mode == "manager" else None
        if enforcer is not None:
            reason = enforcer.refusal(self.request.agent_role)
            if reason is not None:
                return f"Delegation rejected by policy: {reason}"
        original = self.request
        context = DelegationPolicyContext(
            delegating_agent_role=self.caller_role,
            current_depth=self.caller.depth,
            max_depth=self.team.max_depth,
            available_worker_roles=self.team.roles,
        )
        for policy in self.team.policies:
            result = await _verdict(policy, self.request, context)
            if result.action == "reject":
                return f"Delegation rejected by policy: {result.reason}"
            if result.request is not None:
                self.request = result.request.with_changes(task_id=self.delegation_id)
        refusal = None if self.request is original else self._check_modified()
        if refusal is None and enforcer is not None:
            # checked again and counted with no await in between: concurrent delegations
            # cannot both take the last place under a cap, and a rewrite is checked too
            reason = enforcer.refusal(self.request.agent_role)
            if reason is not None:
                return f"Delegation rejected by policy: {reason}"
            enforcer.approve(self.request.agent_role)
        return refusal

    def _check_modified(self) -> str | None:
        role = self.request.agent_role
        if self.team.find(role) is None:
            return (
                f"A policy modified agent_role to '{role}' but no agent found with that role. "
                f"Available roles: {self._roles()}"
            )
        if self.mode == "peer" and self._is_caller(role):
            return (
                f"A policy modified agent_role to '{role}' which results in self-delegation. "
                "Choose a different target."
            )
        if not self.request.task_description.strip():
            return self._blank("task_description")
        return None

    # ---- outcomes --------------------------------------------------------------------------------

    def _seconds(self) -> float:
        return time.perf_counter() - self.started

    def _response(
        self, status: DelegationStatus, worker_role: str, **fields: Any
    ) -> DelegationResponse:
        return DelegationResponse(
            task_id=self.request.task_id,
            status=status,
            worker_role=worker_role,
            duration=timedelta(seconds=self._seconds()),
            **fields,
        )

    async def _refused(self, reason: str) -> DelegationResponse:
        response = self._response(
            DelegationStatus.FAILURE, self.request.agent_role, errors=(reason,)
        )
        await self.recorder.delegation_failed(self.delegation_id, self.request, response, None)
        return response

    async def _run_worker(self, worker: Worker) -> DelegationResponse:
        caller, request = self.caller, self.request
        planned = plan_worker(
            worker.agent,
            request.task_description,
            request.expected_output_schema or _EXPECTED_OUTPUT[self.mode],
            caller.planned,
            limiter=worker.limiter,
            first_steps=(_scope_step(request.scope),) if request.scope else (),
        )
        task = TaskContext(
            run=caller.run,
            planned=planned,
            task_id=self.delegation_id,
            parent_task_id=caller.task_id,
            depth=caller.depth + 1,
            caller_deadlines=caller.deadlines,
        )
        await self.recorder.delegation_started(
            self.delegation_id, request, worker.agent.role, task.depth, self.tool_call_id
        )
        try:
            output = await run_task(task)
        except Exception as error:
            if _is_configuration_error(error):
                raise
            return await self._worker_failed(worker, error)
        except (asyncio.CancelledError, ControlFlowSignal) as error:  # the run is ending
            await self._worker_failed(worker, error)
            raise
        self._record(planned, output, worker)
        response = self._response(
            DelegationStatus.SUCCESS,
            worker.agent.role,
            raw_output=output.raw,
            parsed_output=output.parsed_output,
        )
        await self.recorder.delegation_completed(self.delegation_id, response)
        return response

    def _record(self, planned: PlannedTask, output: TaskOutput[Any], worker: Worker) -> None:
        """A manager's workers are outputs of the run; a peer's worker is part of its caller's
        task (its model calls count in the run's totals all the same)."""
        if self.mode == "manager":
            self.caller.run.outputs.record(planned.source, output, self.delegation_id)
        if self.team.enforcer is not None and self.mode == "manager":
            self.team.enforcer.record_completed(worker.agent.role)

    async def _worker_failed(self, worker: Worker, error: BaseException) -> DelegationResponse:
        message = f"Error: Delegation to '{worker.agent.role}' failed: {describe_error(error)}"
        response = self._response(DelegationStatus.FAILURE, worker.agent.role, errors=(message,))
        await self.recorder.delegation_failed(self.delegation_id, self.request, response, error)
        return response


def _scope_step(scope: Mapping[str, Any]) -> TaskStep:
    """A step giving the worker the request's scope as a ``## Scope`` prompt section."""

    async def add_scope(state: TaskState) -> None:
        text = format_value(dict(scope), state.task.run.context_format)
        state.add_prompt_section(PromptSection(PromptSlot.CONTEXT, f"## Scope\n{text}\n\n"))

    return add_scope


async def _verdict(
    policy: DelegationPolicy, request: DelegationRequest, context: DelegationPolicyContext
) -> DelegationPolicyResult:
    """A policy's result; anything but a `DelegationPolicyResult` (or an exception) is a
    configuration error that stops the run."""
    name = getattr(policy, "__qualname__", None) or repr(policy)
    try:
        result = await call_user_code(policy, request, context)
    except Exception as error:
        raise ToolConfigurationError(
            f"Delegation policy {name} raised: {describe_error(error)}"
        ) from error
    if (
        not isinstance(result, DelegationPolicyResult)
        or result.action not in _ACTIONS[result.request is not None]
    ):
        raise ToolConfigurationError(
            f"Delegation policy {name} returned {result!r}; a policy must return "
            "DelegationPolicyResult.allow(), .reject(reason) or .modify(request)"
        )
    return result


_ACTIONS = {False: ("allow", "reject"), True: ("modify",)}
"""The actions a verdict may carry, by whether it carries a request."""


def _is_configuration_error(error: BaseException | None) -> bool:
    """Whether `error`, or what caused it, is a configuration error (which stops the run
    at every depth instead of being reported to the delegating model)."""
    while error is not None:
        if isinstance(error, ToolConfigurationError):
            return True
        error = error.__cause__
    return False
