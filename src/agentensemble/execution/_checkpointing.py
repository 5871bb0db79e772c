"""One run's checkpoint: each completed task recorded as it completes, and, when the run
resumes an earlier one, the recorded tasks handed back instead of being executed again.

A task's place in the run is its key: ``{index}#{n}`` for the n-th execution of the run's
task at `index` (a loop's body and a graph's states run more than once, in an order their
recorded outputs decide again), and ``worker:{role}:{digest of the request}#{n}`` for a
delegated worker (a re-run manager that asks again for the same work gets the recorded
answer). What is recorded is the task's `TaskCompleteEvent` with its trace; restoring it
emits the task's start and completion again, marked restored, so listeners, the trace and
the metrics see the same run an uninterrupted one gives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentensemble._calling import finish_even_if_cancelled
from agentensemble.checkpoints import CheckpointStore, SavedRun
from agentensemble.errors import CheckpointError, ValidationError, describe_error
from agentensemble.observability._events import TaskCompleteEvent
from agentensemble.observability._wire import parse_event, serialize_event
from agentensemble.outputs import TaskOutput, _adapter
from agentensemble.review import PendingReview, ReviewDecision, ReviewRequest, ReviewTiming
from agentensemble.review._model import Continue, Edit, ExitEarly

if TYPE_CHECKING:
    from agentensemble.execution._context import TaskContext
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.review._signals import RunPaused

__all__ = ["RunCheckpoint", "Slot", "plan_of", "resume_hint"]


@dataclass(frozen=True, slots=True)
class Slot:
    """A task execution's place in the checkpoint, and what was recorded there."""

    key: str
    recorded: TaskCompleteEvent | None


def plan_of(tasks: Sequence[PlannedTask]) -> list[list[Any]]:
    """The planned tasks as a checkpoint keeps them: index, description, agent role and
    the name of the output type (a restored output is read back into it)."""
    return [
        [planned.index, planned.description, planned.role, _type_name(planned)] for planned in tasks
    ]


def _type_name(planned: PlannedTask) -> str | None:
    output_type = planned.source.output_type
    if output_type is None:
        return None
    name = getattr(output_type, "__qualname__", None) or repr(output_type)
    return f"{getattr(output_type, '__module__', '')}.{name}".lstrip(".")


def resume_hint(run_id: str) -> str:
    """How to resume `run_id` (added to a checkpointed run's errors)."""
    return f"run {run_id} is checkpointed: resume it with ensemble.run(resume={run_id!r})"


