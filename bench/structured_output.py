"""CPU cost of structured output and guardrails per task, next to the engine's own. Prints
JSON.

    python bench/structured_output.py [--runs 300]

The model answers instantly (`FunctionModel`) with a 50-field JSON object, either bare or
wrapped in prose and a markdown fence (the extraction path). Each figure is CPU per task
(`time.process_time()`, best of five rounds) of a 2-task sequential run, so the difference
to the plain figure is what parsing, validation and guardrails add.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from overhead import cpu_us_per_task
from pydantic import BaseModel, create_model

from agentensemble import Agent, Ensemble, FunctionModel, GuardrailResult, Task
from agentensemble._output_types import output_spec
from agentensemble.execution._output_parsing import parse_answer
from agentensemble.models import Message, ToolSpec

FIELDS: dict[str, Any] = {
    f"field_{i}": (int if i % 3 == 0 else float if i % 3 == 1 else str, ...) for i in range(50)
}
Wide: type[BaseModel] = create_model("Wide", **FIELDS)
ANSWER = json.dumps(
    {
        name: (i if kind is int else i + 0.5 if kind is float else f"value {i}")
        for i, (name, (kind, _)) in enumerate(FIELDS.items())
    }
)
IN_PROSE = f"Here is the result you asked for:\n\n```json\n{ANSWER}\n```\n\nAnything else?"


def replying(text: str) -> FunctionModel:
    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return text

    return FunctionModel(reply)


def passes(value: Any) -> GuardrailResult:
    return GuardrailResult.success()


async def passes_async(value: Any) -> GuardrailResult:
    return GuardrailResult.success()


def ensemble(text: str, **task_options: Any) -> Ensemble:
    agent = Agent("Worker", "Work", llm=replying(text))
    first = Task("Research the topic", agent=agent, **task_options)
    second = Task("Write it up", agent=agent, context=[first], **task_options)
    return Ensemble(tasks=[first, second])


def parse_us(text: str, repeat: int = 2000) -> float:
    spec = output_spec(Wide)
    started = time.process_time()
    for _ in range(repeat):
        parse_answer(text, spec)
    return (time.process_time() - started) / repeat * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    runs = parser.parse_args().runs
    results = {
        "answer_chars": len(ANSWER),
        "parse_us_50_fields_bare_json": round(parse_us(ANSWER), 1),
        "parse_us_50_fields_fenced_in_prose": round(parse_us(IN_PROSE), 1),
        "cpu_us_per_task": {
            "plain_text": round(cpu_us_per_task(ensemble(ANSWER), runs), 1),
            "output_type_50_fields": round(
                cpu_us_per_task(ensemble(ANSWER, output_type=Wide), runs), 1
            ),
            "output_type_50_fields_fenced_in_prose": round(
                cpu_us_per_task(ensemble(IN_PROSE, output_type=Wide), runs), 1
            ),
            "async_input_and_output_guardrail": round(
                cpu_us_per_task(
                    ensemble(
                        ANSWER, input_guardrails=[passes_async], output_guardrails=[passes_async]
                    ),
                    runs,
                ),
                1,
            ),
            "sync_output_guardrail_in_a_thread": round(
                cpu_us_per_task(ensemble(ANSWER, output_guardrails=[passes]), runs), 1
            ),
        },
        "runs": runs,
        "python": sys.version.split()[0],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
