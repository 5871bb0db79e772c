"""Delegation contracts: what one agent asks of another, what comes back, the policies that
may stop or rewrite a request, and the constraints on a hierarchical team (BEHAVIOUR 9.3-9.5).

These are values: the delegation tools build a `DelegationRequest` for every attempt and a
`DelegationResponse` for its outcome (guard-blocked attempts included, as FAILURE), and
pass each request through the policies in order.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeAlias

from agentensemble._checks import require_int
from agentensemble.errors import ValidationError

__all__ = [
    "DelegationPolicy",
    "DelegationPolicyContext",
    "DelegationPolicyResult",
    "DelegationPriority",
    "DelegationRequest",
    "DelegationResponse",
    "DelegationStatus",
    "HierarchicalConstraints",
]


class DelegationPriority(StrEnum):
    """A hint of how urgent a delegated task is."""

    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"
    CRITICAL = "CRITICAL"


class DelegationStatus(StrEnum):
    """How a delegation ended."""

    SUCCESS = "SUCCESS"
    """The worker completed the task."""
    FAILURE = "FAILURE"
    """A guard or policy refused it, or the worker failed; ``errors`` says why."""
    PARTIAL = "PARTIAL"
    """The worker completed, but its output may be incomplete."""


def _new_task_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationRequest:
    """One delegation attempt, as the delegating agent asked for it."""

    agent_role: str
    """The role of the agent asked to do the work."""
    task_description: str
    """What the worker should do."""
    task_id: str = field(default_factory=_new_task_id)
    """Correlates the request with its `DelegationResponse` and events."""
    priority: DelegationPriority = DelegationPriority.NORMAL
    scope: Mapping[str, Any] = field(default_factory=dict)
    """Bounded context for the worker."""
    expected_output_schema: str | None = None
    max_output_retries: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything observers should see."""

    def __post_init__(self) -> None:
        for name in ("agent_role", "task_description", "task_id"):
            if not isinstance(getattr(self, name), str):
                raise ValidationError(
                    f"DelegationRequest {name} must be a string, got: {getattr(self, name)!r}"
                )
        if not isinstance(self.priority, DelegationPriority):
            raise ValidationError(
                f"DelegationRequest priority must be a DelegationPriority, got: {self.priority!r}"
            )
        require_int(self.max_output_retries, "DelegationRequest max_output_retries")
        if self.max_output_retries < 0:
            raise ValidationError(
                f"DelegationRequest max_output_retries must be >= 0, got: {self.max_output_retries}"
            )
        object.__setattr__(self, "scope", dict(self.scope))
        object.__setattr__(self, "metadata", dict(self.metadata))

    def with_changes(self, **changes: Any) -> DelegationRequest:
        """A copy with `changes` (what a policy returns from `DelegationPolicyResult.modify`);
        the `task_id` stays, so the attempt remains one correlated delegation."""
        from dataclasses import replace

        return replace(self, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationResponse:
    """The outcome of one delegation attempt."""

    task_id: str
    """The `DelegationRequest.task_id` this answers."""
    status: DelegationStatus
    worker_role: str
    raw_output: str | None = None
    """The worker's answer (None on failure)."""
    parsed_output: Any = None
    artifacts: Mapping[str, Any] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    """Why the attempt failed (empty on success)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    duration: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationPolicyContext:
    """What a policy knows about the attempt besides the request."""

    delegating_agent_role: str
    current_depth: int
    """0 for a task of the ensemble; one more per delegation."""
    max_depth: int
    available_worker_roles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DelegationPolicyResult:
    """A policy's verdict: `allow()`, `reject(reason)` or `modify(request)`."""

    action: str
    """``"allow"``, ``"reject"`` or ``"modify"``."""
    reason: str = ""
    request: DelegationRequest | None = None
    """The replacement request (``modify`` only)."""

    @classmethod
    def allow(cls) -> DelegationPolicyResult:
        """Let the delegation go on (to the next policy, then the worker)."""
        return _ALLOW

    @classmethod
    def reject(cls, reason: str) -> DelegationPolicyResult:
        """Stop it: the delegating agent is told ``Delegation rejected by policy: {reason}``."""
        return cls("reject", reason=str(reason))

    @classmethod
    def modify(cls, request: DelegationRequest) -> DelegationPolicyResult:
        """Replace the request (another worker, a narrower description...) and go on."""
        if not isinstance(request, DelegationRequest):
            raise ValidationError(
                f"DelegationPolicyResult.modify needs a DelegationRequest, got: {request!r}"
            )
        return cls("modify", request=request)


_ALLOW = DelegationPolicyResult("allow")

DelegationPolicy: TypeAlias = Callable[
    [DelegationRequest, DelegationPolicyContext], DelegationPolicyResult
]
"""A check run before every delegation, after the built-in guards."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HierarchicalConstraints:
    """Rules for the manager of a hierarchical team.

    - `required_workers` must each complete at least one delegation, or the run fails with
      `ConstraintViolationError` once the manager is done;
    - `allowed_workers`, when not empty, are the only workers the manager may use;
    - `max_calls_per_worker` and `global_max_delegations` (0: no cap) cap approved attempts;
    - `required_stages` orders workers: a worker in stage N waits until every worker of the
      earlier stages has completed.

    Roles are checked against the ensemble's agents when the run starts.
    """

    required_workers: Collection[str] = frozenset()
    """Kept as a frozenset."""
    allowed_workers: Collection[str] = frozenset()
    """Kept as a frozenset."""
    max_calls_per_worker: Mapping[str, int] = field(default_factory=dict)
    global_max_delegations: int = 0
    required_stages: Sequence[Sequence[str]] = ()
    """Kept as a tuple of tuples."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "required_workers", _roles(self.required_workers, "required_workers"))
        set_(self, "allowed_workers", _roles(self.allowed_workers, "allowed_workers"))
        if not isinstance(self.max_calls_per_worker, Mapping):
            raise ValidationError(
                "HierarchicalConstraints.max_calls_per_worker must be a mapping of role to "
                f"count, got: {self.max_calls_per_worker!r}"
            )
        caps = dict(self.max_calls_per_worker)
        for role, cap in caps.items():
            require_int(cap, f"HierarchicalConstraints.max_calls_per_worker value for '{role}'")
            if cap <= 0:
                raise ValidationError(
                    f"HierarchicalConstraints.max_calls_per_worker value for '{role}' must be "
                    f"> 0, got: {cap}"
                )
        set_(self, "max_calls_per_worker", caps)
        require_int(self.global_max_delegations, "HierarchicalConstraints.global_max_delegations")
        if self.global_max_delegations < 0:
            raise ValidationError(
                "HierarchicalConstraints.global_max_delegations must be >= 0, got: "
                f"{self.global_max_delegations}"
            )
        set_(self, "required_stages", _stages(self.required_stages))

    def check_roles(self, agent_roles: Collection[str]) -> None:
        """The cross-validation table of the spec, in order: every role named here must be
        one of `agent_roles` (matched trimmed and case-insensitively), required workers must
        be allowed when an allow-list is given, and no role may sit in two stages."""
        known = {role.strip().lower() for role in agent_roles}

        def require_known(roles: Iterable[str], name: str) -> None:
            for role in roles:
                if role.strip().lower() not in known:
                    raise ValidationError(
                        f"HierarchicalConstraints.{name} references unknown agent: '{role}'"
                    )

        require_known(sorted(self.allowed_workers), "allowed_workers")
        if self.allowed_workers:
            allowed = {role.strip().lower() for role in self.allowed_workers}
            for role in sorted(self.required_workers):
                if role.strip().lower() not in allowed:
                    raise ValidationError(
                        f"HierarchicalConstraints.required_workers contains '{role}' which is "
                        "not in allowed_workers"
                    )
        require_known(sorted(self.required_workers), "required_workers")
        require_known(self.max_calls_per_worker, "max_calls_per_worker")
        staged: set[str] = set()
        for stage in self.required_stages:
            require_known(stage, "required_stages")
            for role in stage:
                canonical = role.strip().lower()
                if canonical in staged:
                    raise ValidationError(
                        "HierarchicalConstraints.required_stages contains duplicate agent role "
                        f"'{role}' in multiple stages"
                    )
                staged.add(canonical)


def _roles(value: object, name: str) -> frozenset[str]:
    if isinstance(value, str):
        raise ValidationError(
            f"HierarchicalConstraints.{name} must be a collection of roles, got the string "
            f"{value!r}"
        )
    if not isinstance(value, Iterable):
        raise ValidationError(
            f"HierarchicalConstraints.{name} must be a collection of roles, got: {value!r}"
        )
    return frozenset(_role_names(value, name))


def _stages(value: object) -> tuple[tuple[str, ...], ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValidationError(
            "HierarchicalConstraints.required_stages must be a list of lists of roles, got: "
            f"{value!r}"
        )
    stages = []
    for index, stage in enumerate(value):
        if isinstance(stage, str) or not isinstance(stage, Iterable):
            raise ValidationError(
                f"HierarchicalConstraints.required_stages[{index}] must be a list of roles, "
                f"got: {stage!r}"
            )
        stages.append(_role_names(stage, f"required_stages[{index}]"))
    return tuple(stages)


def _role_names(roles: Iterable[object], name: str) -> tuple[str, ...]:
    checked = tuple(roles)
    for role in checked:
        if not isinstance(role, str) or not role.strip():
            raise ValidationError(
                f"HierarchicalConstraints.{name} must hold non-blank role names, got: {role!r}"
            )
    return checked  # type: ignore[return-value]  # every item was checked to be a str
