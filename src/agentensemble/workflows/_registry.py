"""Every workflow a run can be planned with, by name.

Each workflow defines its `WorkflowSpec` beside its executor; this table only lists them.
It is filled once, when the module is defined, and cannot be changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from agentensemble.workflows._executor import WorkflowSpec
from agentensemble.workflows._graph import GRAPH
from agentensemble.workflows._hierarchical import HIERARCHICAL
from agentensemble.workflows._parallel import PARALLEL
from agentensemble.workflows._phases import PHASES
from agentensemble.workflows._sequential import SEQUENTIAL

__all__ = ["GRAPH", "PHASES", "WORKFLOWS", "workflow_spec"]

WORKFLOWS: Mapping[str, WorkflowSpec] = MappingProxyType(
    {spec.name: spec for spec in (SEQUENTIAL, PARALLEL, HIERARCHICAL, PHASES, GRAPH)}
)
"""The registered workflows by name (a `Workflow` member looks its own up)."""


def workflow_spec(name: str) -> WorkflowSpec:
    """The registered workflow called `name`."""
    spec = WORKFLOWS.get(name)
    if spec is None:  # names come from validated ensembles: a missing one is a bug
        raise LookupError(f"no workflow is registered as {name!r}: {sorted(WORKFLOWS)}")
    return spec
