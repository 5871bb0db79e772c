"""Testing an ensemble: script the model, then assert on what it was asked."""

from agentensemble import Agent, Ensemble, ScriptedModel, Task, tool, tool_call
from agentensemble.models import ToolResultMessage


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


def test_editor_counts_words_before_answering() -> None:
    model = ScriptedModel([tool_call("word_count", text="one two three"), "3 words"])
    editor = Agent("Editor", "Check lengths", llm=model, tools=[word_count])

    output = Ensemble(tasks=[Task("Count the words in 'one two three'", agent=editor)]).run()

    assert output.raw == "3 words"
    assert len(model.requests) == 2
    tool_reply = model.requests[1].messages[-1]
    assert isinstance(tool_reply, ToolResultMessage)
    assert tool_reply.text == "3"


if __name__ == "__main__":
    test_editor_counts_words_before_answering()
    print("ok")
