"""Run-time validation of an ensemble, in the reference implementation's order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentensemble.enums import Workflow
from agentensemble.errors import ValidationError
from agentensemble.models import ChatModel
from agentensemble.task import Task

__all__ = ["check_inputs", "validate_tasks"]


def check_inputs(inputs: object, field: str) -> dict[str, str]:
    """Template inputs must be a mapping of names to strings."""
    if inputs is None:
        return {}
    if not isinstance(inputs, Mapping):
        raise ValidationError(f"{field} must be a mapping of names to strings, got: {inputs!r}")
    for key, value in inputs.items():
        if not isinstance(key, str):
            raise ValidationError(f"{field} key must be a string, got: {key!r}")
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"{field}['{key}'] must be a string, got: {value!r}")
    return dict(inputs)


def validate_tasks(
    tasks: Sequence[object], *, workflow: Workflow, llm: ChatModel | None
) -> tuple[Task, ...]:
    """Check a flat task list; return it typed. Raises `ValidationError` on the first problem."""
    checked = _check_elements(tasks)
    if not checked:
        raise ValidationError("Ensemble must have at least one task or phase with tasks")
    for task in checked:
        if task.agent is None and task.llm is None and llm is None:
            raise ValidationError(
                f"Task '{task.description}' has no LLM available. Provide an explicit agent, "
                "a task-level llm, an ensemble-level llm, or configure a deterministic handler."
            )
    check_context_cycles(checked)
    if workflow is Workflow.SEQUENTIAL:
        _check_context_order(checked)
    return checked


def _check_elements(tasks: Sequence[object]) -> tuple[Task, ...]:
    for index, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise ValidationError(
                f"Ensemble tasks[{index}] must be a Task, got: {type(task).__name__}"
            )
    return tuple(task for task in tasks if isinstance(task, Task))


def check_context_cycles(tasks: Sequence[Task]) -> None:
    """Iterative depth-first search over tasks and their context tasks."""
    done: set[Task] = set()
    for root in tasks:
        if root in done:
            continue
        on_path = {root}
        stack = [(root, iter(root.context))]
        while stack:
            task, pending = stack[-1]
            dependency = next(pending, None)
            if dependency is None:
                stack.pop()
                on_path.discard(task)
                done.add(task)
            elif dependency in on_path:
                raise ValidationError(
                    "Circular context dependency detected involving task: "
                    f"'{dependency.description}'"
                )
            elif dependency not in done:
                on_path.add(dependency)
                stack.append((dependency, iter(dependency.context)))


def _check_context_order(tasks: Sequence[Task]) -> None:
    position = {task: index for index, task in enumerate(tasks)}
    for index, task in enumerate(tasks):
        for dependency in task.context:
            where = position.get(dependency)
            if where is None:
                raise ValidationError(
                    f"Task '{task.description}' references context task "
                    f"'{dependency.description}' which is not in the ensemble's task list. "
                    "All context tasks must be included in the ensemble before they can be "
                    "referenced."
                )
            if where > index:
                raise ValidationError(
                    f"Task '{task.description}' references context task "
                    f"'{dependency.description}' which appears later in the task list. "
                    "Context tasks must be executed before the tasks that reference them."
                )
