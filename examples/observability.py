"""Watching a run: a listener, token streaming, cost, and a trace written to disk."""

import os
import tempfile

from agentensemble import (
    CaptureMode,
    CostConfiguration,
    Ensemble,
    EnsembleListener,
    JsonTraceExporter,
    ScriptedModel,
    Task,
    Usage,
    tool,
    tool_call,
)
from agentensemble.observability import load_trace, summarize_trace


@tool
def disk_usage(path: str) -> str:
    """Report disk usage for a path."""
    return f"{path}: 71% used"


class Audit(EnsembleListener):
    async def on_tool_call(self, event):
        print(f"[audit] {event.agent_role} called {event.tool_name} -> {event.tool_result}")


llm = os.environ.get("AGENTENSEMBLE_MODEL") or ScriptedModel(
    [tool_call("disk_usage", path="/var"), "Disk /var is 71% full; no action needed yet."],
    usage=Usage(400, 60),
)
tokens: list[str] = []
with tempfile.TemporaryDirectory() as directory:
    output = Ensemble(
        tasks=[Task("Check the disk usage of /var", tools=[disk_usage])],
        llm=llm,
        listeners=[Audit()],
        on_token=lambda event: tokens.append(event.token),
        capture_mode=CaptureMode.STANDARD,
        cost_configuration=CostConfiguration("0.00000015", "0.0000006"),
        trace_exporter=JsonTraceExporter(directory),
    ).run()
    trace = load_trace(os.path.join(directory, f"{output.trace.ensemble_id}.json"))

print("streamed:", "".join(tokens))
print("cost:", output.metrics.total_cost_estimate)
print(summarize_trace(trace))
