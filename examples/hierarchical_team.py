"""A manager delegates to a researcher, a writer and a reviewer, in stages, under a policy."""

import os

from agentensemble import (
    Agent,
    DelegationPolicyContext,
    DelegationPolicyResult,
    DelegationRequest,
    Ensemble,
    HierarchicalConstraints,
    ScriptedModel,
    Task,
    Workflow,
    tool_call,
)


def delegate(role: str, description: str) -> object:
    return tool_call("delegate_task", agent_role=role, task_description=description)


# One scripted model plays the manager and the workers, in the order the run asks them.
llm = os.environ.get("AGENTENSEMBLE_MODEL") or ScriptedModel(
    [
        delegate("Writer", "Draft the summary"),  # refused: stage 0 comes first
        delegate("Researcher", "Collect three facts about solar adoption in 2025"),
        "1. Record installs. 2. Falling panel prices. 3. Grid storage growth.",
        delegate("writer", "Draft a 3-sentence summary of the facts"),
        "Solar installs hit a record as panel prices fell and storage grew.",
        delegate("Reviewer", "Check the summary for accuracy"),
        "Accurate. Approved.",
        "Solar had a record year: cheaper panels and more storage. Reviewed and approved.",
    ]
)


def keep_it_short(
    request: DelegationRequest, context: DelegationPolicyContext
) -> DelegationPolicyResult:
    """Trim long subtask descriptions before any worker sees them."""
    if len(request.task_description) > 200:
        return DelegationPolicyResult.modify(
            request.with_changes(task_description=request.task_description[:200])
        )
    return DelegationPolicyResult.allow()


researcher = Agent("Researcher", "Find accurate, current facts", llm=llm)
writer = Agent("Writer", "Write clear, short prose", llm=llm)
reviewer = Agent("Reviewer", "Catch errors before publication", llm=llm)

ensemble = Ensemble(
    tasks=[
        Task("Research solar adoption in 2025", agent=researcher),
        Task("Summarize the research", agent=writer),
        Task("Review the summary", agent=reviewer),
    ],
    workflow=Workflow.HIERARCHICAL,
    hierarchical_constraints=HierarchicalConstraints(
        required_workers={"Researcher", "Writer"},
        required_stages=[["Researcher"], ["Writer"], ["Reviewer"]],
        max_calls_per_worker={"Researcher": 2},
    ),
    delegation_policies=[keep_it_short],
    on_delegation_started=lambda e: print(f"-> {e.worker_role}: {e.task_description}"),
    on_delegation_failed=lambda e: print(f"x  {e.worker_role}: {e.failure_reason[:60]}..."),
)

output = ensemble.run()
for task_output in output.task_outputs:
    print(f"[{task_output.agent_role}] {task_output.raw}")
print(f"model calls: {output.metrics.total_llm_call_count}")
