"""Delegation: the request and response of every attempt, policies, hierarchical
constraints, the manager's prompt strategy and the delegation tools (BEHAVIOUR 3.5-3.6,
9.3-9.5). The engine that runs a delegation lives in the execution layer."""

from agentensemble.delegation._constraints import HierarchicalConstraints
from agentensemble.delegation._contracts import (
    DelegationPolicy,
    DelegationPolicyContext,
    DelegationPolicyResult,
    DelegationPriority,
    DelegationRequest,
    DelegationResponse,
    DelegationStatus,
)
from agentensemble.delegation._manager import (
    DefaultManagerPromptStrategy,
    ManagerPromptContext,
    ManagerPromptStrategy,
)

__all__ = [
    "DefaultManagerPromptStrategy",
    "DelegationPolicy",
    "DelegationPolicyContext",
    "DelegationPolicyResult",
    "DelegationPriority",
    "DelegationRequest",
    "DelegationResponse",
    "DelegationStatus",
    "HierarchicalConstraints",
    "ManagerPromptContext",
    "ManagerPromptStrategy",
]
