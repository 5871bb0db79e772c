"""Turn the user's tasks into an immutable run plan: resolved text, an agent and steps each.

The user's `Task` objects are never changed or copied into the plan's identity: every
`PlannedTask` keeps its `source`, and outputs are keyed by that source, so context lookups
and `EnsembleOutput.output_for(task)` work with the caller's own objects. Agent synthesis
may call a model (`LLMAgentSynthesizer`); those calls are metered into a `SynthesisLog` so
that the run's metrics and trace count them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agentensemble._frozen import direct_init, direct_new
from agentensemble.agent import Agent, synthesized_agent
from agentensemble.delegation._tools import DELEGATE
from agentensemble.errors import PromptTemplateError, ValidationError
from agentensemble.execution._agent_loop import run_agent_loop
from agentensemble.execution._context import RunContext
from agentensemble.execution._gates import after_review, before_review
from agentensemble.execution._guardrails import check_input, check_output
from agentensemble.execution._handler import DETERMINISTIC_ROLE, run_handler
from agentensemble.execution._memory import RunMemory, memory_steps
from agentensemble.execution._steps import TaskStep, build_prompts
from agentensemble.execution._structured_output import (
    add_output_format,
    check_handler_output,
    parse_structured_output,
    structured_settings,
)
from agentensemble.execution._synthesis import (
    AgentSynthesizer,
    TemplateAgentSynthesizer,
    template_persona,
)
from agentensemble.execution._templates import resolve_template, template_variables
from agentensemble.models import (
    ChatModel,
    ChatResponse,
    Message,
    ModelSettings,
    RateLimiter,
    ToolSpec,
    model_name_of,
)
from agentensemble.models._settings import merge_settings
from agentensemble.observability._metrics import UNKNOWN
from agentensemble.observability._trace import LlmInteraction
from agentensemble.review import Review, ReviewPolicy
from agentensemble.review._rules import after_gate, before_gate
from agentensemble.task import Task
from agentensemble.tools._resolve import ToolSet

__all__ = [
    "DelegationMode",
    "Node",
    "PlannedTask",
    "ReviewRules",
    "SynthesisLog",
    "fixed_texts",
    "has_template",
    "peer_tools",
    "plan_tasks",
    "plan_worker",
    "resolve_texts",
    "task_steps",
]

DelegationMode = Literal["manager", "peer"]
"""How a task delegates: as the hierarchical manager (``delegate_task``) or as a peer."""


@dataclass(frozen=True, slots=True)
class Node:
    """Where a task sits in a map-reduce tree (its start event says so, and its trace)."""

    node_type: str
    """``map``, ``reduce``, ``final-reduce`` or ``direct``."""
    level: int
    """0 for the map tasks (and a direct task), then one per reduce level."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PlannedTask:
    """One task as a run executes it."""

    source: Task[Any]
    """The caller's task object (the identity outputs are keyed by)."""
    index: int
    """1-based position in the run (numbered across phases)."""
    total: int
    """How many tasks the run has."""
    description: str
    """Description after template resolution."""
    expected_output: str
    """Expected output after template resolution."""
    agent: Agent | None
    """The agent that runs the task; None for a handler task."""
    settings: ModelSettings | None = None
    """Model request options: the agent's, overridden field by field by the task's."""
    steps: tuple[TaskStep, ...] = ()
    """What the task runs, in order."""
    tools: ToolSet | None = None
    """The tools offered to the model (the agent's, after the delegation tool when it may
    delegate); None for a handler task."""
    limiter: RateLimiter | None = None
    """The run's rate-limit bucket for the task's model calls, if the run owns one."""
    delegates: DelegationMode | None = None
    """Whether (and how) the task's agent may delegate."""
    before_start: tuple[TaskStep, ...] = ()
    """What runs before the task starts (a before-review gate), outside its events."""
    node: Node | None = None
    """Where the task sits in a map-reduce tree (None outside one)."""

    @property
    def role(self) -> str:
        return self.agent.role if self.agent else DETERMINISTIC_ROLE


@dataclass(frozen=True, slots=True)
class ReviewRules:
    """Which gates the tasks of one workflow get, in a run with a review handler."""

    policy: ReviewPolicy
    in_order: bool
    """The tasks run one after another (so the run's last task is reviewed last)."""

    def after(self, task: Task[Any], index: int, total: int) -> Review | None:
        return after_gate(task.review, self.policy, is_last=self.in_order and index == total)

    def before(self, task: Task[Any]) -> tuple[TaskStep, ...]:
        review = before_gate(task.before_review)
        return (before_review(review),) if review is not None else ()


