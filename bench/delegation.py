"""CPU per delegation round trip on an instant model. Prints JSON.

    python bench/delegation.py [--runs 100] [--delegations 20]

A round trip is: the delegating model call that asks for it, the tool call, the guards and
policies, the worker's whole task (one model call), its events and trace, and the result
back in the conversation. Measured as the CPU time (`time.process_time()`) of runs whose
manager (or peer) delegates `--delegations` times, minus the same runs delegating zero
times, divided by the number of delegations; best of five rounds (this shared machine's
speed drifts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from agentensemble import (
    Agent,
    DelegationPolicyResult,
    Ensemble,
    FunctionModel,
    HierarchicalConstraints,
    Task,
    Workflow,
)
from agentensemble.models import Message, ToolResultMessage, ToolSpec, tool_call


def delegating_model(tool_name: str, count: int) -> FunctionModel:
    """Delegates `count` times (one call per turn), then answers."""

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        done = sum(isinstance(message, ToolResultMessage) for message in messages)
        if done < count:
            return tool_call(tool_name, agent_role="Worker", task_description=f"Part {done}")
        return "all done"

    return FunctionModel(reply)


WORKER = FunctionModel(lambda messages, tools: "part done")


async def allow(request: Any, context: Any) -> DelegationPolicyResult:
    return DelegationPolicyResult.allow()


def hierarchical(count: int, **settings: Any) -> Ensemble:
    worker = Agent("Worker", "work", llm=WORKER, max_iterations=1000)
    return Ensemble(
        tasks=[Task("Do the job", agent=worker)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=delegating_model("delegate_task", count),
        manager_max_iterations=1000,
        **settings,
    )


def peer(count: int) -> Ensemble:
    lead = Agent(
        "Lead",
        "lead",
        llm=delegating_model("delegate", count),
        allow_delegation=True,
        max_iterations=1000,
    )
    return Ensemble(
        tasks=[Task("Do the job", agent=lead)], agents=[Agent("Worker", "work", llm=WORKER)]
    )


async def cpu_seconds(ensemble: Ensemble, runs: int) -> float:
    started = time.process_time()
    for _ in range(runs):
        await ensemble.arun()
    return time.process_time() - started


async def per_delegation_us(build: Any, runs: int, delegations: int) -> float:
    rounds = []
    for _ in range(5):
        busy = await cpu_seconds(build(delegations), runs)
        idle = await cpu_seconds(build(0), runs)
        rounds.append((busy - idle) / (runs * delegations) * 1e6)
    return round(min(rounds), 1)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--delegations", type=int, default=20)
    args = parser.parse_args()
    runs, count = args.runs, args.delegations
    constrained = HierarchicalConstraints(
        allowed_workers={"Worker"}, max_calls_per_worker={"Worker": 10_000}
    )
    results = {
        "cpu_us_per_hierarchical_delegation": await per_delegation_us(hierarchical, runs, count),
        "cpu_us_per_hierarchical_delegation_with_constraints_and_async_policy": (
            await per_delegation_us(
                lambda n: hierarchical(
                    n, hierarchical_constraints=constrained, delegation_policies=[allow]
                ),
                runs,
                count,
            )
        ),
        "cpu_us_per_peer_delegation": await per_delegation_us(peer, runs, count),
        "runs": runs,
        "delegations_per_run": count,
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
