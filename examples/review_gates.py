"""A writer drafts, a person reviews each step, and a tool asks before it publishes.

Run it in a terminal to be the reviewer yourself (c: continue, e: edit, x: exit early);
without a terminal (CI, pipes) a scripted reviewer answers instead.
"""

import os
import sys

from agentensemble import (
    Agent,
    Ensemble,
    HumanInputTool,
    Review,
    ReviewDecision,
    ReviewHandler,
    ReviewPolicy,
    ReviewRequest,
    ScriptedModel,
    Task,
    ToolContext,
    tool,
    tool_call,
)

published: list[str] = []


@tool
async def publish(context: ToolContext, text: str) -> str:
    """Publish the text on the blog."""
    decision = await context.request_approval(f"Publish: {text}", require_handler=True)
    if isinstance(decision, ReviewDecision.ExitEarly):
        return "Publishing rejected by reviewer."
    if isinstance(decision, ReviewDecision.Edit):
        text = decision.revised_output
    published.append(text)
    return "Published."


class ScriptedReviewer(ReviewHandler):
    """Answers as a person might: a sharper title, an answer, and approvals."""

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        print(f"  review ({request.timing.value.lower()}): {request.task_output}")
        if request.task_description.startswith("Propose a title"):
            return ReviewDecision.Edit("Solar Had a Record Year")
        if request.tool_name == "human_input":
            return ReviewDecision.Edit("Keep it under 50 words.")
        return ReviewDecision.Continue()


llm = os.environ.get("AGENTENSEMBLE_MODEL") or ScriptedModel(
    [
        "Solar Is Growing",
        tool_call("human_input", question="How long should the post be?"),
        "Solar had a record year: cheaper panels, more storage, more installs.",
        tool_call("publish", text="Solar had a record year."),
        "The post is live.",
    ]
)
writer = Agent("Writer", "Write short, clear posts", llm=llm, tools=[HumanInputTool()])
editor = Agent("Editor", "Publish approved posts", llm=llm, tools=[publish])
title = Task("Propose a title for a post on solar in 2025", agent=writer)
post = Task("Write the post under the title", agent=writer, context=[title])
launch = Task("Publish the post", agent=editor, context=[post], review=Review.skip())

reviewer: ReviewHandler = ReviewHandler.console() if sys.stdin.isatty() else ScriptedReviewer()
output = Ensemble(
    tasks=[title, post, launch],
    review_handler=reviewer,
    review_policy=ReviewPolicy.AFTER_EVERY_TASK,
).run()

print(f"exit reason: {output.exit_reason.value}")
for done in output.task_outputs:
    print(f"- {done.task_description}: {done.raw}")
print(f"published: {published}")
