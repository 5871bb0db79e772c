"""Task-first: no agents to declare; roles are synthesised from the task descriptions.

Runs offline on scripted replies; set AGENTENSEMBLE_MODEL (e.g. openai:gpt-4o-mini) to use a
real model.
"""

import os

import agentensemble
from agentensemble import ScriptedModel

llm = os.environ.get("AGENTENSEMBLE_MODEL") or ScriptedModel(
    ["- Bees dance to share directions.", "Bees talk by dancing."]
)

output = agentensemble.run(
    llm,
    "Research how honeybees communicate",
    "Summarise the research in one sentence",
)
for task_output in output.task_outputs:
    print(f"{task_output.agent_role}: {task_output.raw}")
