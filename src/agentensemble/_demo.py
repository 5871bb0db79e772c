"""The demo ensemble: a researcher with a search tool and a writer, on any model.

With no model configured it runs on `simulated_model()`, a `FunctionModel` that plays both
agents offline, so the demo works on a fresh machine with no credentials.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentensemble.agent import Agent
from agentensemble.ensemble import Ensemble
from agentensemble.models import (
    AssistantMessage,
    ChatModel,
    ChatResponse,
    FunctionModel,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    tool_call,
)
from agentensemble.task import Task
from agentensemble.tools import tool

__all__ = ["build_demo_ensemble", "search_notes", "simulated_model"]

NOTES = {
    "honeybees": [
        "A colony has one queen, a few hundred drones and up to 60,000 workers.",
        "Foragers tell nest-mates where flowers are with the waggle dance.",
        "Bees pollinate roughly a third of the crops people eat.",
        "Colony losses are driven by varroa mites, pesticides and poor forage.",
    ],
    "solar power": [
        "Photovoltaic module prices fell about 90% between 2010 and 2020.",
        "Solar is now the cheapest source of new electricity in most countries.",
        "Output varies by hour and season, so storage and grids matter.",
    ],
}


@tool
def search_notes(query: str) -> str:
    """Search the research notes for a topic and return the matching facts, one per line."""
    key = query.strip().lower()
    for topic, facts in NOTES.items():
        if topic in key or key in topic:
            return "\n".join(facts)
    return f"No notes found for '{query}'. Known topics: {', '.join(NOTES)}"


def build_demo_ensemble(llm: ChatModel, **settings: Any) -> Ensemble:
    """Research a `{topic}` with the search tool, then write a short article from the notes.

    `settings` are passed to `Ensemble` (listeners, a trace exporter...)."""
    researcher = Agent(
        "Researcher",
        "Find accurate, specific facts",
        background="A meticulous analyst who always checks the notes before answering.",
        llm=llm,
        tools=[search_notes],
        max_iterations=4,
    )
    writer = Agent("Writer", "Turn research into clear prose for a general audience", llm=llm)
    research = Task(
        "Research {topic} using the search_notes tool",
        "A bullet list of the key facts",
        agent=researcher,
    )
    article = Task(
        "Write a short article about {topic} from the research",
        "Two short paragraphs",
        agent=writer,
        context=[research],
    )
    return Ensemble(tasks=[research, article], name="demo", **settings)


def simulated_model() -> FunctionModel:
    """A model that plays the demo's researcher and writer without any network."""
    return FunctionModel(_simulate)


def _simulate(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ChatResponse:
    system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
    user = messages[1].text if isinstance(messages[1], UserMessage) else ""
    results = [m.text for m in messages if isinstance(m, ToolResultMessage)]
    if tools and not results:
        reply = AssistantMessage(tool_calls=(tool_call("search_notes", query=_topic(user)),))
    elif "You are Researcher" in system:
        facts = results[-1].splitlines() if results else []
        reply = AssistantMessage(text="\n".join(f"- {fact}" for fact in facts))
    else:
        reply = AssistantMessage(text=_article(user))
    return ChatResponse(reply, _estimate_usage(messages, reply))


def _topic(user_prompt: str) -> str:
    task = user_prompt.split("## Task\n", 1)[-1].split("\n", 1)[0]
    return task.removeprefix("Research ").split(" using ", 1)[0]


def _article(user_prompt: str) -> str:
    facts = [line[2:].rstrip(".") for line in user_prompt.splitlines() if line.startswith("- ")]
    task = user_prompt.split("## Task\n", 1)[-1].split("\n", 1)[0]
    topic = task.removeprefix("Write a short article about ").split(" from ", 1)[0]
    if not facts:
        return f"There is little on record about {topic} yet."
    first = f"{topic.capitalize()} reward a closer look. {facts[0]}."
    rest = " ".join(f"{fact}." for fact in facts[1:])
    return f"{first}\n\n{rest}".strip()


def _estimate_usage(messages: Sequence[Message], reply: AssistantMessage) -> Usage:
    prompt_chars = sum(len(m.text or "") for m in messages)
    reply_chars = len(reply.text or "") + len(json.dumps([c.arguments for c in reply.tool_calls]))
    return Usage(prompt_chars // 4, max(1, reply_chars // 4))
