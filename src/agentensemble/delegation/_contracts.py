"""Delegation contracts: what one agent asks of another, what comes back, and the policies
that may stop or rewrite a request (BEHAVIOUR 9.3-9.5).

These are values: the delegation tools build a `DelegationRequest` for every attempt and a
`DelegationResponse` for its outcome (guard-blocked attempts included, as FAILURE), and
pass each request through the policies in order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
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
    import uuid  # on first use: keeps `import agentensemble` light

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
    """A hint for policies and observers."""
    scope: Mapping[str, Any] = field(default_factory=dict)
    """Bounded context for the worker: shown to it as a ``## Scope`` prompt section."""
    expected_output_schema: str | None = None
    """What the worker's answer should look like: its expected output, when set."""
    max_output_retries: int = 0
    """Carried for policies and observers (a free-form subtask has no output type to
    retry parsing against)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything policies and observers should see."""

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
        schema = self.expected_output_schema
        if schema is not None and not isinstance(schema, str):
            raise ValidationError(
                f"DelegationRequest expected_output_schema must be a string, got: {schema!r}"
            )
        for name in ("scope", "metadata"):
            if not isinstance(getattr(self, name), Mapping):
                raise ValidationError(
                    f"DelegationRequest {name} must be a mapping, got: {getattr(self, name)!r}"
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
        """Stop it: the delegating agent is told ``Delegation rejected by policy: {reason}``
        (the reason must say something: the model reads it)."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError(
                f"DelegationPolicyResult.reject needs a reason the model can read, got: {reason!r}"
            )
        return cls("reject", reason=reason)

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
    [DelegationRequest, DelegationPolicyContext],
    DelegationPolicyResult | Awaitable[DelegationPolicyResult],
]
"""A check run before every delegation, after the built-in guards; sync (run in a thread)
or async."""