class RunCheckpoint:
    """The checkpoint of one run: where its completed tasks go, and (resuming) what it
    restores."""

    __slots__ = (
        "_claim",
        "_decision",
        "_recorded",
        "_seen",
        "header",
        "pending",
        "run_id",
        "store",
    )

    def __init__(
        self,
        store: CheckpointStore,
        run_id: str,
        saved: SavedRun | None = None,
        decision: ReviewDecision | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.header: dict[str, Any] = dict(saved.header) if saved is not None else {}
        self._recorded: Mapping[str, Mapping[str, Any]] = saved.records if saved else {}
        self._seen: Counter[str] = Counter()
        pending = self.header.get("pending")
        self.pending = PendingReview.from_data(pending) if pending else None
        """The review the resumed run paused at (None: it did not pause)."""
        self._decision = decision
        self._claim = ""

    @classmethod
    async def open(
        cls,
        store: CheckpointStore,
        run_id: str,
        *,
        resume: bool,
        decision: ReviewDecision | None = None,
    ) -> RunCheckpoint:
        """The checkpoint of a new run, or of the run `run_id` being resumed (which must be
        in `store`; a paused one with the `decision` on the review it waits for)."""
        if not resume:
            return cls(store, run_id)
        saved = await store.load(run_id)
        if saved is None:
            raise ValidationError(
                f"resume={run_id!r}: the ensemble's checkpoint has no run with that id "
                "(CheckpointStore.runs() lists the runs it has)"
            )
        checkpoint = cls(store, run_id, saved, decision)
        checkpoint.check_decision()
        return checkpoint

    def check_decision(self) -> None:
        """A paused run resumes with a decision on its pending review; only a paused one."""
        pending, decision = self.pending, self._decision
        if pending is not None and decision is None:
            raise ValidationError(
                f"run {self.run_id} is paused at review {pending.review_id} "
                f"({pending.timing.value.lower().replace('_', ' ')} of task "
                f"'{pending.task_description[:80]}'): resume it with decision="
                "ReviewDecision.Continue(), .Edit(text) or .ExitEarly()"
            )
        if decision is not None and not isinstance(decision, (Continue, Edit, ExitEarly)):
            raise ValidationError(
                "decision must be ReviewDecision.Continue(), .Edit(text) or .ExitEarly(), "
                f"got: {decision!r}"
            )
        if decision is not None and pending is None:
            raise ValidationError(
                f"decision={decision!r}: run {self.run_id} is not paused at a review"
            )

    def take_decision(self, request: ReviewRequest) -> ReviewDecision | None:
        """The resume's decision, once, for the review the run paused at."""
        decision, pending = self._decision, self.pending
        if decision is None or pending is None or not pending.answers(request):
            return None
        self._decision = None
        return decision

    def output_at_gate(self, slot: Slot) -> str | None:
        """The output a task paused at its after-review gate had produced, when `slot` is
        that task and its decision is still to be taken (it resumes at the gate)."""
        pending = self.pending
        if (
            self._decision is None
            or pending is None
            or pending.timing is not ReviewTiming.AFTER_EXECUTION
            or self.header.get("pending_task") != slot.key
        ):
            return None
        return pending.task_output

    @property
    def resuming(self) -> bool:
        """Whether this run continues a recorded one."""
        return bool(self.header)

    @property
    def inputs(self) -> Mapping[str, str]:
        """The recorded run's template inputs."""
        return dict(self.header.get("inputs", {}))

    async def begin(self, plan: list[list[Any]], inputs: Mapping[str, str]) -> None:
        """Check a resumed run plans the tasks the recorded one did, then claim the run id
        and record the run's header (a new run's checkpoint starts empty)."""
        fresh = not self.resuming
        if not fresh:
            _check_same_plan(self.run_id, self.header.get("plan", []), plan)
        header = {**self.header, "plan": plan, "inputs": dict(inputs)}
        self._claim = self.store.new_claim()
        try:
            await self.store.begin(self.run_id, header, claim=self._claim, fresh=fresh)
        except BaseException:
            self.store.release(self._claim)
            raise
        self.header = header

    @property
    def last_seq(self) -> int:
        """The last event `seq` the recorded run is known to have used (a resumed run's
        events go on from there)."""
        seqs = [int(data.get("seq", 0)) for data in self._recorded.values()]
        return max([int(self.header.get("last_seq", 0)), *seqs])

    def slot(self, task: TaskContext) -> Slot:
        """The place of this execution of `task`, and its recorded completion, if any."""
        planned = task.planned
        if task.depth == 0:
            place = str(planned.index)
        else:
            digest = hashlib.sha256(planned.description.encode()).hexdigest()[:16]
            place = f"worker:{planned.role}:{digest}"
        self._seen[place] += 1
        key = f"{place}#{self._seen[place]}"
        data = self._recorded.get(key)
        if data is None:
            return Slot(key, None)
        event = parse_event(data)
        if not isinstance(event, TaskCompleteEvent):
            raise ValidationError(f"checkpoint of run {self.run_id}: {key} is not a task")
        _check_same_task(self.run_id, planned, event)
        return Slot(key, event)

    def parsed(self, task: TaskContext, recorded: TaskCompleteEvent) -> Any:
        """A recorded completion's structured result, read back into the task's type (from
        JSON, as it was written: strict models too)."""
        if recorded.restored_trace is None:
            raise ValidationError(f"checkpoint of run {self.run_id}: a task without its trace")
        output_type = task.planned.source.output_type
        parsed = recorded.parsed_output
        if parsed is None or output_type is None:
            return parsed
        return _adapter(output_type).validate_json(json.dumps(parsed))

    async def record(self, slot: Slot, event: TaskCompleteEvent, output: TaskOutput[Any]) -> None:
        """Record a completed task (even if the run is cancelled meanwhile: a cancel is
        raised once the record is written). A store that fails raises `CheckpointError`."""
        data = serialize_event(dataclasses.replace(event, restored_trace=output.trace))
        try:
            cancelled = await finish_even_if_cancelled(
                self.store.record(self.run_id, slot.key, data)
            )
        except Exception as error:
            raise CheckpointError(
                f"The checkpoint store {self.store!r} could not record task "
                f"'{event.task_description[:80]}' of run {self.run_id}: {describe_error(error)}"
            ) from error
        if cancelled is not None:
            raise cancelled

    async def end(self, status: str, last_seq: int, paused: RunPaused | None = None) -> None:
        """Record how the run ended (a paused run: the review it waits for, and where) and
        release the run id."""
        self.header = {
            **self.header,
            "pending": paused.pending.to_data() if paused is not None else None,
            "pending_task": paused.task_key if paused is not None else None,
            "last_seq": last_seq,
        }
        try:
            await self.store.end(self.run_id, status, self.header)
        finally:
            self.store.release(self._claim)


def _check_same_plan(run_id: str, recorded: list[list[Any]], planned: list[list[Any]]) -> None:
    """A resumed run must plan the same tasks, by description, agent role and position."""
    for before, now in zip(recorded, planned, strict=False):
        if list(before) != list(now):
            raise ValidationError(_changed(run_id, before, now))
    if len(recorded) != len(planned):
        raise ValidationError(
            f"cannot resume run {run_id}: it planned {len(recorded)} tasks, the ensemble now "
            f"plans {len(planned)}"
        )


_PLANNED = ("description", "agent role", "output type")


def _changed(run_id: str, before: list[Any], now: list[Any]) -> str:
    """What changed in the planned task `before` (index, then what `_PLANNED` names)."""
    what = next(
        f"its {name} was {old!r}, now {new!r}"
        for name, old, new in zip(_PLANNED, before[1:], now[1:], strict=False)
        if old != new
    )
    return f"cannot resume run {run_id}: task {before[0]} changed since it was checkpointed: {what}"


def _check_same_task(run_id: str, planned: PlannedTask, recorded: TaskCompleteEvent) -> None:
    if (recorded.task_description, recorded.agent_role) != (planned.description, planned.role):
        raise ValidationError(
            _changed(
                run_id,
                [planned.index, recorded.task_description, recorded.agent_role],
                [planned.index, planned.description, planned.role],
            )
        )
