"""Phases of parallel research, a deterministic merge step, and a rate limit on the model.

Runs offline on a FunctionModel; set AGENTENSEMBLE_MODEL to use a real provider.
"""

import os

from agentensemble import (
    Ensemble,
    FunctionModel,
    HandlerContext,
    Phase,
    RateLimit,
    Task,
    Workflow,
)


def offline(messages, tools):
    task = messages[1].text.split("## Task\n", 1)[1].split("\n", 1)[0]
    return f"Findings for: {task}"


llm = os.environ.get("AGENTENSEMBLE_MODEL") or FunctionModel(offline)

markets = [Task(f"Research the {region} market for e-bikes") for region in ("EU", "US", "Asia")]
research = Phase("research", markets, workflow=Workflow.PARALLEL)


def merge(ctx: HandlerContext) -> str:
    return "\n".join(f"- {output.raw}" for output in ctx.context_outputs)


merged = Task("Merge the findings", handler=merge, context=markets)
report = Task("Write a one-paragraph market summary", context=[merged])
synthesis = Phase("synthesis", [merged, report], after=[research])

output = Ensemble(phases=[research, synthesis], llm=llm, rate_limit=RateLimit.per_second(20)).run()
print(output.output_for(merged).raw)
print(output.raw)
print({phase: len(outputs) for phase, outputs in output.phase_outputs.items()})
