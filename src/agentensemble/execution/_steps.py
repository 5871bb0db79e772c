"""A task is an ordered list of steps over one `TaskState` (BEHAVIOUR 6.1).

The order a capability's step takes: input guardrails, before-review, memory retrieval,
prompts, the agent loop (or the handler), structured parsing, output guardrails,
after-review, memory storage. Each capability contributes its steps from its own module
through `task_steps` (in planning); the runner (`run_task`) only runs them in order.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from agentensemble.execution._prompts import PromptSection, build_user_prompt, system_prompt

if TYPE_CHECKING:
    from agentensemble._control import ControlFlowSignal
    from agentensemble.execution._context import TaskContext
    from agentensemble.execution._recorder import TaskRecorder

__all__ = ["TaskState", "TaskStep", "build_prompts"]


@dataclass(slots=True)
class TaskState:
    """What one task execution has produced so far; the steps read and extend it."""

    task: TaskContext
    recorder: TaskRecorder
    prompt_sections: tuple[PromptSection, ...] = ()
    """Sections capabilities added to the user prompt (memory, review feedback...), with
    `add_prompt_section` (a tuple: most tasks add none, and an empty list per running task
    is one more object for the garbage collector to walk)."""
    system_prompt: str = ""
    """The system prompt (set by the prompt step)."""
    user_prompt: str | None = None
    """The user prompt (None until the prompt step ran). The two texts, not a
    `PromptTrace`: one object less per running task."""
    raw: str = ""
    """The answer text (the agent's final answer, or the handler's output)."""
    parsed: Any = None
    """The structured result, when there is one."""
    stop: ControlFlowSignal | None = None
    """Set by a step that lets the task complete and then ends the run (a reviewer's exit
    after the task's output)."""
    late_failure: Exception | None = None
    """Set by a step that failed once the output was final (storing it in memory): the task
    completes, its output is kept, then the failure is raised."""

    def add_prompt_section(self, section: PromptSection) -> None:
        """Add a section to the user prompt (a step that runs before `build_prompts`)."""
        self.prompt_sections = (*self.prompt_sections, section)


TaskStep: TypeAlias = Callable[[TaskState], Awaitable[None]]
"""One step of a task: reads and extends the state, or raises to fail the task."""


async def build_prompts(state: TaskState) -> None:
    """The system and user prompts, recorded and announced (``on_task_input``)."""
    started = time.perf_counter()
    task, planned = state.task, state.task.planned
    if planned.agent is None:  # planning gives every agent-path task an agent
        raise AssertionError("prompt step on a task without an agent")
    state.system_prompt = system_prompt(planned.agent)
    state.user_prompt = build_user_prompt(
        planned.description,
        planned.expected_output,
        task.context_outputs,
        state.prompt_sections,
        context_format=task.run.context_format,
    )
    tool_names = tuple(spec.name for spec in planned.tools.specs) if planned.tools else ()
    await state.recorder.prompts_ready(
        state.system_prompt, state.user_prompt, time.perf_counter() - started, tool_names
    )