def task_steps(
    task: Task[Any],
    agent: Agent | None,
    *,
    review: Review | None = None,
    memory: RunMemory | None = None,
) -> tuple[TaskStep, ...]:
    """The steps a task runs between its start and complete events (BEHAVIOUR 6.1 order);
    each capability adds its own here, and only to the tasks that use it. `review`: the
    gate after the task's output, if one fires; `memory`: the run's memory, if any."""
    if _agent_only(task, agent, review, memory):  # most tasks: no list to build and filter
        return _AGENT_STEPS
    typed = task.output_spec is not None
    recall, remember = memory_steps(memory, task)
    steps: list[TaskStep | None] = [check_input if task.input_guardrails else None]
    if agent is None:
        steps += [run_handler, check_handler_output if typed else None]
    else:
        steps += [
            *recall,
            add_output_format if typed else None,
            build_prompts,
            run_agent_loop,
            parse_structured_output if typed else None,
        ]
    steps += [
        check_output if task.output_guardrails else None,
        after_review(review) if review is not None else None,
        *remember,
    ]
    found = tuple(step for step in steps if step is not None)
    return _AGENT_STEPS if found == _AGENT_STEPS else found


_AGENT_STEPS: tuple[TaskStep, ...] = (build_prompts, run_agent_loop)
"""The steps of a task that uses no capability beyond its agent, shared by all such tasks:
one object less per planned task (10,000 of them in a 10,000-task fan-out)."""


def _agent_only(
    task: Task[Any], agent: Agent | None, review: Review | None, memory: RunMemory | None
) -> bool:
    """Whether the task uses no capability beyond its agent (its steps: `_AGENT_STEPS`)."""
    return (
        agent is not None
        and review is None
        and memory is None
        and task.output_spec is None
        and not task.input_guardrails
        and not task.output_guardrails
    )


def peer_tools(agent: Agent) -> ToolSet:
    """The agent's tools, after the ``delegate`` tool when it may delegate."""
    own = agent.tool_set
    if not agent.allow_delegation:
        return own
    return ToolSet((DELEGATE.spec, *own.specs), {DELEGATE.spec.name: DELEGATE, **own.by_name})


def plan_worker(
    agent: Agent,
    description: str,
    expected_output: str,
    caller: PlannedTask,
    *,
    limiter: RateLimiter | None,
    first_steps: tuple[TaskStep, ...] = (),
) -> PlannedTask:
    """A delegated task: `agent` working on `description`, numbered as its caller;
    `first_steps` run before the usual ones (a delegation's scope section, say)."""
    task = Task(description, expected_output, agent=agent)
    return PlannedTask(
        source=task,
        index=caller.index,
        total=caller.total,
        description=description,
        expected_output=expected_output,
        agent=agent,
        settings=agent.model_settings,
        steps=(*first_steps, *task_steps(task, agent)),
        tools=peer_tools(agent),
        limiter=limiter,
        delegates="peer" if agent.allow_delegation else None,
    )


def resolve_texts(tasks: Sequence[Task[Any]], inputs: Mapping[str, str]) -> list[tuple[str, str]]:
    """(description, expected_output) of each task with templates resolved.

    Raises `PromptTemplateError` naming every variable missing in any task (with the first
    template that misses one), and `ValidationError` for a text that resolves to blank.
    """
    _require_inputs(
        (text for task in tasks for text in (task.description, task.expected_output)), inputs
    )
    return [
        (
            _resolved(task.description, inputs, "description"),
            _resolved(task.expected_output, inputs, "expected_output"),
        )
        for task in tasks
    ]


_AGENT_TEXTS = ("role", "goal", "background")


def resolve_agents(agents: Iterable[Agent], inputs: Mapping[str, str]) -> dict[Agent, Agent]:
    """Each agent whose role, goal or background hold template variables, mapped to a copy
    with `inputs` filled in (the same model, tools and rate-limit bucket). Raises
    `PromptTemplateError` naming every variable missing."""
    templated = {agent: None for agent in agents if has_template(agent)}
    _require_inputs(
        (getattr(agent, name) or "" for agent in templated for name in _AGENT_TEXTS), inputs
    )
    return {agent: _filled_in(agent, inputs) for agent in templated}


def has_template(agent: Agent) -> bool:
    """Whether the agent's role, goal or background may hold a template variable."""
    return any("{" in (getattr(agent, name) or "") for name in _AGENT_TEXTS)


def fixed_texts(tasks: Sequence[Task[Any]]) -> dict[Task[Any], tuple[str, str]] | None:
    """Each task's (description, expected_output) when no text holds a brace: what every
    run resolves them to, whatever its inputs (None when one may hold a variable)."""
    texts = {}
    for task in tasks:
        if "{" in task.description or "{" in task.expected_output:
            return None
        texts[task] = (task.description, task.expected_output)
    return texts


def _require_inputs(templates: Iterable[str], inputs: Mapping[str, str]) -> None:
    """Raise `PromptTemplateError` naming every variable of `templates` missing from
    `inputs` (with the first template that misses one)."""
    missing: dict[str, None] = {}
    first_template = ""
    for template in templates:
        if "{" not in template:
            continue
        absent = [name for name in template_variables(template) if name not in inputs]
        if absent and not missing:
            first_template = template
        missing.update(dict.fromkeys(absent))
    if missing:
        raise PromptTemplateError(list(missing), first_template)


def _filled_in(agent: Agent, inputs: Mapping[str, str]) -> Agent:
    resolved = copy.copy(agent)
    for name in _AGENT_TEXTS:
        template = getattr(agent, name)
        if template is not None:
            object.__setattr__(resolved, name, resolve_template(template, inputs))
    object.__setattr__(resolved, "_system_prompt", None)  # the copy's texts differ
    return resolved


