"""CrewAI's "self-evaluation loop" Flow, rewritten with a `Loop`.

The Flow generates a short post about a topic, has a critic check it (length, tone, no
emojis), and regenerates it with the critic's feedback, at most three times. Here the body
is the two tasks; the critic answers a `Verdict`, and the loop stops once it is valid.

    python examples/self_evaluation_loop.py                          # offline
    AGENTENSEMBLE_MODEL=openai:gpt-4o-mini python examples/self_evaluation_loop.py
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from agentensemble import (
    Agent,
    Ensemble,
    Loop,
    LoopContext,
    MaxIterationsAction,
    ScriptedModel,
    Task,
)


@dataclass
class Verdict:
    valid: bool
    feedback: str


def models() -> tuple[object, object]:
    """The writer's and the critic's models: the environment's, else scripted answers."""
    named = os.environ.get("AGENTENSEMBLE_MODEL")
    if named:
        return named, named
    writer = ScriptedModel(
        [
            "Flying cars are finally here!!! 🚗✈️ Get ready for the future of commuting!",
            "Flying cars are leaving the lab: the first certified models carry passengers "
            "this year. The sky is about to get busier.",
        ]
    )
    critic = ScriptedModel(
        [
            '{"valid": false, "feedback": "No emojis, and say something concrete."}',
            '{"valid": true, "feedback": ""}',
        ]
    )
    return writer, critic


def is_valid(context: LoopContext) -> bool:
    verdict = context.last_outputs["evaluate"].parsed_output
    return bool(verdict.valid)


def main() -> None:
    writer_llm, critic_llm = models()
    writer = Agent("Social media writer", "Write engaging, accurate posts", llm=writer_llm)
    critic = Agent("Critic", "Hold posts to the brand's rules", llm=critic_llm)
    generate = Task(
        "Write a post of at most 280 characters about {topic}, with no emojis",
        expected_output="The post text",
        agent=writer,
        name="generate",
    )
    evaluate = Task(
        "Check the post: at most 280 characters, no emojis, concrete, on brand",
        expected_output="Whether it is valid, and what to change",
        agent=critic,
        output_type=Verdict,
        context=[generate],
        name="evaluate",
    )
    loop = Loop(
        "self_evaluation",
        [generate, evaluate],
        until=is_valid,
        max_iterations=3,
        on_max_iterations=MaxIterationsAction.RETURN_WITH_FLAG,
    )
    output = Ensemble(loops=[loop]).run({"topic": "flying cars"})
    history = output.loop_history("self_evaluation")
    post = history[-1]["generate"].raw
    print(f"After {len(history)} iteration(s):\n{post}")
    if output.loop_stopped_by_max_iterations("self_evaluation"):
        print("(the critic never approved it)")


if __name__ == "__main__":
    main()
