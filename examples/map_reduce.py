"""Turn 60 customer reviews into one product brief with MapReduceEnsemble.

Each review is summarised by its own task; the summaries are merged in a tree so that no
reducer reads more than it can hold. Run it once with a fixed chunk size (static) and once
with a token budget (adaptive), on a stand-in model that answers instantly and reports its
token usage the way a provider does.

Swap the FunctionModel for ``"openai:gpt-4o-mini"`` (and set ``max_concurrency``) to run it
for real.
"""

from collections.abc import Sequence

from agentensemble import ChatResponse, FunctionModel, MapReduceEnsemble, Task, Usage
from agentensemble.models import AssistantMessage, Message

REVIEWS = [
    f"Review {n}: {'Battery lasts two days' if n % 3 else 'Strap broke after a week'}."
    for n in range(60)
]


def stand_in(messages: Sequence[Message], tools: object) -> ChatResponse:
    """A review's summary, or a merge saying how many notes it merged."""
    prompt = messages[-1].text or ""
    merged = prompt.count("Likes the battery") + prompt.count("Merged ")
    text = f"Merged {merged} notes." if merged else "Likes the battery; some strap complaints."
    return ChatResponse(AssistantMessage(text), Usage(input_tokens=200, output_tokens=60))


def brief(**strategy: int) -> None:
    ensemble = MapReduceEnsemble(
        items=REVIEWS,
        llm=FunctionModel(stand_in),
        map_task=lambda review: Task(f"Summarise what this customer says: {review}"),
        reduce_task=lambda chunk: Task(
            "Merge these review summaries into one brief", context=chunk
        ),
        **strategy,
    )
    output = ensemble.run()
    assert output.trace is not None
    print(f"{output.trace.workflow} ({strategy}): {output.raw}")
    for level in output.trace.map_reduce_levels:
        print(f"  level {level.level}: {level.task_count} {level.node_type} task(s)")
    print(f"  {output.metrics.total_llm_call_count} model calls in one run")


if __name__ == "__main__":
    brief(chunk_size=8)
    brief(target_token_budget=1_000)