def _resolved(template: str, inputs: Mapping[str, str], field_name: str) -> str:
    text = resolve_template(template, inputs)
    if not text.strip():
        variables = ", ".join(template_variables(template))
        raise ValidationError(
            f"Task {field_name} '{template}' is blank once its template variables are filled "
            f"in: give [{variables}] non-blank values in the run's inputs"
        )
    return text


@dataclass(slots=True)
class SynthesisLog:
    """Model calls made while planning (LLM agent synthesis), for the run's trace (the run's
    `ensemble_completed` event carries them; the trace fold counts them in the totals)."""

    interactions: list[LlmInteraction] = field(default_factory=list)


async def plan_tasks(
    tasks: Sequence[Task[Any]],
    texts: Sequence[tuple[str, str]],
    *,
    llm: ChatModel | None,
    synthesizer: AgentSynthesizer,
    run: RunContext,
    synthesis: SynthesisLog,
    first_index: int = 1,
    total: int | None = None,
    review: ReviewRules | None = None,
    agents: Mapping[Agent, Agent] | None = None,
    nodes: Mapping[Task[Any], Node] | None = None,
) -> tuple[PlannedTask, ...]:
    """Give each task (templates already resolved) its agent, synthesising one where the
    task has none, and its steps. `llm` is the ensemble model; `review` the gates' rules
    (None: the run has no review handler); `agents` maps an agent with templates to its
    copy filled in (the run's own when not given); `nodes` places tasks in a map-reduce
    tree."""
    filled_in = run.agents if agents is None else agents
    planned = []
    count = total if total is not None else len(tasks)
    for index, (task, (description, expected)) in enumerate(
        zip(tasks, texts, strict=True), start=first_index
    ):
        agent = None
        if task.handler is None:
            agent = (
                filled_in.get(task.agent, task.agent)
                if task.agent
                else await _synthesize(task, description, llm, synthesizer, run, synthesis)
            )
        planned.append(
            direct_new(PlannedTask)(
                source=task,
                index=index,
                total=count,
                description=description,
                expected_output=expected,
                agent=agent,
                settings=structured_settings(
                    task, agent, merge_settings(agent.model_settings, task.model_settings)
                )
                if agent
                else None,
                steps=task_steps(
                    task,
                    agent,
                    review=review.after(task, index, count) if review else None,
                    memory=run.memory,
                ),
                tools=peer_tools(agent) if agent else None,
                limiter=run.limiters.for_task(task),
                delegates="peer" if agent and agent.allow_delegation else None,
                before_start=review.before(task) if review else (),
                node=nodes.get(task) if nodes else None,
            )
        )
    return tuple(planned)


async def _synthesize(
    task: Task[Any],
    description: str,
    ensemble_llm: ChatModel | None,
    synthesizer: AgentSynthesizer,
    run: RunContext,
    synthesis: SynthesisLog,
) -> Agent:
    llm = task.llm or ensemble_llm
    if llm is None:  # validation guarantees a model; kept for type narrowing
        raise AssertionError("validated task has no model")
    max_iterations = task.max_iterations or 25
    if type(synthesizer) is TemplateAgentSynthesizer:  # no model call to meter, no await
        persona = template_persona(description)
        return synthesized_agent(
            persona.role,
            persona.goal,
            persona.background,
            llm=llm,
            tools=task.tools,
            max_iterations=max_iterations,
        )
    metered = _MeteredModel(llm, run.limiters.for_task(task), synthesis)
    persona = await synthesizer.synthesize(description, metered)
    return Agent(
        persona.role,
        persona.goal,
        background=persona.background,
        llm=llm,
        tools=task.tools,
        max_iterations=max_iterations,
    )


class _MeteredModel:
    """The model as a synthesiser sees it: rate-limited by the run and recorded."""

    def __init__(self, model: ChatModel, limiter: RateLimiter | None, log: SynthesisLog) -> None:
        self.model = model
        self.model_name = model_name_of(model)
        self._limiter = limiter
        self._log = log

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        if self._limiter is not None:
            await self._limiter.acquire()
        started_at, started = datetime.now(UTC), time.perf_counter()
        response = await self.model.chat(messages, tools=tools, settings=settings)
        self._record(response, started_at, time.perf_counter() - started)
        return response

    def _record(self, response: ChatResponse, started_at: datetime, seconds: float) -> None:
        log, usage = self._log, response.usage
        log.interactions.append(
            LlmInteraction(
                iteration_index=len(log.interactions),
                started_at=started_at,
                completed_at=started_at + timedelta(seconds=seconds),
                latency=timedelta(seconds=seconds),
                input_tokens=UNKNOWN
                if usage is None or usage.input_tokens is None
                else usage.input_tokens,
                output_tokens=UNKNOWN
                if usage is None or usage.output_tokens is None
                else usage.output_tokens,
                response_type="FINAL_ANSWER",
                response_text=response.message.text,
            )
        )
