"""`HierarchicalConstraints` and the per-run enforcer that applies them (BEHAVIOUR 9.4)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agentensemble._checks import require_int
from agentensemble.errors import ValidationError

__all__ = ["ConstraintEnforcer", "HierarchicalConstraints", "canonical_role"]


def canonical_role(role: str) -> str:
    """How roles are compared: trimmed, case-insensitive."""
    return role.strip().lower()


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
        known = {canonical_role(role) for role in agent_roles}

        def require_known(roles: Iterable[str], name: str) -> None:
            for role in roles:
                if canonical_role(role) not in known:
                    raise ValidationError(
                        f"HierarchicalConstraints.{name} references unknown agent: '{role}'"
                    )

        require_known(sorted(self.allowed_workers), "allowed_workers")
        if self.allowed_workers:
            allowed = {canonical_role(role) for role in self.allowed_workers}
            for role in sorted(self.required_workers):
                if canonical_role(role) not in allowed:
                    raise ValidationError(
                        f"HierarchicalConstraints.required_workers contains '{role}' which is "
                        "not in allowed_workers"
                    )
        require_known(sorted(self.required_workers), "required_workers")
        require_known(self.max_calls_per_worker, "max_calls_per_worker")
        staged: set[str] = set()
        for stage in self.required_stages:
            require_known(stage, "required_stages")
            in_stage: dict[str, str] = {}
            for role in stage:  # a role repeated within one stage is harmless
                in_stage.setdefault(canonical_role(role), role)
            for canonical, role in in_stage.items():
                if canonical in staged:
                    raise ValidationError(
                        "HierarchicalConstraints.required_stages contains duplicate agent role "
                        f"'{role}' in multiple stages"
                    )
            staged.update(in_stage)


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
        roles = _role_names(stage, f"required_stages[{index}]")
        if not roles:
            raise ValidationError(
                f"HierarchicalConstraints.required_stages[{index}] must name at least one "
                f"role, got: {stage!r}"
            )
        stages.append(roles)
    return tuple(stages)


def _role_names(roles: Iterable[object], name: str) -> tuple[str, ...]:
    checked = tuple(roles)
    for role in checked:
        if not isinstance(role, str) or not role.strip():
            raise ValidationError(
                f"HierarchicalConstraints.{name} must hold non-blank role names, got: {role!r}"
            )
    return checked  # type: ignore[return-value]  # every item was checked to be a str


class ConstraintEnforcer:
    """One run's bookkeeping for `HierarchicalConstraints`, checked before the manager's
    delegation policies. Checks, in order: the allow-list, the global cap, the worker's cap,
    then the stages; an approved attempt counts against the caps whether or not its worker
    succeeds. Roles are compared canonically and shown as the agents spell them."""

    def __init__(self, constraints: HierarchicalConstraints, agent_roles: Iterable[str]) -> None:
        self.constraints = constraints
        self._spelling: dict[str, str] = {}
        for role in agent_roles:
            self._spelling.setdefault(canonical_role(role), role)
        self._allowed = frozenset(canonical_role(r) for r in constraints.allowed_workers)
        self._caps = {canonical_role(r): n for r, n in constraints.max_calls_per_worker.items()}
        self._stages = tuple(
            tuple(canonical_role(role) for role in stage) for stage in constraints.required_stages
        )
        self._stage_of = {role: index for index, stage in enumerate(self._stages) for role in stage}
        self._approved: Counter[str] = Counter()
        self._total = 0
        self._completed: set[str] = set()

    def _name(self, role: str) -> str:
        return self._spelling.get(canonical_role(role), role.strip())

    def refusal(self, role: str) -> str | None:
        """Why a delegation to `role` may not go ahead now (None: it may)."""
        role = canonical_role(role)
        name = self._name(role)
        if self._allowed and role not in self._allowed:
            allowed = ", ".join(sorted(self._name(r) for r in self._allowed))
            return f"Worker '{name}' is not in the allowed workers list. Allowed: [{allowed}]"
        cap = self.constraints.global_max_delegations
        if cap > 0 and self._total >= cap:
            return (
                f"global delegation cap of {cap} reached. No further delegations are permitted "
                "in this run."
            )
        own_cap = self._caps.get(role)
        if own_cap is not None and self._approved[role] >= own_cap:
            return f"Worker '{name}' has reached its per-worker delegation cap of {own_cap}."
        return self._stage_refusal(role, name)

    def _stage_refusal(self, role: str, name: str) -> str | None:
        for index, stage in enumerate(self._stages[: self._stage_of.get(role, 0)]):
            for earlier in stage:
                if earlier not in self._completed:
                    return (
                        f"Worker '{name}' cannot be delegated to yet: stage {index} worker "
                        f"'{self._name(earlier)}' has not yet completed. All workers in earlier "
                        "stages must complete before this stage can begin."
                    )
        return None

    def approve(self, role: str) -> None:
        """Count an approved attempt against the caps (whether or not its worker succeeds)."""
        self._approved[canonical_role(role)] += 1
        self._total += 1

    def record_completed(self, role: str) -> None:
        """A delegation to `role` completed (what stages and required workers count)."""
        self._completed.add(canonical_role(role))

    def violations(self) -> list[str]:
        """One message per required worker that never completed a delegation."""
        return [
            f"Required worker '{self._name(role)}' was not delegated to during this run."
            for role in sorted(self.constraints.required_workers, key=canonical_role)
            if canonical_role(role) not in self._completed
        ]
