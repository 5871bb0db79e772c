"""`Phase`: a named group of tasks that runs after the phases it depends on."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agentensemble._checks import items_of, require_text
from agentensemble.enums import Workflow
from agentensemble.errors import ValidationError
from agentensemble.task import Task

__all__ = ["Phase"]


@dataclass(frozen=True, slots=True, init=False, eq=False)
class Phase:
    """A named workstream. Phases with no `after` start together; a phase starts when every
    phase in its `after` has completed. Tasks may use outputs of earlier phases as context.
    """

    name: str
    tasks: tuple[Task[Any], ...]
    workflow: Workflow | None
    """How the phase runs its tasks; the ensemble's workflow (else SEQUENTIAL) when None."""
    after: tuple[Phase, ...]
    """Phases that must complete before this one starts."""

    def __init__(
        self,
        name: str,
        tasks: Iterable[Task[Any]],
        *,
        workflow: Workflow | None = None,
        after: Iterable[Phase] = (),
    ) -> None:
        require_text(name, "Phase name must not be null or blank")
        checked: tuple[Task[Any], ...] = items_of(tasks, Task, f"Phase '{name}' tasks")
        if not checked:
            raise ValidationError(f"Phase '{name}' must contain at least one task")
        if workflow is Workflow.HIERARCHICAL:
            raise ValidationError(hierarchical_phase_message(name))
        predecessors = items_of(after, Phase, f"Phase '{name}' after")
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "tasks", checked)
        set_(self, "workflow", workflow)
        set_(self, "after", predecessors)

    @classmethod
    def of(cls, name: str, *tasks: Task[Any]) -> Phase:
        """A phase of `tasks` with no predecessors."""
        return cls(name, tasks)

    def __repr__(self) -> str:
        return f"Phase({self.name!r}, {len(self.tasks)} tasks)"

    def copy(self, **changes: Any) -> Phase:
        """A new, validated phase with `changes` applied."""
        import dataclasses

        return dataclasses.replace(self, **changes)


def hierarchical_phase_message(name: str) -> str:
    """The error for a phase that would run HIERARCHICAL."""
    return (
        f"Phase '{name}': Workflow.HIERARCHICAL is not supported at the phase level. Use "
        "HIERARCHICAL at the ensemble level (without phases) for hierarchical delegation."
    )
