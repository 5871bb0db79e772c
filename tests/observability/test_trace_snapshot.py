"""The trace format, as a normalized snapshot: a format change is a visible diff."""

import json
from typing import Any

from inline_snapshot import snapshot

from agentensemble import Agent, CaptureMode, Ensemble, ScriptedModel, Task, Usage, tool
from agentensemble.models import ToolCall
from agentensemble.observability import ExecutionTrace

TIMES = {"started_at", "completed_at"}
DURATIONS = {
    "duration",
    "latency",
    "total_duration",
    "llm_latency",
    "tool_execution_time",
    "prompt_build_time",
    "memory_retrieval_time",
    "total_llm_latency",
    "total_tool_execution_time",
}


def normalize(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: normalize(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(item) for item in value]
    if key in TIMES:
        return "<time>"
    if key in DURATIONS:
        return "<duration>"
    if key == "ensemble_id":
        return "<run id>"
    return value


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_trace_json_shape() -> None:
    llm = ScriptedModel([ToolCall("c1", "add", '{"a": 2, "b": 3}'), "5"], usage=Usage(20, 4))
    agent = Agent("Calculator", "Add", llm=llm, tools=[add])
    output = Ensemble(
        tasks=[Task("Add 2 and 3", "The sum", agent=agent)],
        capture_mode=CaptureMode.FULL,
        trace_exporter=_Discard(),
    ).run()
    assert output.trace is not None
    assert normalize(json.loads(output.trace.to_json())) == snapshot(
        {
            "schema_version": "1.5",
            "ensemble_id": "<run id>",
            "workflow": "SEQUENTIAL",
            "capture_mode": "FULL",
            "started_at": "<time>",
            "completed_at": "<time>",
            "total_duration": "<duration>",
            "exit_reason": "COMPLETED",
            "inputs": {},
            "agents": [
                {
                    "role": "Calculator",
                    "goal": "Add",
                    "background": None,
                    "tool_names": ["add"],
                    "allow_delegation": False,
                }
            ],
            "task_traces": [
                {
                    "task_index": 1,
                    "agent_role": "Calculator",
                    "task_description": "Add 2 and 3",
                    "expected_output": "The sum",
                    "started_at": "<time>",
                    "completed_at": "<time>",
                    "duration": "<duration>",
                    "prompts": {
                        "system": """\
You are Calculator.

Your personal goal is: Add

You must produce a final answer that satisfies the expected output described in the task.
Focus on quality and accuracy. Do not add unnecessary preamble or postscript to your final answer.\
""",
                        "user": """\
## Task
Add 2 and 3

## Expected Output
The sum\
""",
                    },
                    "llm_interactions": [
                        {
                            "iteration_index": 0,
                            "started_at": "<time>",
                            "completed_at": "<time>",
                            "latency": "<duration>",
                            "input_tokens": 20,
                            "output_tokens": 4,
                            "response_type": "TOOL_CALLS",
                            "response_text": None,
                            "tool_calls": [
                                {
                                    "tool_call_id": "c1",
                                    "tool_name": "add",
                                    "arguments": '{"a": 2, "b": 3}',
                                    "parsed_input": {"a": 2, "b": 3},
                                    "result": "5",
                                    "structured_output": 5,
                                    "started_at": "<time>",
                                    "completed_at": "<time>",
                                    "duration": "<duration>",
                                    "outcome": "SUCCESS",
                                }
                            ],
                            "messages": [
                                {
                                    "role": "system",
                                    "content": """\
You are Calculator.

Your personal goal is: Add

You must produce a final answer that satisfies the expected output described in the task.
Focus on quality and accuracy. Do not add unnecessary preamble or postscript to your final answer.\
""",
                                    "tool_calls": [],
                                    "tool_name": None,
                                    "tool_call_id": None,
                                },
                                {
                                    "role": "user",
                                    "content": """\
## Task
Add 2 and 3

## Expected Output
The sum\
""",
                                    "tool_calls": [],
                                    "tool_name": None,
                                    "tool_call_id": None,
                                },
                            ],
                        },
                        {
                            "iteration_index": 1,
                            "started_at": "<time>",
                            "completed_at": "<time>",
                            "latency": "<duration>",
                            "input_tokens": 20,
                            "output_tokens": 4,
                            "response_type": "FINAL_ANSWER",
                            "response_text": "5",
                            "tool_calls": [],
                            "messages": [
                                {
                                    "role": "system",
                                    "content": """\
You are Calculator.

Your personal goal is: Add

You must produce a final answer that satisfies the expected output described in the task.
Focus on quality and accuracy. Do not add unnecessary preamble or postscript to your final answer.\
""",
                                    "tool_calls": [],
                                    "tool_name": None,
                                    "tool_call_id": None,
                                },
                                {
                                    "role": "user",
                                    "content": """\
## Task
Add 2 and 3

## Expected Output
The sum\
""",
                                    "tool_calls": [],
                                    "tool_name": None,
                                    "tool_call_id": None,
                                },
                                {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {"id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'}
                                    ],
                                    "tool_name": None,
                                    "tool_call_id": None,
                                },
                                {
                                    "role": "tool",
                                    "content": "5",
                                    "tool_calls": [],
                                    "tool_name": "add",
                                    "tool_call_id": "c1",
                                },
                            ],
                        },
                    ],
                    "delegations": [],
                    "memory_operations": [],
                    "final_output": "5",
                    "parsed_output": None,
                    "metrics": {
                        "input_tokens": 40,
                        "output_tokens": 8,
                        "total_tokens": 48,
                        "llm_latency": "<duration>",
                        "tool_execution_time": "<duration>",
                        "prompt_build_time": "<duration>",
                        "memory_retrieval_time": "<duration>",
                        "llm_call_count": 2,
                        "tool_call_count": 1,
                        "memory_operations": 0,
                        "cost_estimate": None,
                    },
                    "node_type": None,
                    "map_reduce_level": None,
                    "error": None,
                    "name": None,
                    "restored": False,
                }
            ],
            "metrics": {
                "total_input_tokens": 40,
                "total_output_tokens": 8,
                "total_tokens": 48,
                "total_llm_latency": "<duration>",
                "total_tool_execution_time": "<duration>",
                "total_llm_call_count": 2,
                "total_tool_calls": 1,
                "total_memory_operations": 0,
                "total_memory_retrieval_time": "PT0S",
                "total_cost_estimate": None,
            },
            "total_cost_estimate": None,
            "errors": [],
            "agent_synthesis": [],
            "map_reduce_levels": [],
            "loop_iterations": [],
            "graph_steps": [],
            "warnings": [],
            "failed_tasks": [],
        }
    )


class _Discard:
    def export(self, trace: ExecutionTrace) -> None:
        pass
