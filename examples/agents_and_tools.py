"""Explicit agents, a typed tool, context between tasks and template inputs."""

import os

from agentensemble import Agent, Ensemble, ScriptedModel, Task, tool, tool_call


@tool
def exchange_rate(base: str, quote: str) -> float:
    """Current exchange rate from `base` to `quote` currency."""
    return {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93}.get((base, quote), 1.0)


llm = os.environ.get("AGENTENSEMBLE_MODEL") or ScriptedModel(
    [
        tool_call("exchange_rate", base="EUR", quote="USD"),
        "1 EUR = 1.08 USD",
        "At 1.08 USD per euro, a 100 EUR budget is worth 108 USD.",
    ]
)

analyst = Agent("Currency Analyst", "Quote exact exchange rates", llm=llm, tools=[exchange_rate])
advisor = Agent("Travel Advisor", "Explain money matters simply", llm=llm)

rate = Task("Find the {base} to {quote} exchange rate", "One line with the rate", agent=analyst)
advice = Task(
    "Explain what a {amount} {base} budget is worth in {quote}",
    "One sentence",
    agent=advisor,
    context=[rate],
)

output = Ensemble(tasks=[rate, advice]).run(inputs={"base": "EUR", "quote": "USD", "amount": "100"})
print(output.output_for(rate).raw)
print(output.raw)
print(f"tool calls: {output.total_tool_calls}, model calls: {output.metrics.total_llm_call_count}")
