"""Delegation values and the HierarchicalConstraints cross-validation table (the spec's
domain model; BEHAVIOUR 9.4, 9.5)."""

from __future__ import annotations

from typing import Any

import pytest

from agentensemble import ValidationError
from agentensemble.delegation import (
    DelegationPolicyResult,
    DelegationPriority,
    DelegationRequest,
    HierarchicalConstraints,
)
from agentensemble.errors import ConstraintViolationError

ROLES = ["Researcher", "Writer", "Reviewer"]


def test_a_request_gets_its_own_id_and_defaults() -> None:
    first = DelegationRequest(agent_role="Writer", task_description="Draft it")
    second = DelegationRequest(agent_role="Writer", task_description="Draft it")
    assert first.task_id != second.task_id
    assert len(first.task_id) == 36
    assert first.priority is DelegationPriority.NORMAL
    assert first.max_output_retries == 0
    assert (first.scope, first.metadata, first.expected_output_schema) == ({}, {}, None)


def test_a_modified_request_keeps_its_id() -> None:
    request = DelegationRequest(agent_role="Writer", task_description="Draft it")
    changed = request.with_changes(agent_role="Reviewer")
    assert changed.task_id == request.task_id
    assert changed.agent_role == "Reviewer"
    assert request.agent_role == "Writer"


def test_policy_results() -> None:
    request = DelegationRequest(agent_role="Writer", task_description="Draft it")
    assert DelegationPolicyResult.allow().action == "allow"
    rejected = DelegationPolicyResult.reject("too busy")
    assert (rejected.action, rejected.reason) == ("reject", "too busy")
    modified = DelegationPolicyResult.modify(request)
    assert (modified.action, modified.request) == ("modify", request)
    with pytest.raises(ValidationError, match="modify needs a DelegationRequest"):
        DelegationPolicyResult.modify("Writer")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_output_retries": -1}, "DelegationRequest max_output_retries must be >= 0, got: -1"),
        ({"priority": "HIGH"}, "DelegationRequest priority must be a DelegationPriority"),
        ({"agent_role": None}, "DelegationRequest agent_role must be a string, got: None"),
    ],
)
def test_bad_requests_are_rejected(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"agent_role": "Writer", "task_description": "Draft it", **changes}
    with pytest.raises(ValidationError) as raised:
        DelegationRequest(**fields)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        (
            {"allowed_workers": {"Editor"}},
            "HierarchicalConstraints.allowed_workers references unknown agent: 'Editor'",
        ),
        (
            {"allowed_workers": {"Writer"}, "required_workers": {"Researcher"}},
            "HierarchicalConstraints.required_workers contains 'Researcher' which is not in "
            "allowed_workers",
        ),
        (
            {"required_workers": {"Editor"}},
            "HierarchicalConstraints.required_workers references unknown agent: 'Editor'",
        ),
        (
            {"max_calls_per_worker": {"Editor": 2}},
            "HierarchicalConstraints.max_calls_per_worker references unknown agent: 'Editor'",
        ),
        (
            {"required_stages": [["Researcher"], ["Editor"]]},
            "HierarchicalConstraints.required_stages references unknown agent: 'Editor'",
        ),
        (
            {"required_stages": [["Researcher", "Writer"], ["Writer"]]},
            "HierarchicalConstraints.required_stages contains duplicate agent role 'Writer' in "
            "multiple stages",
        ),
    ],
)
def test_cross_validation_against_the_ensembles_roles(
    constraints: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        HierarchicalConstraints(**constraints).check_roles(ROLES)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        (
            {"max_calls_per_worker": {"Writer": 0}},
            "HierarchicalConstraints.max_calls_per_worker value for 'Writer' must be > 0, got: 0",
        ),
        (
            {"global_max_delegations": -1},
            "HierarchicalConstraints.global_max_delegations must be >= 0, got: -1",
        ),
        (
            {"required_workers": "Writer"},
            "HierarchicalConstraints.required_workers must be a collection of roles, got the "
            "string 'Writer'",
        ),
        (
            {"required_stages": ["Writer"]},
            "HierarchicalConstraints.required_stages[0] must be a list of roles, got: 'Writer'",
        ),
        (
            {"allowed_workers": {" "}},
            "HierarchicalConstraints.allowed_workers must hold non-blank role names, got: ' '",
        ),
    ],
)
def test_bad_values_are_rejected_when_built(constraints: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        HierarchicalConstraints(**constraints)
    assert str(raised.value) == message


def test_roles_match_trimmed_and_case_insensitively() -> None:
    constraints = HierarchicalConstraints(
        required_workers={"researcher"},
        allowed_workers={" Researcher ", "WRITER"},
        max_calls_per_worker={"writer": 2},
        required_stages=[["researcher"], ["Writer"]],
    )
    constraints.check_roles(ROLES)  # raises on any mismatch
    assert constraints.required_stages == (("researcher",), ("Writer",))
    assert constraints.max_calls_per_worker == {"writer": 2}


def test_constraint_violation_messages() -> None:
    one = ConstraintViolationError(
        ["Required worker 'Writer' was not delegated to during this run."]
    )
    assert str(one) == (
        "Hierarchical constraint violated: Required worker 'Writer' was not delegated to during "
        "this run."
    )
    two = ConstraintViolationError(["a", "b"])
    assert str(two) == "Hierarchical constraints violated (2): a; b"
    assert two.violations == ("a", "b")
    with pytest.raises(ValueError, match="violations must not be null or empty"):
        ConstraintViolationError([])


@pytest.mark.parametrize("reason", [None, "", "   ", 42])
def test_a_rejection_needs_a_reason_the_model_can_read(reason: object) -> None:
    with pytest.raises(ValidationError, match=r"DelegationPolicyResult\.reject needs a reason"):
        DelegationPolicyResult.reject(reason)  # type: ignore[arg-type]
